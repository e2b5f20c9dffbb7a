"""Real run folders for the figure tests: Texas LTGA-Edge and GAT, seed 0, a few epochs of a
width-8 model, trained by tools/train.py into a temporary folder."""
from pathlib import Path

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
