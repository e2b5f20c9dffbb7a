"""Shared test fixtures: offline data location and a writable cache per test session."""
import os

os.environ.setdefault("OUTDATED_IGNORE", "1")  # ogb, imported by dgl, would ask PyPI for its version
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"


@pytest.fixture(scope="session")
def zoo_data() -> Path:
    """The read-only offline data folder ($ZOO_DATA, else ../shared/data); skip if absent."""
    root = Path(os.environ.get("ZOO_DATA", SHARED_DATA))
    if not root.is_dir():
        pytest.skip(f"offline data not found at {root}; set ZOO_DATA to run this test")
    return root


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory) -> Path:
    """A writable cache shared by the tests of one session."""
    return tmp_path_factory.mktemp("zoo_cache")
