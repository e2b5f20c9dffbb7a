"""zoo.engine.index_training: the indices' own optimizer, the Shannon prior, the q log and the
gradient norm reaching the indices."""
import pytest
import torch
from torch import nn

from zoo.engine.index_training import (build_index_optimizer, index_gradient_norm, index_trajectory, shannon_prior,
                                      split_index_parameters)
from zoo.engine.recipe import OptimConfig
from zoo.models.capabilities import HasIndexParameters


class _TwoHeads(nn.Module, HasIndexParameters):
    """q = 1 + a per edge (3 edges) and head (2 heads) in one layer; one frozen weight."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))
        self.frozen = nn.Parameter(torch.ones(1), requires_grad=False)
        self.a = nn.Parameter(torch.tensor([[0.0, 0.5], [0.2, -0.5], [0.4, 0.0]]))

    def index_parameters(self):
        return [self.a]

    def q_values(self):
        return [1 + self.a]


def test_indices_get_their_own_adam_and_the_weights_the_rest():
    model = _TwoHeads()
    weights, index = split_index_parameters(model)
    assert weights == [model.weight] and index == [model.a]  # frozen weights left out too
    optimizer = build_index_optimizer(model, OptimConfig(q_lr=0.3, weight_decay=0.1))
    assert optimizer.param_groups[0]["params"] == [model.a]
    assert (optimizer.param_groups[0]["lr"], optimizer.param_groups[0]["weight_decay"]) == (0.3, 0.0)
    assert build_index_optimizer(nn.Linear(2, 1), OptimConfig()) is None


def test_shannon_prior_and_trajectory_by_hand():
    model = _TwoHeads()
    # mean (q - 1)^2 = (0 + .25 + .04 + .25 + .16 + 0) / 6 = 0.7 / 6
    assert float(shannon_prior(model, 2.0)) == pytest.approx(2 * 0.7 / 6, rel=1e-6)
    assert shannon_prior(model, 0.0) == 0.0 and shannon_prior(nn.Linear(1, 1), 1.0) == 0.0
    row = index_trajectory(model)
    assert row["q_mean/layer0_head0"] == pytest.approx(1.2, rel=1e-6)
    assert row["q_sd/layer0_head1"] == pytest.approx(0.5, rel=1e-6)  # sample sd of 1.5, 0.5, 1.0


def test_gradient_norm_reaching_the_indices_by_hand():
    model = _TwoHeads()
    assert index_gradient_norm(model) is None and "q_grad_norm" not in index_trajectory(model)  # no backward yet
    model.q_values()[0].pow(2).sum().backward()
    # dL/da = 2 q: q = [[1, 1.5], [1.2, 0.5], [1.4, 1]], sum q^2 = 7.9, so ||dL/da|| = 2 sqrt(7.9)
    assert index_gradient_norm(model) == pytest.approx(2 * 7.9**0.5, rel=1e-6)
    assert index_trajectory(model)["q_grad_norm"] == pytest.approx(2 * 7.9**0.5, rel=1e-6)
    model.weight.grad = torch.full((2,), 100.0)  # the weights' gradients do not count
    assert index_gradient_norm(model) == pytest.approx(2 * 7.9**0.5, rel=1e-6)
    assert index_gradient_norm(nn.Linear(1, 1)) is None
