"""paired_comparisons and rank_analysis over results tables, against scipy and hand-computed values."""
import math

import numpy as np
import pytest
from scipy import stats

from tests.analysis.report_inputs import table_of
from zoo.analysis.rendering import render_markdown
from zoo.analysis.runs import ReportError, collect_runs
from zoo.analysis.table_statistics import paired_comparisons, rank_analysis
from zoo.analysis.tables import results_table


def test_paired_comparisons_pair_by_seed_and_holm_per_dataset(runs):
    df = collect_runs(runs)
    df = df[~((df.model == "gat") & (df.dataset == "cora") & (df.seed == 4))]
    table = results_table(df, reference="ltga_edge")
    comparisons = paired_comparisons(table, "ltga_edge")
    cora = comparisons[comparisons.dataset == "cora"].set_index("model")
    assert cora.at["gat", "n"] == 4 and cora.at["gatv2", "n"] == 5
    # constant differences: zero range, so Wilcoxon; d is +inf
    assert cora.at["gatv2", "test"] == "wilcoxon" and cora.at["gatv2", "cohens_d"] == np.inf
    assert cora.at["gat", "mean_diff"] == pytest.approx(2.0)
    assert "(n=4)" in render_markdown(table, comparisons)
    texas = comparisons[comparisons.dataset == "texas"]
    assert len(texas) == 4 and (texas.p_holm >= texas.p_value).all()


def test_rank_analysis_drops_incomplete_datasets(runs):
    table = results_table(collect_runs(runs), reference="ltga_edge")
    ranks = rank_analysis(table)
    assert ranks["datasets"] == ["cora", "texas"] and ranks["dropped"] == {"tolokers": ["gatv2"]}
    assert ranks["friedman"] is not None and ranks["cd"] > 0
    markdown = render_markdown(table, paired_comparisons(table, "ltga_edge"), ranks)
    assert "dropped: tolokers (missing: gatv2)" in markdown
    assert "| gatv2 |" in markdown and " - |" in markdown


REF = {0: 80, 1: 82, 2: 79, 3: 85, 4: 81, 5: 83}
PAIRED = table_of({("ref", "d1"): REF,
                   ("m1", "d1"): {0: 78, 1: 81, 2: 79, 3: 80, 4: 80, 5: 79},  # differences 2 1 0 5 1 4
                   ("m2", "d1"): {2: 70, 3: 75, 4: 72},                         # differences 9 10 9
                   ("m3", "d1"): {5: 60, 9: 61},                                # one common seed
                   ("m1", "d2"): {0: 50, 1: 51}},                               # no reference on d2
                  rows=["ref", "m1", "m2", "m3"], datasets=["d1", "d2"])


def test_paired_comparisons_match_scipy_and_holm_by_hand():
    out = paired_comparisons(PAIRED, "ref").set_index("model")
    assert list(out.index) == ["m1", "m2", "m3"] and set(out.dataset) == {"d1"} and set(out.reference) == {"ref"}
    assert out.n.tolist() == [6, 3, 1]
    ref, m1 = np.array([80, 82, 79, 85, 81, 83.]), np.array([78, 81, 79, 80, 80, 79.])
    assert stats.shapiro(ref - m1).pvalue > 0.05  # normal enough: the t-test
    t = stats.ttest_rel(ref, m1)
    assert out.at["m1", "test"] == "t" and out.at["m1", "statistic"] == pytest.approx(t.statistic)
    assert out.at["m1", "p_value"] == pytest.approx(t.pvalue) and out.at["m1", "mean_diff"] == pytest.approx(13 / 6)
    assert out.at["m1", "cohens_d"] == pytest.approx((13 / 6) / np.std(ref - m1, ddof=1))
    w = stats.wilcoxon([9.0, 10.0, 9.0])  # Shapiro rejects three values of which two tie
    assert out.at["m2", "test"] == "wilcoxon" and out.at["m2", "p_value"] == pytest.approx(w.pvalue)
    # Holm over the two tested comparisons of d1: 0.041 * 2, then max(0.25, 0.082)
    assert out.at["m1", "p_holm"] == pytest.approx(2 * t.pvalue) and out.at["m2", "p_holm"] == pytest.approx(w.pvalue)
    assert out.loc["m3", ["mean_diff", "test", "p_value", "p_holm", "cohens_d"]].isna().all()  # n < 2: not tested


def test_paired_comparisons_need_the_reference_as_a_row():
    with pytest.raises(ReportError, match="reference 'gcn' is not a row of the table; rows: ref, m1, m2, m3"):
        paired_comparisons(PAIRED, "gcn")


