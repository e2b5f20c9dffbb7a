"""Dataset cards (one YAML file per dataset), where they are found, their schema, and the errors
of the data floor.

Cards are looked up in the folders of ``$ZOO_CARDS`` (``os.pathsep``-separated; a card there
overrides a shipped card of the same name), then in the shipped cards: ``zoo/datasets/`` in an
installed wheel, else the checkout's top-level ``datasets/`` (source tree, ``pip install -e .``).
"""
from __future__ import annotations

import difflib
import importlib
import os
import re
from pathlib import Path

import yaml

_PACKAGE = Path(__file__).resolve().parents[1]  # the zoo package folder
REQUIRED_KEYS = ("name", "title", "task", "source", "metric", "citation")
METRICS = {
    "node_classification": ("accuracy", "roc_auc"),
    "graph_regression": ("mae", "rmse", "r2"),
    "graph_classification": ("roc_auc", "ap"),
}
"""Each task's allowed metrics."""
SOURCE_KEYS = {
    "dgl": ("dgl_class", "url", "raw_folder", "files"),
    "ogb": ("ogb_name", "url"),
    "csv": ("url", "raw_folder", "files", "file_urls", "smiles_column"),
    "dgllife": ("dgllife_class", "dgllife_zip", "url", "raw_folder", "files", "file_urls", "smiles_column",
                "target_columns"),
    "synthetic": ("parameters",),
}
"""Each ``source.kind`` with the source fields it needs."""
NODE_KINDS = ("dgl", "synthetic", "ogb")
"""The source kinds of node-classification cards (``ogb``: OGB's ``DglNodePropPredDataset``;
``synthetic``: ``zoo.data.synthetic_sbm_graph`` called with the card's ``source.parameters``)."""
CSV_SPLITS = ("fixed_index_file", "scaffold", "random")
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MD5 = re.compile(r"[0-9a-f]{32}")


class DatasetError(Exception):
    """Base class for every dataset problem (bad card, missing or corrupt files)."""


class DatasetNotFoundError(DatasetError):
    """No card with that name, or the card's raw files are neither on disk nor downloadable."""


class ChecksumMismatchError(DatasetError):
    """A raw file's sha256 differs from the one its card records."""


def package_cards_dir() -> Path:
    """The shipped cards: ``zoo/datasets/`` when installed from a wheel, else ``<checkout>/datasets/``."""
    installed = _PACKAGE / "datasets"
    return installed if installed.is_dir() else _PACKAGE.parent / "datasets"


def cards_dirs() -> list[Path]:
    """Folders searched for cards, first match wins: ``$ZOO_CARDS`` entries, then the shipped cards."""
    extra = [Path(p).expanduser() for p in os.environ.get("ZOO_CARDS", "").split(os.pathsep) if p]
    return [*extra, package_cards_dir()]


def list_cards() -> list[str]:
    """Names of all dataset cards (shipped and ``$ZOO_CARDS``), sorted.

    >>> "cora" in list_cards(), "zinc_smiles" in list_cards()
    (True, True)
    """
    return sorted({path.stem for folder in cards_dirs() for path in folder.glob("*.yaml")})


def card_path(name: str) -> Path:
    """Path of the card file for ``name``: the first folder that has it, else the shipped folder."""
    for folder in cards_dirs():
        if (folder / f"{name}.yaml").is_file():
            return folder / f"{name}.yaml"
    return package_cards_dir() / f"{name}.yaml"


def import_source_object(card: dict, key: str, context: str = ""):
    """The object named by the dotted path ``card["source"][key]`` (e.g. ``dgl.data.CoraGraphDataset``);
    a :class:`DatasetError` naming the card, the key and the path when it cannot be imported.
    ``context`` is added after "cannot be imported" (e.g. " with dgl 2.1.0")."""
    dotted = card["source"][key]
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise DatasetError(
            f"{card_path(card['name'])}: source.{key} {dotted!r} cannot be imported{context} ({exc})."
        ) from None


def load_card(name: str) -> dict:
    """Read and check the card ``<name>.yaml``.

    Names are matched case-insensitively and ``-`` equals ``_`` ("Roman-Empire" is
    ``roman_empire``). An unknown name raises :class:`DatasetNotFoundError` naming the
    nearest card; a card that breaks the schema (datasets/README.md) raises :class:`DatasetError`.

    >>> card = load_card("Cora")
    >>> card["name"], card["task"]
    ('cora', 'node_classification')
    """
    key = str(name).strip().lower().replace("-", "_")
    path = card_path(key)
    if not path.is_file():
        known = list_cards()
        near = difflib.get_close_matches(key, known, n=1, cutoff=0.0)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise DatasetNotFoundError(
            f"No dataset card named {name!r} in {', '.join(map(str, cards_dirs()))}.{hint} "
            f"Available: {', '.join(known) or 'none'}."
        )
    with open(path, encoding="utf-8") as f:
        card = yaml.safe_load(f)
    check_card(card, path)
    return card


def check_card(card: object, path: Path) -> None:
    """Raise :class:`DatasetError` naming ``path`` and the field unless ``card`` fits the schema."""
    if not isinstance(card, dict):
        raise DatasetError(f"{path} must hold a YAML mapping, found {type(card).__name__}.")
    problems = [f"lacks required key {key!r}" for key in REQUIRED_KEYS if key not in card]
    if not problems:
        problems = _problems(card, path)
    if problems:
        raise DatasetError(f"Card {path}: {'; '.join(problems)}. See datasets/README.md (Card fields).")


