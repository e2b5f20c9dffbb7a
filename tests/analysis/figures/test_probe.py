"""zoo.analysis.figures.probe: edge covariates by hand, and the probe recovering a planted linear
dependence (R^2 and permutation importances against their closed forms)."""
import dgl
import numpy as np
import pandas as pd
import pytest
import torch

from zoo.analysis.figures.probe import binned_means, edge_covariates, linear_probe


def test_planted_linear_dependence():
    # q = 3 a + 0.5 c + noise, a, b, c, noise independent N(0, 1): R^2 = 9.25 / 10.25, and shuffling
    # a covariate with coefficient beta costs 2 beta^2 / Var(q) of R^2 (its signal becomes noise twice).
    rng = np.random.default_rng(0)
    x = pd.DataFrame(rng.normal(size=(20_000, 3)), columns=["a", "b", "c"])
    probe = linear_probe(x.assign(q=3 * x.a + 0.5 * x.c + rng.normal(size=len(x))), repeats=3)
    assert probe["r2"] == pytest.approx(9.25 / 10.25, abs=0.01)  # sd of the sample R^2 ~ 0.001
    importance = probe["covariates"].importance
    assert importance.a == pytest.approx(18 / 10.25, rel=0.05)
    assert importance.c == pytest.approx(0.5 / 10.25, rel=0.2)
    assert abs(importance.b) < 0.002
    assert probe["covariates"].coefficient.a == pytest.approx(3.0, rel=0.02)  # per sd of a (sd 1)
    assert probe["covariates"].spearman.idxmax() == "a"


def test_a_constant_q_cannot_be_probed():
    rows = pd.DataFrame({"a": np.arange(10.0), "q": np.ones(10)})
    with pytest.raises(ValueError, match="q is 1 on all 10 rows: nothing varies to explain"):
        linear_probe(rows)
    with pytest.raises(ValueError, match="needs more than 2 rows, got 2"):
        linear_probe(rows.iloc[:2].assign(q=[1.0, 2.0]))


def test_covariates_by_hand():
    # edges 0->1, 2->1, 1->1 (loop), 1->0, 0->0 (loop); features: 0 and 2 parallel, 1 orthogonal
    g = dgl.graph(([0, 2, 1, 1, 0], [1, 1, 1, 0, 0]))
    features = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 0.0]])
    embedding = torch.tensor([[1.0, 1.0], [1.0, -1.0], [1.0, 1.0]])
    scores = torch.tensor([[1.0, 0.0], [4.0, 1.0], [2.0, 5.0], [0.5, 0.5], [1.5, 0.0]])
    q = torch.tensor([[1.1, 1.2], [1.3, 1.4], [9.0, 9.0], [1.5, 1.6], [9.0, 9.0]])
    rows = edge_covariates(g, features, embedding, scores, q)
    assert rows.q.tolist() == pytest.approx([1.1, 1.2, 1.3, 1.4, 1.5, 1.6])  # loops left out, one row per head
    # in-degrees: node 0 has 2, node 1 has 3, node 2 has 0
    assert rows.src_degree.tolist() == pytest.approx(np.log1p([2, 2, 0, 0, 3, 3]).tolist())
    assert rows.dst_degree.tolist() == pytest.approx(np.log1p([3, 3, 3, 3, 2, 2]).tolist())
    assert rows.feature_cosine.tolist() == pytest.approx([0, 0, 0, 0, 0, 0])
    assert rows.embedding_cosine.tolist() == pytest.approx([0, 0, 0, 0, 0, 0])
    # node 1's neighbourhood maxima per head: 4 and 5; node 0's: 1.5 and 0.5
    assert rows.score_gap.tolist() == pytest.approx([3.0, 5.0, 0.0, 4.0, 1.0, 0.0])
    assert rows.logit_magnitude.tolist() == pytest.approx([1.0, 0.0, 4.0, 1.0, 0.5, 0.5])
    parallel = edge_covariates(dgl.graph(([2], [0])), features, embedding, None, torch.tensor([[1.0]]))
    assert parallel.feature_cosine.tolist() == pytest.approx([1.0]) and "score_gap" not in parallel


def test_binned_means_merge_tied_edges():
    binned = binned_means([1, 1, 1, 1, 2, 3], [0, 0, 0, 0, 6, 12], bins=4)
    assert binned.x.tolist() == [1.0, 2.5] and binned.y.tolist() == [0.0, 9.0] and binned["count"].tolist() == [4, 2]
