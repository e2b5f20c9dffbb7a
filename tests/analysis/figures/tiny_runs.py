"""Real run folders for the figure tests: Texas LTGA-Edge and GAT, seed 0, a few epochs of a
width-8 model, trained by tools/train.py into a temporary folder."""
from pathlib import Path

import pytest

from tests.tools.tool_loader import load_tool

RECIPES = Path(__file__).resolve().parents[3] / "recipes"
EPOCHS = 3


def train_tiny_runs(out: Path) -> Path:
    """``out`` holding ``texas_ltga_edge`` and ``texas_gat`` (seed 0, EPOCHS epochs, hidden 8)."""
    train = load_tool("train")
    for recipe in ("texas_ltga_edge", "texas_gat"):
        argv = [str(RECIPES / f"{recipe}.yaml"), "--seeds", "0", "--epochs", str(EPOCHS), "--set", "model.hidden=8",
                "--out", str(out), "--quiet"]
        assert train.main(argv) == 0, recipe
    return out


@pytest.fixture(scope="module", name="runs")
def tiny_ltga_runs(zoo_data, zoo_cache, tmp_path_factory):
    """The tiny runs of :func:`train_tiny_runs`, trained once per test module from the offline data."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in (("ZOO_DATA", zoo_data), ("ZOO_CACHE", zoo_cache), ("ZOO_OFFLINE", "1")):
            patch.setenv(name, str(value))
        yield train_tiny_runs(tmp_path_factory.mktemp("runs"))
