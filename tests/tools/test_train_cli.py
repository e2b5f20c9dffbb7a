"""tools/train.py end to end: a short Cora run from $ZOO_DATA, skipping, --force and bad input."""
import json

from tests.tools.tool_loader import ROOT, load_tool

train_cli = load_tool("train")


def test_short_cora_run_writes_the_run_folder(offline_env, tmp_path, capsys):
    args = [str(ROOT / "recipes/cora_gat.yaml"), "--seeds", "0-1", "--epochs", "30", "--out", str(tmp_path), "--quiet"]
    assert train_cli.main(args) == 0
    (base,) = (tmp_path / "cora_gat").iterdir()
    for seed in (0, 1):
        seed_dir = base / f"seed{seed}"
        assert {"config.yaml", "environment.json", "metrics.json", "best.pt", "tensorboard"} <= {p.name for p in seed_dir.iterdir()}
        metrics = json.loads((seed_dir / "metrics.json").read_text())
        assert metrics["epochs_run"] <= 30 and len(metrics["curves"]) == metrics["epochs_run"]
        # 30 epochs of GAT on Cora is far above chance (1/7) on the test split
        assert metrics["final"]["test"]["accuracy"] > 0.6
    summary = json.loads((base / "summary.json").read_text())
    assert summary["seeds"] == [0, 1] and summary["metrics"]["test"]["accuracy"]["n"] == 2
    assert "accuracy" in capsys.readouterr().out

    before = (base / "seed0" / "metrics.json").stat().st_mtime_ns
    assert train_cli.main(args[:2] + ["0"] + args[3:]) == 0
    assert "skipping" in capsys.readouterr().out
    assert (base / "seed0" / "metrics.json").stat().st_mtime_ns == before
    assert train_cli.main(args[:2] + ["0"] + args[3:] + ["--force"]) == 0
    assert (base / "seed0" / "metrics.json").stat().st_mtime_ns != before


def test_bad_recipe_exits_2_naming_the_key(tmp_path, capsys):
    recipe = tmp_path / "typo.yaml"
    recipe.write_text(f"base: {ROOT / 'recipes/_base/attention_node.yaml'}\ndataset: cora\n"
                      "model: {name: gat}\noptim: {patiance: 3}\n")
    assert train_cli.main([str(recipe), "--out", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "unknown key 'patiance'" in err and "did you mean 'patience'" in err
    assert train_cli.main([str(ROOT / "recipes/cora_gat.yaml"), "--set", "model.heads=x", "--out", str(tmp_path)]) == 2


def test_missing_dataset_offline_exits_1_with_url(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "empty"))
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    assert train_cli.main([str(ROOT / "recipes/pubmed_gcn.yaml"), "--seeds", "0", "--out", str(tmp_path), "--quiet"]) == 1
    assert "https://" in capsys.readouterr().err
