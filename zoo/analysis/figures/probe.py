"""What the LTGA-Edge gate conditions on (the LTGA paper's Figure 7 and Section 5.3): a linear
probe of the learned per-edge q_ij on edge covariates, with permutation importances.

Covariates per (edge, head) pair, self-loops left out (their similarity is 1 by construction):

* ``src_degree`` / ``dst_degree``: log(1 + in-degree) of each endpoint (self-loop counted), the
  paper's "endpoint degrees" on a log scale, as degrees are heavy-tailed;
* ``feature_cosine``: cosine similarity of the endpoints' raw input features;
* ``embedding_cosine``: cosine similarity of their hidden representations (the first layer's
  output, heads concatenated);
* ``score_gap``: the largest score in the destination's neighbourhood minus the edge's score, per
  head (the quantity that decides pruning; the paper intended it but did not record it);
* ``logit_magnitude``: ``|score|`` per head (likewise intended in the paper, not recorded).

The probe standardises the covariates and fits least squares (scikit-learn); ``r2`` is in-sample
(six coefficients on thousands of rows); permutation importance is the mean drop in R^2 when one
covariate is shuffled (``sklearn.inspection.permutation_importance``), ``share`` its part of the
positive drops (the paper's 0.81 with R^2 = 0.41 can only be such a share).
"""
from __future__ import annotations

import dgl.ops
import numpy as np
import pandas as pd
import torch
from scipy import stats
from sklearn.inspection import permutation_importance
from sklearn.linear_model import LinearRegression
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler

COVARIATES = ("src_degree", "dst_degree", "feature_cosine", "embedding_cosine", "score_gap", "logit_magnitude")


def _cosine(x: torch.Tensor, src: torch.Tensor, dst: torch.Tensor) -> torch.Tensor:
    x = torch.nn.functional.normalize(x.to_dense().double() if x.is_sparse else x.double(), dim=1)
    return (x[src] * x[dst]).sum(1)


def edge_covariates(graph, features: torch.Tensor, embedding: torch.Tensor, scores: torch.Tensor | None,
                    q: torch.Tensor) -> pd.DataFrame:
    """One row per (non-loop edge, head): the covariates above (``score_gap`` and
    ``logit_magnitude`` left out when ``scores`` is None) and ``q`` (``[E, H]``, like ``scores``).

    >>> import dgl
    >>> g = dgl.graph(([0, 1, 1], [1, 1, 0]))
    >>> rows = edge_covariates(g, torch.eye(2), torch.ones(2, 3), torch.tensor([[1.0], [3.0], [0.5]]),
    ...                        torch.tensor([[1.5], [1.0], [2.0]]))
    >>> rows[["score_gap", "feature_cosine", "q"]].to_numpy().tolist()
    [[2.0, 0.0, 1.5], [0.0, 0.0, 2.0]]
    """
    src, dst = graph.edges()
    keep = src != dst
    heads = q.shape[1]
    degree = torch.log1p(graph.in_degrees().double())
    per_edge = {"src_degree": degree[src], "dst_degree": degree[dst], "feature_cosine": _cosine(features, src, dst),
                "embedding_cosine": _cosine(embedding, src, dst)}
    columns = {name: value[keep].repeat_interleave(heads) for name, value in per_edge.items()}
    if scores is not None:
        s = scores.detach().double()
        columns["score_gap"] = (dgl.ops.copy_e_max(graph, s)[dst] - s)[keep].flatten()
        columns["logit_magnitude"] = s.abs()[keep].flatten()
    columns["q"] = q.detach().double()[keep].flatten()
    return pd.DataFrame({name: value.numpy() for name, value in columns.items()})


def linear_probe(rows: pd.DataFrame, target: str = "q", repeats: int = 5, seed: int = 0) -> dict:
    """Fit ``target`` on the other columns of ``rows``: ``r2``, and per covariate ``coefficient``
    (per sd), ``importance`` (mean R^2 drop when shuffled), ``importance_sd``, ``share`` and
    ``spearman`` (rank correlation with the target), as a DataFrame ``covariates``.

    >>> rng = np.random.default_rng(0)
    >>> x = pd.DataFrame(rng.normal(size=(2000, 2)), columns=["a", "b"])
    >>> probe = linear_probe(x.assign(q=3 * x.a + rng.normal(size=2000)))
    >>> round(probe["r2"], 1), probe["covariates"].importance.idxmax()
    (0.9, 'a')
    """
    names = [c for c in rows.columns if c != target]
    x, y = rows[names].to_numpy(), rows[target].to_numpy()
    if len(rows) < len(names) + 2:
        raise ValueError(f"the probe of {target} on {len(names)} covariates needs more than {len(names) + 1} rows, "
                         f"got {len(rows)}")
    if np.ptp(y) == 0:
        raise ValueError(f"{target} is {y[0]:g} on all {len(y)} rows: nothing varies to explain (a per-edge q still "
                         "at its zero-initialised gate, e.g. a best epoch within the warm-up, is 1 everywhere)")
    model = make_pipeline(StandardScaler(), LinearRegression()).fit(x, y)
    drop = permutation_importance(model, x, y, n_repeats=repeats, random_state=seed)
    positive = np.clip(drop.importances_mean, 0, None)
    covariates = pd.DataFrame({
        "coefficient": model[-1].coef_, "importance": drop.importances_mean, "importance_sd": drop.importances_std,
        "share": positive / positive.sum() if positive.sum() > 0 else np.nan,
        "spearman": [stats.spearmanr(x[:, i], y).statistic if np.ptp(x[:, i]) > 0 else np.nan
                     for i in range(len(names))],
    }, index=names)
    return {"r2": float(model.score(x, y)), "covariates": covariates, "rows": len(rows)}


def binned_means(x, y, bins: int = 10) -> pd.DataFrame:
    """Mean ``y`` in quantile bins of ``x`` (tied edges merged): columns ``x`` (mean of the bin),
    ``y`` and ``count``.

    >>> binned_means([1, 2, 3, 4], [10, 20, 30, 40], bins=2).y.tolist()
    [15.0, 35.0]
    """
    x, y = np.asarray(x, dtype=float), np.asarray(y, dtype=float)
    edges = np.unique(np.quantile(x, np.linspace(0, 1, bins + 1)))
    index = np.clip(np.searchsorted(edges, x, side="right") - 1, 0, max(len(edges) - 2, 0))
    frame = pd.DataFrame({"bin": index, "x": x, "y": y}).groupby("bin")
    return pd.DataFrame({"x": frame.x.mean(), "y": frame.y.mean(), "count": frame.size()}).reset_index(drop=True)
