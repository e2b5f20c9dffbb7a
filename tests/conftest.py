"""Shared test fixtures: offline data location and a writable cache per test session."""
import os
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATA_ROOT = Path(os.environ.get("ZOO_DATA") or SHARED_DATA)  # read once, before tests touch the env


@pytest.fixture(scope="session")
def zoo_data() -> Path:
    """The read-only offline data folder ($ZOO_DATA, else ../shared/data); skip if absent."""
    if not DATA_ROOT.is_dir():
        pytest.skip(f"offline data not found at {DATA_ROOT}; set ZOO_DATA to run this test")
    return DATA_ROOT


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory) -> Path:
    """A writable cache shared by the tests of one session."""
    return tmp_path_factory.mktemp("zoo_cache")
