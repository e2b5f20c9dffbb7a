"""MAD (Chen et al., AAAI 2020, Eq. 2-4) against a hand count and a per-graph float64 reference on
scikit-learn's cosine distances."""
import numpy as np
import pytest
import torch
from sklearn.metrics import pairwise_distances

from zoo.analysis.oversmoothing import MeanAverageDistance, mean_average_distance


def _reference(h: np.ndarray, sizes: list[int]) -> float:
    """Eq. 2-4 literally: per node, the mean of its non-zero distances to the other nodes of its
    graph; MAD the mean of the non-zero node means."""
    node_means, start = [], 0
    for size in sizes:
        distance = pairwise_distances(h[start:start + size], metric="cosine")
        start += size
        for i in range(size):
            others = np.delete(distance[i], i)
            others = others[others > 1e-12]
            node_means.append(others.mean() if len(others) else 0.0)
    node_means = np.array(node_means)
    return float(node_means[node_means > 0].mean())


def test_mad_by_hand():
    # graph 1: orthogonal pair (distance 1 each way); graph 2: equal rows (distance 0: left out of
    # the count, not averaged in as 0); graph 3: a single node (no pair)
    h = torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0], [2.0, 2.0], [5.0, 1.0]])
    assert mean_average_distance(h, torch.tensor([2, 2, 1])) == pytest.approx(1.0)
    # one graph: node 0 is 1 - 1/sqrt(2) from both others, nodes 1 and 2 coincide
    h = torch.tensor([[1.0, 0.0], [1.0, 1.0], [2.0, 2.0]])
    assert mean_average_distance(h, torch.tensor([3])) == pytest.approx(1 - 2**-0.5)
    assert mean_average_distance(torch.ones(3, 2), torch.tensor([3])) == 0.0


def test_mad_matches_a_float64_reference_and_accumulates_over_batches():
    gen = torch.Generator().manual_seed(0)
    sizes = [5, 1, 9, 3, 12]
    h = torch.randn(sum(sizes), 6, generator=gen)
    h[7] = h[6]  # a repeated node: its zero distance must not count
    want = _reference(h.double().numpy(), sizes)
    assert mean_average_distance(h, torch.tensor(sizes)) == pytest.approx(want, rel=1e-12)
    mad = MeanAverageDistance()
    mad.add(h[:6], torch.tensor(sizes[:2]))
    mad.add(h[6:], torch.tensor(sizes[2:]))
    assert mad.value() == pytest.approx(want, rel=1e-12)


def test_mad_refuses_sizes_that_do_not_add_up():
    with pytest.raises(ValueError, match="sizes sum to 4 but h has 3 rows"):
        mean_average_distance(torch.ones(3, 2), torch.tensor([2, 2]))
