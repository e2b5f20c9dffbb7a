"""zoo.analysis.figures.critical_difference against Demsar (2006): Table 6 (AUC of four C4.5
variants on 14 data sets), its average ranks and CDs (Section 3.2.4) and the groups of Figure 1(a)."""
import pytest

from tests.analysis.report_inputs import table_of
from zoo.analysis.figures.critical_difference import critical_difference, table_critical_difference
from zoo.analysis.report import figure_table
from zoo.analysis.runs import ReportError

NAMES = ["C4.5", "C4.5+m", "C4.5+cf", "C4.5+m+cf"]
# Demsar (2006), Table 6: one row per data set (adult (sample) ... wine), one column per variant. On
# voting the table prints 0.975 for both C4.5+cf and C4.5+m+cf but ranks them 2 and 3 (unrounded
# AUCs), so those two cells are written 0.9751 and 0.9749 here to give its published ranks.
AUC = [[0.763, 0.768, 0.771, 0.798], [0.599, 0.591, 0.590, 0.569], [0.954, 0.971, 0.968, 0.967],
       [0.628, 0.661, 0.654, 0.657], [0.882, 0.888, 0.886, 0.898], [0.936, 0.931, 0.916, 0.931],
       [0.661, 0.668, 0.609, 0.685], [0.583, 0.583, 0.563, 0.625], [0.775, 0.838, 0.866, 0.875],
       [1.000, 1.000, 1.000, 1.000], [0.940, 0.962, 0.965, 0.962], [0.619, 0.666, 0.614, 0.669],
       [0.972, 0.981, 0.9751, 0.9749], [0.957, 0.978, 0.946, 0.970]]
MATRIX = [list(column) for column in zip(*AUC)]  # models x data sets


def test_demsar_table_6_ranks_and_critical_differences():
    at_05 = critical_difference(MATRIX, NAMES, alpha=0.05)
    assert at_05["ranks"].round(3).tolist() == [3.143, 2.000, 2.893, 1.964]
    assert round(at_05["cd"], 2) == 1.25 and at_05["datasets"] == 14
    # "even the difference between the best and the worst ... is already smaller than that"
    assert at_05["groups"] == [["C4.5+m+cf", "C4.5+m", "C4.5+cf", "C4.5"]]
    at_10 = critical_difference(MATRIX, NAMES, alpha=0.10)
    assert round(at_10["cd"], 2) == 1.12
    # Figure 1(a): C4.5 is worse than C4.5+m and C4.5+m+cf; C4.5+cf cannot be placed (in both bars)
    assert at_10["groups"] == [["C4.5+m+cf", "C4.5+m", "C4.5+cf"], ["C4.5+cf", "C4.5"]]


def test_lower_is_better_reverses_the_ranks():
    result = critical_difference([[0.1, 0.2], [0.3, 0.4], [0.5, 0.6]], ["a", "b", "c"], higher_is_better=False)
    assert result["ranks"].tolist() == [1.0, 2.0, 3.0]


def test_from_a_results_table_over_its_complete_datasets():
    cells = {("gat", "cora"): {0: 80.0, 1: 82.0}, ("ltga", "cora"): {0: 83.0, 1: 83.0},
             ("gat", "texas"): {0: 60.0}, ("ltga", "texas"): {0: 55.0}, ("ltga", "tolokers"): {0: 70.0}}
    result = table_critical_difference(table_of(cells, ["gat", "ltga"], ["cora", "texas", "tolokers"]))
    assert result["dataset_names"] == ["cora", "texas"]  # gat has no tolokers runs
    assert result["ranks"].tolist() == [1.5, 1.5] and result["datasets"] == 2
    with pytest.raises(ReportError, match="needs >= 2 rows with runs on a common dataset"):
        table_critical_difference(table_of({("gat", "cora"): {0: 80.0}}, ["gat"], ["cora"]))


def test_with_a_paper_figure_2_ranks_over_its_datasets_only():
    cells = {("gat", "cora"): {0: 80.0}, ("ltga", "cora"): {0: 83.0}, ("gat", "texas"): {0: 60.0},
             ("ltga", "texas"): {0: 55.0}, ("gat", "tolokers"): {0: 70.0}, ("ltga", "tolokers"): {0: 60.0}}
    table = table_of(cells, ["gat", "ltga"], ["cora", "texas", "tolokers"])
    assert table_critical_difference(figure_table(table))["dataset_names"] == ["cora", "texas", "tolokers"]
    paper = table_critical_difference(figure_table(table, "ltga"))  # Tolokers (ROC-AUC) is not the paper's
    assert paper["dataset_names"] == ["cora", "texas"] and paper["ranks"].tolist() == [1.5, 1.5]
    only_outside = table_of({("gat", "tolokers"): {0: 70.0}, ("ltga", "tolokers"): {0: 60.0}}, ["gat", "ltga"],
                            ["tolokers"])
    assert figure_table(only_outside, "ltga") is only_outside
