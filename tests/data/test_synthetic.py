"""The DC-SBM generator: planted homophily (measured by DGL's edge_homophily), the class-pair and
degree laws of the model within derived statistical bounds, counts, determinism, errors."""
import os
import resource

import dgl
import numpy as np
import pytest
import torch
import yaml

from zoo.data.cards import check_card
from zoo.data.node_datasets import load_node_dataset
from zoo.data.synthetic import contextual_sbm_card, synthetic_sbm_graph


@pytest.mark.parametrize("homophily", [0.0, 0.13, 0.5, 0.87, 1.0])
def test_measured_edge_homophily_is_the_planted_one(homophily):
    g = synthetic_sbm_graph(3000, 20_000, homophily=homophily, seed=1)
    # round(h * pairs) pairs are same-class by construction: off by at most 1 / (2 pairs), plus
    # edge_homophily's float32 mean (relative rounding 2^-24 per term, 1e-6 bounds it here)
    pairs = g.num_edges() // 2
    assert abs(float(dgl.edge_homophily(g, g.ndata["label"])) - homophily) <= 1 / (2 * pairs) + 1e-6


def test_cross_class_edges_spread_evenly_over_class_pairs():
    k, g = 4, synthetic_sbm_graph(8000, 60_000, num_classes=4, homophily=0.4, seed=2)
    src, dst = g.edges()
    labels = g.ndata["label"]
    a, b = labels[src], labels[dst]
    cross = (a != b) & (src < dst)  # each undirected pair once
    counts = torch.zeros(k, k, dtype=torch.long)
    counts.index_put_((torch.minimum(a, b)[cross], torch.maximum(a, b)[cross]), torch.ones(1, dtype=torch.long),
                      accumulate=True)
    observed = counts[torch.triu_indices(k, k, 1).unbind()].double()
    # classes balanced and theta normalised per class: each of the k(k-1)/2 class pairs is
    # equally likely, so counts are multinomial with p = 2 / (k (k - 1)); allow 5 sd per cell
    total, p = observed.sum(), 2 / (k * (k - 1))
    assert total == 18_000
    assert torch.all((observed - total * p).abs() <= 5 * torch.sqrt(total * p * (1 - p)))


def test_degree_correction_spreads_degrees_beyond_poisson():
    n, m = 20_000, 200_000
    plain = synthetic_sbm_graph(n, m, degree_exponent=None, seed=3).in_degrees().double()
    # equal propensities: each degree is a sum of many rare Bernoulli draws, ~Poisson, so the
    # dispersion var/mean is 1; its estimate over n nodes has sd ~ sqrt(2 / n) = 0.01
    assert abs(plain.var() / plain.mean() - 1) < 0.05
    heavy = synthetic_sbm_graph(n, m, degree_exponent=2.5, seed=3).in_degrees().double()
    assert heavy.mean() == plain.mean() == m / n
    assert heavy.var() / heavy.mean() > 5


@pytest.mark.parametrize("signal", [0.0, 2.0])
def test_features_are_gaussian_around_class_means_of_the_given_norm(signal):
    n, d, k = 12_000, 16, 3
    g = synthetic_sbm_graph(n, 20_000, num_classes=k, num_features=d, feature_signal=signal, seed=4)
    x, y = g.ndata["feat"].double(), g.ndata["label"]
    for c in range(k):
        rows = x[y == c]
        # the sample mean is mu_c + N(0, I / n_c): its norm is within ~sqrt(d / n_c) = 0.06 of |mu_c|
        assert abs(float(rows.mean(0).norm()) - signal) < 0.3
        # unit noise: each coordinate's variance estimate has sd sqrt(2 / n_c) = 0.02
        assert torch.allclose(rows.var(0), torch.ones(d, dtype=torch.float64), atol=0.1)


