"""tools/sweep.py: runs every recipe it can and reports the ones whose data is missing."""
import json

from tests.tools.tool_loader import ROOT, load_tool

sweep_cli = load_tool("sweep")


def test_sweep_runs_available_recipes_and_reports_missing(offline_env, tmp_path, capsys):
    recipes = [str(ROOT / "recipes/texas_gcn.yaml"), str(ROOT / "recipes/pubmed_gcn.yaml"),
               str(ROOT / "recipes/texas_ltga_head.yaml")]
    code = sweep_cli.main(recipes + ["--seeds", "0-1", "--epochs", "3", "--out", str(tmp_path)])
    assert code == 1
    out = capsys.readouterr().out
    assert "skipped or failed: pubmed_gcn" in out
    for name in ("texas_gcn", "texas_ltga_head"):
        (run,) = (tmp_path / name).iterdir()
        assert (run / "summary.json").exists() and (run / "seed1" / "metrics.json").exists()
    assert not (tmp_path / "pubmed_gcn").exists() or not list((tmp_path / "pubmed_gcn").rglob("metrics.json"))


def test_sweep_in_seed_order_summarises_every_seed(offline_env, tmp_path, capsys):
    recipes = [str(ROOT / "recipes/texas_gcn.yaml"), str(ROOT / "recipes/texas_gat.yaml")]
    code = sweep_cli.main(recipes + ["--seeds", "0-1", "--epochs", "2", "--order", "seed", "--out", str(tmp_path)])
    assert code == 0
    out = capsys.readouterr().out
    order = [line.strip() for line in out.splitlines() if line.startswith("[")]
    assert order == ["[1/2] texas_gcn, seed 0", "[2/2] texas_gat, seed 0", "[1/2] texas_gcn, seed 1",
                     "[2/2] texas_gat, seed 1"]
    for name in ("texas_gcn", "texas_gat"):
        (run,) = (tmp_path / name).iterdir()
        assert json.loads((run / "summary.json").read_text())["seeds"] == [0, 1]


def test_exit_code_3_when_a_seed_diverged_and_1_when_a_recipe_failed(monkeypatch, tmp_path):
    recipe = [str(ROOT / "recipes/texas_gcn.yaml"), "--out", str(tmp_path)]
    outcomes = {"ran": {"texas_gcn": {"seeds": [0, 1], "diverged": []}},
                "diverged": {"texas_gcn": {"seeds": [0], "diverged": [1]}},
                "failed": {"texas_gcn": {"seeds": [0], "diverged": [1]}, "b": "TrainingDiverged: ..."}}
    codes = {}
    for name, results in outcomes.items():
        monkeypatch.setattr(sweep_cli, "run_sweep", lambda *args, results=results, **kwargs: results)
        codes[name] = sweep_cli.main(recipe)
    assert codes == {"ran": 0, "diverged": 3, "failed": 1}
