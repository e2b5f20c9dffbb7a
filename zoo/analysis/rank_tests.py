"""Comparing k models over N datasets by ranks: average ranks, Friedman test, Nemenyi CD (Demsar, 2006).

Every function takes a ``k x N`` matrix: one row per model, one column per dataset (the layout
of a results table), with no missing cells.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats


def _matrix(matrix) -> np.ndarray:
    """``matrix`` as a float ``k x N`` array, after checking it is complete."""
    m = np.asarray(matrix, dtype=float)
    if m.ndim != 2 or m.size == 0:
        raise ValueError(f"expected a non-empty models x datasets matrix, got shape {m.shape}")
    if not np.isfinite(m).all():
        row, col = np.argwhere(~np.isfinite(m))[0]
        raise ValueError(f"rank tests need complete blocks, but cell (model {row}, dataset {col}) is {m[row, col]}")
    return m


def rank_matrix(matrix, higher_is_better: bool = True) -> np.ndarray:
    """Rank of each model within each dataset column: 1 is best, ties get their average rank.

    >>> rank_matrix([[0.9, 0.7], [0.8, 0.7], [0.8, 0.6]])
    array([[1. , 1.5],
           [2.5, 1.5],
           [2.5, 3. ]])
    """
    m = _matrix(matrix)
    return stats.rankdata(-m if higher_is_better else m, axis=0)


def average_ranks(matrix, higher_is_better: bool = True) -> np.ndarray:
    """Each model's rank averaged over the datasets (length k; 1 is best, ties averaged).

    >>> average_ranks([[0.9, 0.7], [0.8, 0.7], [0.8, 0.6]])
    array([1.25, 2.  , 2.75])
    """
    return rank_matrix(matrix, higher_is_better).mean(axis=1)


def friedman(matrix, higher_is_better: bool = True) -> dict:
    """Friedman test that all k >= 3 models rank equally over N >= 2 datasets.

    Returns ``{"statistic", "p_value", "ranks"}``: the tie-corrected chi-square statistic with
    k - 1 degrees of freedom (scipy's ``friedmanchisquare``), its p-value and the average ranks.
    The statistic does not depend on ``higher_is_better``; the ranks do.

    >>> r = friedman([[1, 2, 3, 4], [2, 3, 4, 5], [3, 4, 5, 6]])
    >>> float(r["statistic"]), r["ranks"].tolist()
    (8.0, [3.0, 2.0, 1.0])
    """
    m = _matrix(matrix)
    k, n = m.shape
    if k < 3 or n < 2:
        raise ValueError(f"the Friedman test needs at least 3 models and 2 datasets, got {k} and {n}")
    result = stats.friedmanchisquare(*m)
    return {"statistic": float(result.statistic), "p_value": float(result.pvalue),
            "ranks": average_ranks(m, higher_is_better)}


def nemenyi_cd(k: int, n: int, alpha: float = 0.05) -> float:
    """Nemenyi critical difference of average ranks for k models over n datasets.

    CD = q_alpha sqrt(k (k + 1) / (6 n)), q_alpha the studentized range quantile (k groups,
    infinite degrees of freedom) over sqrt(2). Two models whose average ranks differ by more
    than CD differ significantly.

    >>> round(nemenyi_cd(4, 10), 3)   # Demsar (2006), Table 5: q_0.05 = 2.569
    1.483
    """
    if k < 2 or n < 1:
        raise ValueError(f"the Nemenyi CD needs k >= 2 models and n >= 1 datasets, got k={k}, n={n}")
    if not 0 < alpha < 1:
        raise ValueError(f"alpha must lie in (0, 1), got {alpha}")
    q_alpha = stats.studentized_range.ppf(1 - alpha, k, math.inf) / math.sqrt(2)
    return float(q_alpha * math.sqrt(k * (k + 1) / (6 * n)))
