"""tools/tune.py: picks per dataset on validation, prints the pick, names bad arguments."""
import importlib.util
import json
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("tune_cli", ROOT / "tools" / "tune.py")
tune_cli = importlib.util.module_from_spec(spec)
spec.loader.exec_module(tune_cli)


def test_tune_prints_the_validation_pick_and_runs_it(zoo_data, zoo_cache, tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_DATA", str(zoo_data))
    monkeypatch.setenv("ZOO_CACHE", str(zoo_cache))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
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
