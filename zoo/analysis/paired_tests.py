"""Paired comparisons of two models over the same seeds: Shapiro-gated t / Wilcoxon, Cohen's d, Holm.

``a[i]`` and ``b[i]`` are the scores of two models on the same seed (same split), so each test
works on the differences ``a - b``.
"""
from __future__ import annotations

import math

import numpy as np
from scipy import stats


def _paired(a, b) -> np.ndarray:
    """The differences ``a - b`` as a float array, after checking shape and finiteness."""
    a, b = np.asarray(a, dtype=float), np.asarray(b, dtype=float)
    if a.ndim != 1 or a.shape != b.shape:
        raise ValueError(f"paired samples must be 1-D and of equal length, got shapes {a.shape} and {b.shape}")
    if len(a) < 2:
        raise ValueError(f"a paired comparison needs at least 2 pairs, got {len(a)}")
    for name, x in (("a", a), ("b", b)):
        if not np.isfinite(x).all():
            raise ValueError(f"paired sample {name} holds a non-finite value: {x[~np.isfinite(x)][0]}")
    # Equal differences computed from different floats (0.61 - 0.59 vs 0.71 - 0.69) must tie.
    return np.round(a - b, 9)


def cohens_d_paired(a, b) -> float:
    """Cohen's d for paired samples: mean(a - b) / sd(a - b), sd with n - 1.

    When every difference is the same, sd is 0: d is 0.0 if that difference is 0, else +-inf
    (a consistent shift with no spread).

    >>> cohens_d_paired([3.0, 5.0, 7.0], [1.0, 2.0, 3.0])
    3.0
    >>> cohens_d_paired([2.0, 3.0], [1.0, 2.0])
    inf
    """
    diff = _paired(a, b)
    if np.ptp(diff) == 0:
        return 0.0 if diff[0] == 0 else math.copysign(math.inf, diff[0])
    return float(diff.mean() / diff.std(ddof=1))


def paired_test(a, b, alpha: float = 0.05) -> dict:
    """Compare paired samples ``a`` and ``b`` (at least 2 pairs).

    A paired t-test when n >= 3 and Shapiro-Wilk does not reject normality of the differences at
    ``alpha``; otherwise the Wilcoxon signed-rank test (scipy defaults: zero differences dropped).
    Differences with zero range are not tested for normality (Shapiro is undefined there) and go
    to Wilcoxon; when they are all zero the result is statistic 0, p 1, as scipy gives.

    Returns ``{"test": "t" | "wilcoxon", "statistic", "p_value", "n", "cohens_d", "mean_diff",
    "shapiro_p"}`` (``shapiro_p`` is None when Shapiro was not run).

    >>> r = paired_test([81.0, 83.0, 79.0, 84.0, 80.0], [79.0, 80.0, 80.0, 80.0, 79.0])
    >>> r["test"], r["n"], r["mean_diff"], round(r["p_value"], 4)
    ('t', 5, 1.8, 0.1045)
    """
    diff = _paired(a, b)
    n = len(diff)
    shapiro_p = None
    if n >= 3 and np.ptp(diff) > 0:
        shapiro_p = float(stats.shapiro(diff).pvalue)
    if shapiro_p is not None and shapiro_p >= alpha:
        test, result = "t", stats.ttest_rel(a, b)
        statistic, p_value = float(result.statistic), float(result.pvalue)
    elif not diff.any():
        test, statistic, p_value = "wilcoxon", 0.0, 1.0
    else:
        result = stats.wilcoxon(diff)
        test, statistic, p_value = "wilcoxon", float(result.statistic), float(result.pvalue)
    return {"test": test, "statistic": statistic, "p_value": p_value, "n": n,
            "cohens_d": cohens_d_paired(a, b), "mean_diff": float(diff.mean()), "shapiro_p": shapiro_p}


def holm(p_values) -> list[float]:
    """Holm-Bonferroni adjusted p-values, in the input order.

    The i-th smallest of m p-values becomes max over j <= i of min(1, (m - j + 1) p_(j)), so the
    adjusted values keep the order of the raw ones and never exceed 1 (statsmodels' "holm").

    >>> holm([0.01, 0.04, 0.03])
    [0.03, 0.06, 0.06]
    """
    p = np.asarray(p_values, dtype=float)
    if p.ndim != 1:
        raise ValueError(f"holm expects a flat list of p-values, got shape {p.shape}")
    bad = p[~((p >= 0) & (p <= 1))]
    if len(bad):
        raise ValueError(f"p-values must lie in [0, 1], got {bad[0]}")
    m = len(p)
    order = np.argsort(p, kind="stable")
    stepped = np.maximum.accumulate(np.minimum(1.0, (m - np.arange(m)) * p[order]))
    adjusted = np.empty(m)
    adjusted[order] = stepped
    return [float(x) for x in adjusted]
