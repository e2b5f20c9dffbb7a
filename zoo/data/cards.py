"""Dataset cards (``datasets/<name>.yaml``) and the errors of the data floor."""
from __future__ import annotations

import difflib
from pathlib import Path

import yaml

import zoo

CARDS_DIR = Path(zoo.__file__).resolve().parents[1] / "datasets"
REQUIRED_KEYS = ("name", "title", "task", "source", "metric", "citation")


class DatasetError(Exception):
    """Base class for every dataset problem (bad card, missing or corrupt files)."""


class DatasetNotFoundError(DatasetError):
    """No card with that name, or the card's raw files are neither on disk nor downloadable."""


class ChecksumMismatchError(DatasetError):
    """A raw file's sha256 differs from the one its card records."""


def list_cards() -> list[str]:
    """Names of all dataset cards, sorted."""
    return sorted(path.stem for path in CARDS_DIR.glob("*.yaml"))


def card_path(name: str) -> Path:
    """Path of the card file for ``name`` (which need not exist)."""
    return CARDS_DIR / f"{name}.yaml"


def load_card(name: str) -> dict:
    """Read and check the card ``datasets/<name>.yaml``.

    Names are matched case-insensitively and ``-`` equals ``_`` ("Roman-Empire" is
    ``roman_empire``). An unknown name raises :class:`DatasetNotFoundError` naming the
    nearest card.
    """
    key = str(name).strip().lower().replace("-", "_")
    path = card_path(key)
    if not path.is_file():
        known = list_cards()
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.0)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise DatasetNotFoundError(
            f"No dataset card named {name!r} in {CARDS_DIR}.{hint} "
            f"Available: {', '.join(known) or 'none'}."
        )
    with open(path, encoding="utf-8") as f:
        card = yaml.safe_load(f)
    _check_card(card, path)
    return card


def _check_card(card: object, path: Path) -> None:
    """Raise DatasetError unless ``card`` has the keys every card needs."""
    if not isinstance(card, dict):
        raise DatasetError(f"{path} must hold a YAML mapping, found {type(card).__name__}.")
    missing = [key for key in REQUIRED_KEYS if key not in card]
    if missing:
        raise DatasetError(f"{path} lacks required key(s) {missing}; see datasets/README.md.")
    if card["name"] != path.stem:
        raise DatasetError(
            f"{path} says name: {card['name']!r}; it must equal the file name {path.stem!r}."
        )
