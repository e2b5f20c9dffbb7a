"""zoo.analysis.figures.trajectories: the q and gradient-norm logs of hand-written run folders."""
import json

import pytest
import yaml

from zoo.analysis.figures.trajectories import gradient_norms, q_trajectories
from zoo.analysis.runs import collect_runs


def _run(root, model, seed, curves, q_warmup=2):
    seed_dir = root / f"cora_{model}" / "0123456789" / f"seed{seed}"
    seed_dir.mkdir(parents=True)
    config = {"name": f"cora_{model}", "dataset": "cora", "model": {"name": "ltga"}, "optim": {"q_warmup": q_warmup}}
    (seed_dir.parent / "config.yaml").write_text(yaml.safe_dump(config))
    metrics = {"seed": seed, "split": 0, "dataset": "cora", "main_metric": "accuracy",
               "final": {"val": {"accuracy": 0.8}, "test": {"accuracy": 0.8}}, "curves": curves}
    (seed_dir / "metrics.json").write_text(json.dumps(metrics))
    return seed_dir


def test_mean_q_per_epoch_and_the_norm_after_the_warm_up(tmp_path):
    curves = [{"epoch": e, "q_mean/layer0_head0": 1.0 + e, "q_mean/layer1_head0": 1.0 + 3 * e,
               "q_grad_norm": 10.0 ** -e} for e in range(4)]
    _run(tmp_path, "ltga_edge", 0, curves)
    _run(tmp_path, "gat", 0, [{"epoch": 0, "train_loss": 1.0}])  # no index: in neither figure
    runs = collect_runs(tmp_path)
    q = q_trajectories(runs)
    assert q.model.unique().tolist() == ["ltga_edge"]
    assert q.q.tolist() == pytest.approx([1.0, 3.0, 5.0, 7.0])  # mean of 1 + e and 1 + 3e
    norms, notes = gradient_norms(runs)
    assert norms.epoch.tolist() == [2, 3] and norms.grad_norm.tolist() == pytest.approx([1e-2, 1e-3])
    assert notes == []


def test_a_run_without_the_gradient_log_is_named(tmp_path):
    seed_dir = _run(tmp_path, "ltga_head", 3, [{"epoch": 0, "q_mean/layer0_head0": 1.0}])
    norms, notes = gradient_norms(collect_runs(tmp_path))
    assert norms.empty
    assert notes == [f"{seed_dir}: metrics.json curves have no q_grad_norm (recorded since the gradient-norm log "
                     "was added); retrain the run (tools/train.py --force) to draw its gradient norm"]
