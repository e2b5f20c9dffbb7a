"""zoo.analysis.figures.trained: a run rebuilt from best.pt predicts what its trainer measured, the
recorded scores give back the recorded attention, and each missing input is named."""
import json

import dgl.ops
import pytest
import torch
import yaml

from tests.analysis.figures.tiny_runs import tiny_ltga_runs  # noqa: F401 (the runs fixture)
from zoo.analysis.figures.calibration import expected_calibration_error, reliability_bins
from zoo.analysis.figures.trained import DatasetCache, load_trained, record_forward
from zoo.analysis.runs import ReportError
from zoo.ops import edge_qsoftmax



def _seed_dir(runs, recipe):
    return next(runs.glob(f"{recipe}/*/seed0"))


def test_rebuilt_model_predicts_the_trainers_test_metrics(runs):
    seed_dir = _seed_dir(runs, "texas_ltga_edge")
    recorded = record_forward(*load_trained(seed_dir, DatasetCache()))
    final = json.loads((seed_dir / "metrics.json").read_text())["final"]["test"]
    ece = expected_calibration_error(reliability_bins(recorded.probs.numpy(), recorded.labels.numpy()))
    assert ece == pytest.approx(final["ece"], rel=1e-5)  # float32 logits, torchmetrics' float32 bins
    accuracy = float((recorded.probs.argmax(1) == recorded.labels).double().mean())
    assert accuracy == pytest.approx(final["accuracy"], rel=1e-6)  # torchmetrics returns float32


def test_recorded_scores_and_q_give_the_recorded_attention(runs):
    recorded = record_forward(*load_trained(_seed_dir(runs, "texas_ltga_edge"), DatasetCache()))
    graph = recorded.graph
    assert [tuple(q.shape) for q in recorded.q] == [(graph.num_edges(), 8)] * 2  # per edge and head
    rebuilt = edge_qsoftmax(graph, recorded.scores[0], recorded.q[0])
    assert torch.allclose(rebuilt, recorded.attention, atol=1e-6)
    assert recorded.embedding.shape == (graph.num_nodes(), 8 * 8)


def test_gat_first_layer_attention_sums_to_one_per_node(runs):
    recorded = record_forward(*load_trained(_seed_dir(runs, "texas_gat"), DatasetCache()))
    assert recorded.attention.shape == (recorded.graph.num_edges(), 8) and recorded.q == []
    sums = dgl.ops.copy_e_sum(recorded.graph, recorded.attention.double())
    assert torch.allclose(sums, torch.ones_like(sums), atol=1e-6)


def test_missing_or_unusable_inputs_are_named(runs, tmp_path):
    seed_dir = tmp_path / "texas_gat" / "h" / "seed0"
    seed_dir.mkdir(parents=True)
    source = _seed_dir(runs, "texas_gat")
    for name in ("config.yaml", "metrics.json"):
        (seed_dir / name).write_bytes((source / name).read_bytes())
    with pytest.raises(ReportError, match=f"{seed_dir} has no best.pt .*retrain it with tools/train.py --force"):
        load_trained(seed_dir, DatasetCache())
    (seed_dir / "best.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ReportError, match=f"{seed_dir / 'best.pt'} cannot be read"):
        load_trained(seed_dir, DatasetCache())
    config = yaml.safe_load((seed_dir / "config.yaml").read_text()) | {"task": "graph_regression"}
    (seed_dir / "config.yaml").write_text(yaml.safe_dump(config))
    with pytest.raises(ReportError, match="a graph_regression run; this figure reads node-classification runs only"):
        load_trained(seed_dir, DatasetCache())
