"""tools/sweep.py: runs every recipe it can and reports the ones whose data is missing."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("sweep_cli", ROOT / "tools" / "sweep.py")
sweep_cli = importlib.util.module_from_spec(spec)
spec.loader.exec_module(sweep_cli)


def test_sweep_runs_available_recipes_and_reports_missing(zoo_data, zoo_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_DATA", str(zoo_data))
    monkeypatch.setenv("ZOO_CACHE", str(zoo_cache))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
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
