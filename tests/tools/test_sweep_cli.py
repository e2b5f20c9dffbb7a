"""tools/sweep.py: runs every recipe it can and reports the ones whose data is missing."""
from tests.tools.tool_loader import ROOT, load_tool

sweep_cli = load_tool("sweep")


def test_sweep_runs_available_recipes_and_reports_missing(offline_env, tmp_path, capsys):
    recipes = [str(ROOT / "recipes/texas_gcn.yaml"), str(ROOT / "recipes/pubmed_gcn.yaml"),
               str(ROOT / "recipes/texas_ltga_head.yaml")]
    code = sweep_cli.main(recipes + ["--seeds", "0-1", "--epochs", "3", "--out", str(tmp_path)])
    assert code == 1
    out = capsys.readouterr().out
    assert "skipped: pubmed_gcn" in out
    for name in ("texas_gcn", "texas_ltga_head"):
        (run,) = (tmp_path / name).iterdir()
        assert (run / "summary.json").exists() and (run / "seed1" / "metrics.json").exists()
    assert not (tmp_path / "pubmed_gcn").exists() or not list((tmp_path / "pubmed_gcn").rglob("metrics.json"))
