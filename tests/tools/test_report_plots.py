"""tools/report.py --plots end to end: tiny real Texas runs (LTGA-Edge and GAT, 3 epochs) trained
by tools/train.py, then every figure written as a PNG; figures and runs that lack an input are
named on stderr and the report still succeeds. Pixels are not checked."""
import json
import math
import shutil

from tests.analysis.figures.tiny_runs import EPOCHS, tiny_ltga_runs  # noqa: F401 (the runs fixture)
from tests.tools.tool_loader import load_tool
from zoo.analysis.figures import FIGURES



def _is_png(path) -> bool:
    return path.is_file() and path.stat().st_size > 1000 and path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_every_figure_is_written(runs, tmp_path, capsys):
    curves = json.loads(next(runs.glob("texas_ltga_edge/*/seed0/metrics.json")).read_text())["curves"]
    assert len(curves) == EPOCHS and all(math.isfinite(r["q_grad_norm"]) and r["q_grad_norm"] > 0 for r in curves)
    out = tmp_path / "figures"
    # --models and --reference pick the runs drawn, as the table's rows
    assert load_tool("report").main([str(runs), "--models", "gat", "--reference", "ltga_edge", "--plots",
                                     str(out)]) == 0
    captured = capsys.readouterr()
    assert captured.out.startswith("# Results")  # the report itself, as without --plots
    assert sorted(p.name for p in out.iterdir()) == sorted(FIGURES.values())
    assert all(_is_png(out / name) for name in FIGURES.values())
    assert all(f"wrote {out / name}" in captured.err for name in FIGURES.values())


def test_missing_inputs_are_named_not_fatal(runs, tmp_path, capsys):
    copy = tmp_path / "runs"
    shutil.copytree(runs / "texas_gat", copy / "texas_gat")
    gat = next(copy.glob("texas_gat/*/seed0"))
    (gat / "best.pt").unlink()
    out = tmp_path / "figures"
    assert load_tool("report").main([str(copy), "--plots", str(out)]) == 0
    err = capsys.readouterr().err
    assert f"note: figures 3, 4, 5, 7 leave out a run: {gat} has no best.pt (the trained weights)" in err
    assert "note: figure 2 not drawn: a critical-difference diagram needs >= 2 rows" in err
    assert "note: figures 9 and 11 not drawn: no run logged a learned q per epoch" in err
    assert "note: figure 3 not drawn: no node-classification run could be rebuilt" in err
    assert "note: figures 5 and 7 not drawn: no run has per-edge q" in err
    assert not out.exists() or not any(out.iterdir())


def test_models_alone_choose_the_runs_drawn(runs, tmp_path, capsys):
    assert load_tool("report").main([str(runs), "--models", "gat", "--plots", str(tmp_path)]) == 0
    err = capsys.readouterr().err
    assert "note: figures 9 and 11 not drawn" in err and "note: figures 5 and 7 not drawn" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == [FIGURES["reliability"], FIGURES["lorenz"]]
