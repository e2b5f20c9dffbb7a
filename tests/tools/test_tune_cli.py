"""tools/tune.py: picks per dataset on validation, prints the pick, names bad arguments."""
import json

from tests.tools.tool_loader import ROOT, load_tool

tune_cli = load_tool("tune")


def test_tune_prints_the_validation_pick_and_runs_it(offline_env, tmp_path, capsys):
    recipes = [str(ROOT / f"recipes/texas_qfrozen_{q}.yaml") for q in ("0.5", "1.5")]
    code = tune_cli.main(recipes + ["--tune-seeds", "0", "--seeds", "0-1", "--epochs", "2", "--out", str(tmp_path)])
    assert code == 0
    (record_file,) = (tmp_path / "tuning").glob("*.json")
    record = json.loads(record_file.read_text())
    assert record["dataset"] == "texas" and set(record["validation"]) == {"texas_qfrozen_0.5", "texas_qfrozen_1.5"}
    best = record["pick"]
    assert record["validation"][best] == max(record["validation"].values())
    assert f"texas: {best} (val" in capsys.readouterr().out
    (run,) = (tmp_path / best).iterdir()
    assert (run / "seed1" / "metrics.json").exists()


def test_bad_seed_range_is_named(capsys):
    assert tune_cli.main([str(ROOT / "recipes/texas_qfrozen_0.5.yaml"), "--seeds", "9-x"]) == 2
    assert "9-x" in capsys.readouterr().err
