"""Fixtures of the data tests: a folder of temporary cards (``$ZOO_CARDS``) and a pickle payload
that leaves a mark (the loopback HTTP server is in tests/conftest.py)."""
import pickle
from pathlib import Path

import pytest
import yaml

from zoo.data.cards import card_path


@pytest.fixture
def temp_cards(tmp_path, monkeypatch):
    """``write(name, change)``: a copy of the shipped card ``name`` after ``change(card)`` in a
    ``$ZOO_CARDS`` folder, where it overrides the shipped one. Returns the card."""
    folder = tmp_path / "cards"
    folder.mkdir()
    monkeypatch.setenv("ZOO_CARDS", str(folder))

    def write(name: str, change=lambda card: None) -> dict:
        card = yaml.safe_load(card_path(name).read_text())
        change(card)
        (folder / f"{card['name']}.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
        return card

    return write


class _Payload:
    """Unpickling it calls ``open(marker, "w")``: the marker file appears if a payload ever runs."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture
def payload():
    """``payload(marker, size=None)``: a pickle that creates ``marker`` when loaded, zero-padded to
    ``size`` bytes (pickle ignores what follows its STOP opcode) to stand in for a file that size."""

    def make(marker: Path, size: int | None = None) -> bytes:
        data = pickle.dumps(_Payload(marker))
        return data if size is None else data + b"\0" * (size - len(data))

    return make
