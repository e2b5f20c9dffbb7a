"""tools/train.py end to end: a short Cora run from $ZOO_DATA, skipping and --force (bad input:
test_bad_inputs.py); the DistDGL options' errors (DistDGL runs: tests/engine/test_dist_graph_training.py)."""
import json

from tests.tools.tool_loader import ROOT, load_tool

train_cli = load_tool("train")


def test_short_cora_run_writes_the_run_folder(offline_env, tmp_path, capsys):
    args = [str(ROOT / "recipes/cora_gat.yaml"), "--seeds", "0-1", "--epochs", "10", "--out", str(tmp_path), "--quiet"]
    assert train_cli.main(args) == 0
    (base,) = (tmp_path / "cora_gat").iterdir()
    for seed in (0, 1):
        seed_dir = base / f"seed{seed}"
        assert {"config.yaml", "environment.json", "metrics.json", "best.pt", "tensorboard"} <= {p.name for p in seed_dir.iterdir()}
        metrics = json.loads((seed_dir / "metrics.json").read_text())
        assert metrics["epochs_run"] <= 10 and len(metrics["curves"]) == metrics["epochs_run"]
        # 10 epochs of GAT on Cora is far above chance (1/7) on the test split (about 0.79 on one CPU)
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


def test_dist_options_are_checked_before_any_distributed_service_starts(tmp_path, capsys, monkeypatch):
    sampled = str(ROOT / "recipes/cora_ltga_edge_sampled.yaml")
    assert train_cli.main([sampled, "--ip-config", "ip_config.txt", "--out", str(tmp_path)]) == 2
    assert "--ip-config needs --dist-config" in capsys.readouterr().err
    assert train_cli.main([sampled, "--dist-config", str(tmp_path / "none.json"), "--out", str(tmp_path)]) == 2
    assert f"--dist-config {tmp_path / 'none.json'}: no such partition config" in capsys.readouterr().err
    full_batch = str(ROOT / "recipes/cora_gat.yaml")
    assert train_cli.main([full_batch, "--dist-config", str(tmp_path / "none.json"), "--out", str(tmp_path)]) == 2
    assert "DistGraph training is for node recipes with train.sampler" in capsys.readouterr().err
    two_parts = tmp_path / "parts" / "cora.json"
    two_parts.parent.mkdir()
    two_parts.write_text('{"graph_name": "cora", "num_parts": 2}')
    monkeypatch.delenv("DGL_DIST_MODE", raising=False)
    assert train_cli.main([sampled, "--dist-config", str(two_parts), "--out", str(tmp_path / "runs")]) == 2
    assert "has 2 partitions, but without DGL_DIST_MODE=distributed" in capsys.readouterr().err
    two_parts.write_text('{"graph_name": "citeseer", "num_parts": 1}')
    assert train_cli.main([sampled, "--dist-config", str(two_parts), "--out", str(tmp_path / "runs")]) == 2
    assert "holds the graph 'citeseer' but cora_ltga_edge_sampled trains on 'cora'" in capsys.readouterr().err
    assert not (tmp_path / "runs").exists()


def test_a_diverging_run_exits_3_naming_the_place_and_the_fix(offline_env, tmp_path, capsys):
    """lr 1e30: Adam's first step moves every weight by about 1e30, so epoch 1's loss is NaN on any CPU."""
    args = [str(ROOT / "recipes/cora_gat.yaml"), "--seeds", "0", "--epochs", "5", "--set", "optim.lr=1e30",
            "--out", str(tmp_path), "--quiet"]
    assert train_cli.main(args) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: training diverged: the training loss is nan at "
                                                     "epoch 1 of cora_gat seed 0")
    assert "--set optim.lr=" in err
    (seed_dir,) = tmp_path.glob("cora_gat/*/seed0")
    assert (seed_dir / "last.pt").exists() and not (seed_dir / "metrics.json").exists()
    assert (seed_dir / "diverged.json").exists()
    stamp = (seed_dir / "last.pt").stat().st_mtime_ns
    assert train_cli.main(args) == 3  # a rerun reports the record and trains nothing
    captured = capsys.readouterr()
    assert "epoch 1 of cora_gat seed 0" in captured.err and "diverged.json; a rerun reports it again" in captured.err
    assert "seed 0: diverged in an earlier run" in captured.out and (seed_dir / "last.pt").stat().st_mtime_ns == stamp


def test_attention_scores_that_overflow_are_a_divergence_too(offline_env, tmp_path, capsys):
    """LTGA's q-softmax refuses non-finite logits (zoo.ops.NonFiniteScores) before any loss exists:
    with lr 1e30 that happens right after the first update, and it is reported as a divergence."""
    args = [str(ROOT / "recipes/cora_ltga_head.yaml"), "--seeds", "0", "--epochs", "3", "--set", "optim.lr=1e30",
            "--out", str(tmp_path), "--quiet"]
    assert train_cli.main(args) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and err.startswith("error: training diverged: the attention logits contain NaN")
    assert "of cora_ltga_head seed 0" in err and "--set optim.lr=" in err
    (record,) = tmp_path.glob("cora_ltga_head/*/seed0/diverged.json")
    assert json.loads(record.read_text())["message"] in err


def test_some_seeds_diverged_exits_3_after_the_others_train(monkeypatch, tmp_path, capsys):
    monkeypatch.setattr(train_cli, "run_recipe", lambda *args, **kwargs: {"seeds": [0, 2], "diverged": [1, 3]})
    assert train_cli.main([str(ROOT / "recipes/cora_gat.yaml"), "--seeds", "0-3", "--out", str(tmp_path)]) == 3
    assert capsys.readouterr().err == ("error: seed 1, 3 of cora_gat diverged (its diverged.json has the message; "
                                       "--force retrains it)\n")
