"""zoo.analysis.figures.lorenz: the pooled and the mean neighbourhood Lorenz curves by hand, and the
latter's Gini against zoo.analysis.attention's per-neighbourhood Gini formula."""
import dgl
import numpy as np
import pytest
import torch

from zoo.analysis.figures.lorenz import attention_lorenz, lorenz_gini, pooled_lorenz


def _graph():
    """Node 1 attends over 2 edges (0.25, 0.75), node 0 over 4 (0.1, 0.4, 0.2, 0.3; shuffled)."""
    g = dgl.graph(([0, 1, 0, 1, 2, 3], [1, 1, 0, 0, 0, 0]))
    return g, torch.tensor([0.75, 0.25, 0.1, 0.4, 0.2, 0.3], dtype=torch.float64)


def test_curve_by_hand():
    g, a = _graph()
    p, curve = attention_lorenz(g, a, points=5)
    assert p.tolist() == [0.0, 0.25, 0.5, 0.75, 1.0]
    # node 1: 0, .125, .25, .625, 1; node 0: 0, .1, .3, .6, 1 (cumulative shares of sorted weights)
    assert curve.tolist() == pytest.approx([0.0, 0.1125, 0.275, 0.6125, 1.0], abs=1e-12)


def test_gini_of_the_curve_is_the_mean_neighbourhood_gini():
    g, a = _graph()
    p, curve = attention_lorenz(g, a, points=5)  # the grid holds every breakpoint k/2 and k/4
    # by hand: node 1: 2 (1*.25 + 2*.75) / 2 - 3/2 = .25; node 0: 2 (.1 + .4 + .9 + 1.6) / 4 - 5/4 = .25
    assert lorenz_gini(g, a) == pytest.approx(0.25, abs=1e-12)
    assert 1 - 2 * float(torch.trapezoid(curve, p)) == pytest.approx(lorenz_gini(g, a), abs=1e-12)


def test_uniform_attention_is_the_diagonal_for_every_head():
    g = dgl.graph(([0, 1, 2, 0, 1], [0, 0, 0, 1, 1]))
    a = torch.tensor([1 / 3, 1 / 3, 1 / 3, 0.5, 0.5])[:, None].expand(-1, 3)
    p, curve = attention_lorenz(g, a, points=7)
    assert curve.tolist() == pytest.approx(p.tolist(), abs=1e-7)
    assert lorenz_gini(g, a) == pytest.approx(0.0, abs=1e-7)


def test_pooled_curve_and_gini_by_hand():
    # sorted 1, 1, 2, 4 of 8: cumulative shares 1/8, 2/8, 4/8, 1; G = 2 (1 + 2 + 6 + 16) / (4 * 8) - 5/4
    p, curve, gini = pooled_lorenz(torch.tensor([[4.0, 1.0], [2.0, 1.0]]), points=9)
    assert curve.tolist() == pytest.approx([0, 1 / 16, 1 / 8, 3 / 16, 1 / 4, 3 / 8, 1 / 2, 3 / 4, 1])
    assert gini == pytest.approx(0.3125)
    assert 1 - 2 * np.trapz(curve, p) == pytest.approx(gini)  # the grid holds every breakpoint k/4


def test_uniform_attention_is_unequal_once_pooled_over_uneven_degrees():
    # node 0 spreads 1 over 3 edges, node 1 over 2: pooled weights 1/3, 1/3, 1/3, 1/2, 1/2
    g = dgl.graph(([0, 1, 2, 0, 1], [0, 0, 0, 1, 1]))
    a = torch.tensor([1 / 3, 1 / 3, 1 / 3, 0.5, 0.5], dtype=torch.float64)
    x = np.sort(a.numpy())
    expected = 2 * np.sum(np.arange(1, 6) * x) / (5 * x.sum()) - 6 / 5  # = 1/10
    assert pooled_lorenz(a)[2] == pytest.approx(expected) and expected == pytest.approx(0.1)
    assert lorenz_gini(g, a) == pytest.approx(0.0, abs=1e-12)
