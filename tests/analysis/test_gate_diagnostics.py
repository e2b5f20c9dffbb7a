"""SigGate-GT diagnostics against hand-computed cases and a hand-set gate."""
import pytest
import torch

from tools.benchmarks.models import random_molecules
from zoo.analysis.gate_diagnostics import gate_diagnostics, mean_average_distance, stable_rank
from zoo.models import create_model


def test_stable_rank_and_mad_by_hand():
    assert stable_rank(torch.diag(torch.tensor([2.0, 1.0]))) == pytest.approx((4 + 1) / 4)
    assert stable_rank(torch.zeros(3, 2)) == 0.0
    # graph 1: orthogonal pair (distance 1); graph 2: identical pair (distance 0); singletons skipped
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 2.0], [5.0, 1.0]])
    assert mean_average_distance(h, torch.tensor([2, 2, 1])) == pytest.approx(0.5)


def test_gate_statistics_follow_a_hand_set_gate():
    torch.manual_seed(0)
    model = create_model("siggate_gt", dim=16, heads=2, layers=2, local="gine", pe="rwse", rwse_k=20, dim_pe=4)
    for layer in model.gps_layers():  # W_g = 0, b = 3 -> every gate is sigmoid(3) = 0.9526
        torch.nn.init.constant_(layer.attn.gate_proj.bias, 3.0)
    batch = random_molecules(4)
    report = gate_diagnostics(model, [(batch, None)])
    assert len(report) == 2
    for row in report:
        assert row["gate_mean"] == pytest.approx(float(torch.sigmoid(torch.tensor(3.0))), rel=1e-6)
        assert row["gate_sd"] == pytest.approx(0.0, abs=1e-9)
        assert row["gate_above_0.9"] == 1.0 and row["gate_below_0.1"] == 0.0
        # a constant gate c scales every head's output by c: the stable rank does not change
        assert row["stable_rank"] == pytest.approx(row["stable_rank_ungated"], rel=1e-6)
        sizes = batch.batch_num_nodes()
        assert 0 < row["attention_entropy"] <= float(torch.log(sizes.double()).max())
    assert all(layer.attn.record is False for layer in model.gps_layers())


def test_ungated_model_has_no_gate_statistics():
    model = create_model("gps", dim=16, heads=2, layers=1, local="none", pe="rwse", rwse_k=20, dim_pe=4)
    (row,) = gate_diagnostics(model, [(random_molecules(2), None)])
    assert "gate_mean" not in row and row["stable_rank"] == pytest.approx(row["stable_rank_ungated"])
