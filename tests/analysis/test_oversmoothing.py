"""MAD (Chen et al., AAAI 2020, Eq. 2-4) against a hand count and a per-graph float64 reference on
scikit-learn's cosine distances; the LTGA paper's Table 19 diagnostics (directional Dirichlet energy,
mean cosine distance) by hand and against dense float64 formulas."""
import dgl
import numpy as np
import pytest
import torch
from sklearn.metrics import pairwise_distances

from zoo.analysis.oversmoothing import (MeanAverageDistance, directional_dirichlet_energy, last_hidden_representation,
                                        mean_average_distance, mean_cosine_distance, oversmoothing_diagnostics)
from zoo.models import create_model


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


# The LTGA paper's Table 19 diagnostics on one graph (Appendix N).

def _path_graph():
    """0 - 1 - 2 stored both ways, with the self-loops the node loader adds."""
    return dgl.add_self_loop(dgl.graph(([0, 1, 1, 2], [1, 0, 2, 1])))


def test_table19_diagnostics_by_hand():
    g = _path_graph()
    # nodes 0 and 1 point the same way (distance 0), node 2 is orthogonal to both (distance 1)
    h = torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]])
    assert directional_dirichlet_energy(h, g) == pytest.approx(0.5)  # edges 0-1: 0, 1-2: 1; self-loops out
    assert mean_cosine_distance(h) == pytest.approx(2 / 3)  # pairs 0-1: 0, 0-2: 1, 1-2: 1
    # directional, not magnitude: rescaling rows changes neither, collapse onto one direction zeroes both
    assert directional_dirichlet_energy(h * torch.tensor([[5.0], [0.1], [7.0]]), g) == pytest.approx(0.5)
    assert directional_dirichlet_energy(torch.tensor([[1.0, 1.0], [2.0, 2.0], [0.5, 0.5]]), g) == pytest.approx(0.0)
    assert mean_cosine_distance(torch.tensor([[1.0, 1.0], [2.0, 2.0], [0.5, 0.5]])) == pytest.approx(0.0, abs=1e-12)
    # opposite directions give the maximum, 2
    assert directional_dirichlet_energy(torch.tensor([[1.0, 0.0], [-1.0, 0.0], [1.0, 0.0]]), g) == pytest.approx(2.0)


def test_table19_diagnostics_match_dense_float64_formulas():
    gen = torch.Generator().manual_seed(3)
    n = 40
    h = torch.randn(n, 6, generator=gen)
    src, dst = torch.randint(0, n, (150,), generator=gen), torch.randint(0, n, (150,), generator=gen)
    g = dgl.to_simple(dgl.to_bidirected(dgl.graph((src, dst), num_nodes=n)))  # symmetric, no repeats
    g = dgl.add_self_loop(dgl.remove_self_loop(g))
    # Dirichlet energy as the Laplacian quadratic form of the row-normalised features: with A the
    # symmetric adjacency (no loops), sum_ij A_ij |u_i - u_j|^2 / 2 = trace(U^T (D - A) U)
    u = h.double().numpy() / np.linalg.norm(h.double().numpy(), axis=1, keepdims=True)
    adjacency = np.zeros((n, n))
    s, d = g.edges()
    adjacency[s.numpy(), d.numpy()] = 1.0
    np.fill_diagonal(adjacency, 0.0)
    laplacian = np.diag(adjacency.sum(1)) - adjacency
    want = np.trace(u.T @ laplacian @ u) / adjacency.sum()
    assert directional_dirichlet_energy(h, g) == pytest.approx(want, rel=1e-10)
    # MAD: scikit-learn's cosine distances averaged over the off-diagonal pairs, and Chen et al.'s
    # MAD (no two rows share a direction here, so the two definitions agree)
    distance = pairwise_distances(h.double().numpy(), metric="cosine")
    want = distance[~np.eye(n, dtype=bool)].mean()
    assert mean_cosine_distance(h) == pytest.approx(want, rel=1e-10)
    assert mean_cosine_distance(h) == pytest.approx(mean_average_distance(h, torch.tensor([n])), rel=1e-10)


def test_last_hidden_layer_is_the_input_of_the_output_layer():
    torch.manual_seed(0)
    g = _path_graph()
    x = torch.randn(3, 5)
    gcn = create_model("gcn", in_feats=5, num_classes=2, hidden=4, layers=3).eval()
    with torch.no_grad():
        want = torch.nn.functional.elu(gcn.convs[1](g, torch.nn.functional.elu(gcn.convs[0](g, x))))
    assert torch.allclose(last_hidden_representation(gcn, g, x), want)
    for name in ("gat", "ltga"):
        model = create_model(name, in_feats=5, num_classes=2, hidden=4, heads=2, layers=2).eval()
        with torch.no_grad():
            want = model.convs[0](g, x).flatten(1)  # ELU inside the hidden layer, heads concatenated
        got = last_hidden_representation(model, g, x)
        assert got.shape == (3, 8) and torch.allclose(got, want)
    one_layer = create_model("gcn", in_feats=5, num_classes=2, layers=1).eval()
    assert last_hidden_representation(one_layer, g, x) is None
    assert oversmoothing_diagnostics(one_layer, g, x) is None
    hidden = last_hidden_representation(gcn, g, x)
    assert oversmoothing_diagnostics(gcn, g, x) == {"dirichlet_energy": directional_dirichlet_energy(hidden, g),
                                                    "mad": mean_cosine_distance(hidden)}
