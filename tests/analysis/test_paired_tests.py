"""Paired tests against scipy on hand-chosen arrays, Holm and Cohen's d against hand results."""
import math

import numpy as np
import pytest
from scipy import stats

from zoo.analysis.paired_tests import cohens_d_paired, holm, paired_test

A = np.array([81.0, 83.0, 79.0, 84.0, 80.0, 82.0, 85.0, 78.0])
B = np.array([79.0, 80.0, 80.0, 80.0, 79.0, 81.0, 82.0, 77.5])  # differences look normal
C = B.copy()
C[-1] = 58.0                                                    # one heavy outlier in the differences


def test_t_test_when_shapiro_does_not_reject():
    assert stats.shapiro(A - B).pvalue >= 0.05
    result = paired_test(A, B)
    expected = stats.ttest_rel(A, B)
    assert result["test"] == "t" and result["n"] == 8
    assert result["statistic"] == pytest.approx(expected.statistic)
    assert result["p_value"] == pytest.approx(expected.pvalue)
    assert result["mean_diff"] == pytest.approx(np.mean(A - B))
    assert result["shapiro_p"] == pytest.approx(stats.shapiro(A - B).pvalue)


def test_wilcoxon_when_shapiro_rejects():
    assert stats.shapiro(A - C).pvalue < 0.05
    result = paired_test(A, C)
    expected = stats.wilcoxon(A, C)
    assert result["test"] == "wilcoxon"
    assert result["statistic"] == pytest.approx(expected.statistic)
    assert result["p_value"] == pytest.approx(expected.pvalue)


def test_alpha_moves_the_gate():
    p = stats.shapiro(A - B).pvalue
    assert paired_test(A, B, alpha=min(1.0, p * 1.01))["test"] == "wilcoxon"


def test_small_and_degenerate_samples():
    two = paired_test([1.0, 3.0], [0.0, 1.0])
    assert two["test"] == "wilcoxon" and two["shapiro_p"] is None and two["n"] == 2
    assert two["p_value"] == pytest.approx(stats.wilcoxon([1.0, 3.0], [0.0, 1.0]).pvalue)
    same = paired_test([0.5, 0.6, 0.7], [0.5, 0.6, 0.7])
    assert (same["test"], same["statistic"], same["p_value"], same["cohens_d"]) == ("wilcoxon", 0.0, 1.0, 0.0)
    # 0.3-0.1, 0.5-0.3 and 0.7-0.5 differ in the last bits; they must still count as one constant shift.
    shift = paired_test([0.3, 0.5, 0.7], [0.1, 0.3, 0.5])
    assert shift["test"] == "wilcoxon" and shift["cohens_d"] == math.inf


def test_cohens_d_hand_cases():
    assert cohens_d_paired([3.0, 5.0, 7.0], [1.0, 2.0, 3.0]) == pytest.approx(3.0)  # diffs 2, 3, 4
    assert cohens_d_paired([1.0, 2.0, 3.0, 6.0], [1.0, 1.0, 1.0, 1.0]) == pytest.approx(2 / math.sqrt(14 / 3))
    assert cohens_d_paired([1.0, 2.0], [2.0, 3.0]) == -math.inf
    assert cohens_d_paired([1.0, 2.0], [1.0, 2.0]) == 0.0


def test_bad_inputs_are_named():
    with pytest.raises(ValueError, match=r"\(3,\) and \(2,\)"):
        paired_test([1, 2, 3], [1, 2])
    with pytest.raises(ValueError, match="at least 2 pairs, got 1"):
        paired_test([1.0], [2.0])
    with pytest.raises(ValueError, match="nan"):
        cohens_d_paired([1.0, float("nan")], [1.0, 2.0])


def test_holm_hand_example_and_statsmodels_behaviour():
    assert holm([0.01, 0.04, 0.03]) == pytest.approx([0.03, 0.06, 0.06])
    assert holm([0.01, 0.02, 0.03, 0.04, 0.05]) == pytest.approx([0.05, 0.08, 0.09, 0.09, 0.09])
    assert holm([0.5, 0.6, 0.01, 0.9]) == pytest.approx([1.0, 1.0, 0.04, 1.0])  # capped at 1
    assert holm([0.02, 0.02]) == pytest.approx([0.04, 0.04])
    assert holm([]) == []
    raw = np.random.default_rng(0).uniform(0, 0.2, size=12)
    adjusted = np.array(holm(raw))
    order = np.argsort(raw)
    assert (np.diff(adjusted[order]) >= 0).all() and (adjusted >= raw).all() and (adjusted <= 1).all()
    with pytest.raises(ValueError, match="1.2"):
        holm([0.1, 1.2])