def test_counts_symmetry_and_masks_are_as_asked():
    g = synthetic_sbm_graph(1500, 12_000, split=(0.6, 0.2, 0.2), seed=5)
    assert (g.num_nodes(), g.num_edges()) == (1500, 12_000)
    src, dst = g.edges()
    assert not bool((src == dst).any())
    assert dgl.to_simple(g).num_edges() == 12_000  # no repeated edge
    assert g.has_edges_between(dst, src).all()  # stored in both directions
    assert g.ndata["feat"].dtype == torch.float32 and g.ndata["label"].dtype == torch.int64
    masks = torch.stack([g.ndata[name] for name in ("train_mask", "val_mask", "test_mask")])
    assert masks.sum(0).eq(1).all() and masks.sum(1).tolist() == [900, 300, 300]
    assert torch.bincount(g.ndata["label"]).tolist() == [300] * 5


def test_same_seed_same_graph_other_seed_other_graph():
    make = lambda seed: synthetic_sbm_graph(2000, 16_000, homophily=0.3, seed=seed)
    a, b, c = make(7), make(7), make(8)
    assert all(torch.equal(x, y) for x, y in zip(a.edges(), b.edges()))
    assert all(torch.equal(a.ndata[key], b.ndata[key]) for key in a.ndata)
    assert not torch.equal(a.edges()[0], c.edges()[0])


@pytest.mark.parametrize("kwargs, message", [
    ({"num_edges": 1001}, "even"),
    ({"homophily": 1.5}, r"homophily=1.5 must be in \[0, 1\]"),
    ({"degree_exponent": 2.0}, "must be > 2"),
    ({"num_edges": 400_000}, "too many"),
    ({"split": (0.5, 0.5, 0.5)}, "summing to 1"),
])
def test_bad_arguments_name_the_value_and_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        synthetic_sbm_graph(**{"num_nodes": 1000, "num_edges": 2000, **kwargs})


@pytest.mark.skipif(os.environ.get("ZOO_SLOW") != "1", reason="slow: builds a 10M-edge graph; set ZOO_SLOW=1")
def test_ten_million_edges_build_within_memory():
    g = synthetic_sbm_graph(1_000_000, 10_000_000, homophily=0.2, num_features=32, seed=0)
    assert (g.num_nodes(), g.num_edges()) == (1_000_000, 10_000_000)
    assert abs(float(dgl.edge_homophily(g, g.ndata["label"])) - 0.2) <= 1e-5
    # edges 2 x 80 MB, features 128 MB (float32, 256 MB while float64): a few hundred MB of arrays
    peak_gb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20
    assert peak_gb < 3, f"peak RSS {peak_gb:.2f} GB"
    assert np.isfinite(g.ndata["feat"].numpy()).all()


def test_contextual_sbm_card_loads_as_a_node_dataset(tmp_path, monkeypatch):
    """The card passes the card schema and loads through $ZOO_CARDS: mean degree and homophily as
    asked (the loader adds one self-loop per node), no degree correction, SNR as the feature signal."""
    card = contextual_sbm_card(0.3, 20, 2.0, num_nodes=600)
    assert card["name"] == "csbm_h0.3_d20_snr2"
    path = tmp_path / f"{card['name']}.yaml"
    path.write_text(yaml.safe_dump(card))
    check_card(card, path)
    monkeypatch.setenv("ZOO_CARDS", str(tmp_path))
    data = load_node_dataset(card["name"])
    src, dst = data.graph.edges()
    loops = src == dst
    assert int(loops.sum()) == 600 and int((~loops).sum()) == 600 * 20
    same = float((data.labels[src[~loops]] == data.labels[dst[~loops]]).double().mean())
    assert abs(same - 0.3) <= 1 / (2 * 6000) + 1e-12
    want = synthetic_sbm_graph(600, 12_000, homophily=0.3, degree_exponent=None, feature_signal=2.0, seed=0)
    assert torch.equal(data.features, want.ndata["feat"])
    with pytest.raises(ValueError, match="too many"):
        contextual_sbm_card(0.5, 500, 1.0, num_nodes=100)