# Means: d1 a 3 b 2 c 1; d2 a 3 b 1 c 2; d3 a 2 b 3 c 1 -> ranks a 1 1 2, b 2 3 1, c 3 2 3; d4 lacks c.
RANKED = table_of({(row, d): {0: mean} for (row, d), mean in {
    ("a", "d1"): 3, ("b", "d1"): 2, ("c", "d1"): 1, ("a", "d2"): 3, ("b", "d2"): 1, ("c", "d2"): 2,
    ("a", "d3"): 2, ("b", "d3"): 3, ("c", "d3"): 1, ("a", "d4"): 1, ("b", "d4"): 2}.items()},
    rows=["a", "b", "c"], datasets=["d1", "d2", "d3", "d4"])


def test_rank_analysis_by_hand():
    ranks = rank_analysis(RANKED)
    assert ranks["datasets"] == ["d1", "d2", "d3"] and ranks["dropped"] == {"d4": ["c"]}
    assert ranks["ranks"].tolist() == pytest.approx([4 / 3, 2, 8 / 3])
    # chi2 = 12 / (N k (k + 1)) * sum(R_j^2) - 3 N (k + 1) with rank sums 4, 6, 8, N = k = 3
    chi2 = 12 / 36 * (16 + 36 + 64) - 36
    assert ranks["friedman"]["statistic"] == pytest.approx(chi2)
    assert ranks["friedman"]["p_value"] == pytest.approx(math.exp(-chi2 / 2))  # chi-square, 2 degrees of freedom
    assert ranks["cd"] == pytest.approx(2.343 * math.sqrt(3 * 4 / (6 * 3)), abs=1e-3)  # Demsar's q_0.05, k = 3


def test_rank_analysis_skips_what_it_cannot_run():
    two_rows = table_of({("a", "d1"): {0: 2.0}, ("b", "d1"): {0: 1.0}, ("a", "d2"): {0: 2.0}, ("b", "d2"): {0: 1.0}},
                        rows=["a", "b"], datasets=["d1", "d2"])
    ranks = rank_analysis(two_rows, alpha=0.1)
    assert ranks["friedman"] is None  # fewer than 3 rows
    assert ranks["cd"] == pytest.approx(1.645 * math.sqrt(2 * 3 / (6 * 2)), abs=1e-3)  # q_0.10, k = 2
    none_complete = table_of({("a", "d1"): {0: 1.0}, ("b", "d2"): {0: 1.0}, ("c", "d2"): {0: 2.0}},
                             rows=["a", "b", "c"], datasets=["d1", "d2"])
    ranks = rank_analysis(none_complete)
    assert ranks["datasets"] == [] and ranks["friedman"] is None and ranks["cd"] is None
    assert ranks["dropped"] == {"d1": ["b", "c"], "d2": ["a"]} and ranks["ranks"].isna().all()


TWO_DATASETS = table_of({("ref", "d1"): REF, ("ref", "d2"): {s: v - 10 for s, v in REF.items()},
                         ("m1", "d1"): {0: 78, 1: 81, 2: 79, 3: 80, 4: 80, 5: 79},
                         ("m2", "d1"): {0: 79, 1: 80, 2: 80, 3: 83, 4: 79, 5: 82},
                         ("m1", "d2"): {0: 69, 1: 70, 2: 70, 3: 74, 4: 70, 5: 72},
                         ("m2", "d2"): {0: 66, 1: 69, 2: 68, 3: 70, 4: 69, 5: 70}},
                        rows=["ref", "m1", "m2"], datasets=["d1", "d2"])


def _holm_by_hand(p):
    """Holm (1979): the i-th smallest of m p-values times (m - i + 1), running maximum, capped at 1."""
    order = sorted(range(len(p)), key=p.__getitem__)
    adjusted, running = [0.0] * len(p), 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (len(p) - i) * p[k]))
        adjusted[k] = running
    return adjusted


def test_holm_within_each_dataset_or_across_the_table():
    by_dataset = paired_comparisons(TWO_DATASETS, "ref")
    across = paired_comparisons(TWO_DATASETS, "ref", holm_family="table")
    assert by_dataset.attrs["holm_family"] == "dataset" and across.attrs["holm_family"] == "table"
    p = by_dataset.p_value.tolist()
    assert across.p_value.tolist() == p and len(p) == 4  # same tests, only the correction differs
    assert by_dataset.p_holm.tolist() == pytest.approx(_holm_by_hand(p[:2]) + _holm_by_hand(p[2:]))
    assert across.p_holm.tolist() == pytest.approx(_holm_by_hand(p))
    assert (across.p_holm >= by_dataset.p_holm - 1e-12).all() and (across.p_holm > by_dataset.p_holm).any()
    assert "Holm-corrected over every comparison of the table (all datasets at once);" in \
        render_markdown(TWO_DATASETS, across)
    assert "Holm-corrected over the comparisons within each dataset;" in render_markdown(TWO_DATASETS, by_dataset)
    with pytest.raises(ReportError, match="Holm family 'cell' is not one of dataset, table"):
        paired_comparisons(TWO_DATASETS, "ref", holm_family="cell")