def _problems(card: dict, path: Path) -> list[str]:
    """What is wrong with a card that has the required keys."""
    task, split = card["task"], card.get("split")
    if card["name"] != path.stem:
        return [f"says name: {card['name']!r}; it must equal the file name {path.stem!r}"]
    if task not in METRICS:
        return [f"task {task!r} is not one of {', '.join(METRICS)}"]
    problems = [] if card["metric"] in METRICS[task] else [
        f"metric {card['metric']!r} is not one for {task} ({', '.join(METRICS[task])})"]
    needed = ("num_classes",) if task == "node_classification" else ("num_tasks", "featurizer")
    problems += [f"lacks {key!r}, which {task} cards need" for key in needed if key not in card]
    keys = ("protocol", "num_splits") if task == "node_classification" else ("protocol", "split_source")
    problems += _split_problems(split, keys, "split")
    problems += _source_problems(card["source"], split, "source")
    if task == "node_classification" and isinstance(card["source"], dict) and \
            card["source"].get("kind") not in NODE_KINDS:
        problems.append(f"node_classification cards need source.kind: {' or '.join(NODE_KINDS)}")
    elif task != "node_classification" and isinstance(card["source"], dict) and card["source"].get("kind") in \
            ("synthetic",):
        problems.append("source.kind synthetic generates node-classification graphs; set task: node_classification")
    if "fallback" in card:
        fallback_split = card["fallback"].get("split") if isinstance(card["fallback"], dict) else None
        problems += _split_problems(fallback_split, keys, "fallback.split")
        problems += _source_problems(card["fallback"], fallback_split, "fallback")
    return problems


def _split_problems(split: object, keys: tuple, where: str) -> list[str]:
    """Problems of a split mapping that must have ``keys``."""
    if not isinstance(split, dict):
        return [f"{where} must be a mapping with {', '.join(keys)}"]
    problems = [f"{where} lacks {key!r}" for key in keys if key not in split]
    fractions = split.get("fractions")
    numbers = isinstance(fractions, list) and all(isinstance(f, (int, float)) for f in fractions)
    if fractions is not None and not (numbers and len(fractions) == 3 and min(fractions) >= 0
                                      and abs(sum(fractions) - 1) < 1e-9):
        problems.append(f"{where}.fractions must be three non-negative numbers summing to 1, not {fractions}")
    return problems


def _source_problems(source: object, split: object, where: str) -> list[str]:
    """Problems of one source mapping (``source`` or ``fallback``)."""
    if not isinstance(source, dict):
        return [f"{where} must be a mapping"]
    kind = source.get("kind")
    if kind not in SOURCE_KEYS:
        return [f"{where}.kind {kind!r} is not one of {', '.join(SOURCE_KEYS)}"]
    problems = [f"{where} of kind {kind} lacks {key!r}" for key in SOURCE_KEYS[kind] if key not in source]
    if kind == "synthetic":
        return problems if isinstance(source.get("parameters", {}), dict) else [
            f"{where}.parameters must map synthetic_sbm_graph's arguments to values, e.g. {{num_nodes: 1000, "
            f"num_edges: 10000}}"]
    files = source.get("files") or {}
    if not isinstance(files, dict):
        return [f"{where}.files must map each file name to its sha256"]
    problems += [f"{where}.files[{file!r}] must be a lowercase hex sha256 (64 digits) or null"
                 for file, sha in files.items() if sha is not None and not _SHA256.fullmatch(str(sha))]
    problems += _download_problems(source, files, where)
    if kind in ("csv", "dgllife"):
        if len(files) > 1 and source.get("table") not in files:
            problems.append(f"{where} of kind {kind} with several files needs table: <one of them>")
        if not ("target_columns" in source or "target_function" in source):
            problems.append(f"{where} of kind {kind} needs target_columns or target_function")
        protocol = split.get("protocol") if isinstance(split, dict) else None
        if protocol not in CSV_SPLITS:
            problems.append(f"the split of a {kind} source must have protocol {' | '.join(CSV_SPLITS)}, "
                            f"not {protocol!r}")
        elif protocol == "fixed_index_file" and split.get("index_file") not in files:
            problems.append("split.index_file must name one of the source's files")
        elif protocol != "fixed_index_file" and len(split.get("fractions") or ()) != 3:
            problems.append(f"a {protocol} split needs fractions: [train, val, test]")
    return problems


def _download_problems(source: dict, files: dict, where: str) -> list[str]:
    """Problems of the fields that say how a source is downloaded and checked."""
    problems = []
    if source.get("archive") not in (None, "zip"):
        problems.append(f"{where}.archive must be zip (the url is a zip of the files), not {source['archive']!r}")
    sha = source.get("archive_sha256")
    if sha is not None and not _SHA256.fullmatch(str(sha)):
        problems.append(f"{where}.archive_sha256 must be a lowercase hex sha256 (64 digits) or null")
    md5 = source.get("md5") or {}
    if not isinstance(md5, dict):
        return [*problems, f"{where}.md5 must map file names to their published md5"]
    problems += [f"{where}.md5[{file!r}] must name a file of {where}.files and be 32 lowercase hex digits"
                 for file, digest in md5.items() if file not in files or not _MD5.fullmatch(str(digest))]
    urls = source.get("file_urls")
    if urls is not None and (not isinstance(urls, dict) or set(urls) != set(files)):
        problems.append(f"{where}.file_urls must give a URL for each file of {where}.files, and only those")
    if source.get("kind") == "dgl" and urls is None and source.get("archive") is None and len(files) != 1:
        problems.append(f"{where} of kind dgl with several files needs archive: zip (its url is a zip of "
                        "them) or file_urls")
    return problems
