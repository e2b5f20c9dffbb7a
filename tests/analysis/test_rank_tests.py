"""Ranks, Friedman and Nemenyi against scipy and Demsar (2006)."""
import math

import numpy as np
import pytest
from scipy import stats

from zoo.analysis.rank_tests import average_ranks, friedman, nemenyi_cd, rank_matrix

# 4 models x 5 datasets, with ties in datasets 1 and 3.
SCORES = np.array([
    [0.81, 0.60, 0.75, 0.90, 0.55],
    [0.79, 0.62, 0.75, 0.88, 0.57],
    [0.83, 0.60, 0.70, 0.91, 0.60],
    [0.78, 0.58, 0.72, 0.85, 0.50],
])


def test_ranks_average_ties_and_respect_direction():
    assert rank_matrix(SCORES)[:, 1].tolist() == [2.5, 1.0, 2.5, 4.0]
    assert rank_matrix(SCORES)[:, 2].tolist() == [1.5, 1.5, 4.0, 3.0]
    assert average_ranks(SCORES).tolist() == pytest.approx([2.2, 2.1, 1.9, 3.8])
    assert average_ranks(SCORES, higher_is_better=False).tolist() == pytest.approx([2.8, 2.9, 3.1, 1.2])


def test_friedman_matches_scipy():
    result = friedman(SCORES)
    expected = stats.friedmanchisquare(*SCORES)
    assert result["statistic"] == pytest.approx(expected.statistic)
    assert result["p_value"] == pytest.approx(expected.pvalue)
    assert result["ranks"].tolist() == pytest.approx(average_ranks(SCORES).tolist())
    assert friedman(SCORES, higher_is_better=False)["statistic"] == pytest.approx(expected.statistic)


def test_friedman_needs_complete_blocks():
    with pytest.raises(ValueError, match="at least 3 models and 2 datasets, got 2 and 5"):
        friedman(SCORES[:2])
    missing = SCORES.copy()
    missing[1, 3] = np.nan
    with pytest.raises(ValueError, match=r"model 1, dataset 3\) is nan"):
        friedman(missing)


@pytest.mark.parametrize("k, q", [(2, 1.960), (3, 2.343), (4, 2.569), (5, 2.728), (10, 3.164)])
def test_nemenyi_q_matches_demsar_table(k, q):
    assert nemenyi_cd(k, 10) / math.sqrt(k * (k + 1) / 60) == pytest.approx(q, abs=1e-3)


def test_nemenyi_cd_published_case():
    assert nemenyi_cd(4, 10) == pytest.approx(2.569 * math.sqrt(4 * 5 / 60), abs=1e-3)  # 1.483
    assert nemenyi_cd(4, 10, alpha=0.10) / math.sqrt(4 * 5 / 60) == pytest.approx(2.291, abs=1e-3)
    with pytest.raises(ValueError, match="k=1"):
        nemenyi_cd(1, 10)
