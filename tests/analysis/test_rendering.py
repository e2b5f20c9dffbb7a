"""render_markdown, table_frame and markdown_table on hand-built tables (alone, or beside a small hand-made
paper), against hand-written Markdown."""
import math

import pandas as pd
import pytest

from tests.analysis.report_inputs import table_of
from zoo.analysis.ltga_paper import Paper, PaperRow
from zoo.analysis.rendering import markdown_table, render_markdown, table_frame
from zoo.analysis.runs import ReportError


def percent_table(**options):
    """a: 80, 82 on d1 and no d2 runs; b: 70, 72, 74 on d1 and a single 60 on d2."""
    return table_of({("a", "d1"): {0: 80, 1: 82}, ("b", "d1"): {0: 70, 1: 72, 2: 74}, ("b", "d2"): {0: 60}},
                    rows=["a", "b"], datasets=["d1", "d2"],
                    main_metrics={"d1": "accuracy", "d2": "roc_auc"}, **options)


def test_report_of_a_table_with_gaps():
    # means 81 (sd sqrt 2) and 72 (sd 2); 3 seeds is the usual count, so a's 2 and b's single d2 seed are marked;
    # d2 lacks a, so avg and ranks use d1 only; two rows: no Friedman, CD = 1.960 sqrt(2 * 3 / 6)
    assert render_markdown(percent_table()) == """\
# Results: test main metric (accuracy on d1; roc_auc on d2), in %, mean ± sd over seeds

| model | d1 | d2 | avg | avg rank |
|---|---|---|---|---|
| a | **81.00 ± 1.41 (n=2)** | - | **81.00** | **1.00** |
| b | 72.00 ± 2.00 | **60.00 (n=1)** | 72.00 | 2.00 |

Cells: 3 seeds unless marked (n=...); '-': no runs; best per column in bold.

- avg, avg rank and the Friedman test use the 1 dataset(s) where every row has runs; dropped: d2 (missing: a).

## Friedman test and Nemenyi critical difference

2 rows over 1 complete dataset(s): d1.
Friedman test not run: it needs at least 3 rows and 2 complete datasets.
Nemenyi CD (0.05) = 1.960; average ranks: a 1.00, b 2.00.
Pairs whose average ranks differ by more than CD: none.
"""


def test_lower_is_better_in_metric_units_bolds_every_tie():
    table = table_of({("x", "z"): {0: 0.25, 1: 0.75}, ("y", "z"): {0: 0.5, 1: 0.5}}, rows=["x", "y"], datasets=["z"],
                     metric="mae", split="val", percent=False, higher_is_better=False)
    lines = render_markdown(table).splitlines()
    assert lines[0] == "# Results: val mae, mean ± sd over seeds"
    assert lines[4:6] == ["| x | **0.5000 ± 0.3536** | **0.5000** | **1.50** |",
                          "| y | **0.5000 ± 0.0000** | **0.5000** | **1.50** |"]



def test_a_blown_up_cell_reads_in_significant_digits():
    """The ReLU gate's 4b seeds (0.1108 and an eval-mode overflow of 3.3e11): mean 1.66436e11 and
    sd 2.35378e11, by hand, in 3 significant digits; small values keep the table's decimals."""
    table = table_of({("relu", "z"): {0: 0.1108, 4: 332872010293.39}, ("g1", "z"): {0: 0.0892, 4: 0.0922}},
                     rows=["g1", "relu"], datasets=["z"], metric="mae", percent=False, higher_is_better=False)
    lines = render_markdown(table).splitlines()
    assert lines[4:6] == ["| g1 | **0.0907 ± 0.0021** | **0.0907** | **1.00** |",
                          "| relu | 1.66e+11 ± 2.35e+11 | 1.66e+11 | 2.00 |"]


COLUMNS = ["dataset", "reference", "model", "n", "mean_diff", "test", "statistic", "p_value", "p_holm", "cohens_d",
           "shapiro_p"]


def test_paired_tests_section():
    comparisons = pd.DataFrame([
        ["z", "x", "y", 5, -0.01234, "t", -2.5, 0.0123, 0.0246, -1.118, 0.5],
        ["z", "x", "w", 4, 0.5, "wilcoxon", 0.0, 0.125, 0.25, math.inf, None],
        ["z", "x", "v", 1, *[math.nan] * 7]], columns=COLUMNS)
    table = table_of({("x", "z"): {0: 0.25}}, rows=["x"], datasets=["z"], percent=False)
    lines = render_markdown(table, comparisons).splitlines()
    start = lines.index("## Paired tests: x vs each model, by seed")
    assert lines[start + 2].startswith("diff = x - model (metric units), over the n seeds both have.")
    assert "* marks p (Holm) < 0.05" in lines[start + 2]
    assert lines[start + 4:start + 9] == [
        "| dataset | model | n | diff | test | statistic | p | p (Holm) | d |", "|---|---|---|---|---|---|---|---|---|",
        "| z | y | 5 | -0.0123 | t | -2.5 | 0.0123 | 0.0246 * | -1.12 |",
        "| z | w | 4 | +0.5000 | Wilcoxon | 0 | 0.125 | 0.25 | inf |",
        "| z | v | 1 | - | not tested | - | - | - | - |"]
    empty = render_markdown(percent_table(), pd.DataFrame(columns=COLUMNS)).splitlines()
    start = empty.index("## Paired tests: ? vs each model, by seed")
    assert "(percentage points)" in empty[start + 2]
    assert empty[start + 4] == "No dataset has the reference and another row."


@pytest.mark.parametrize("p_value, verdict", [
    (0.1353, ["Friedman chi-square = 4.000, p = 0.135: does not reject equal ranks at 0.05."]),
    (0.01, ["Friedman chi-square = 4.000, p = 0.01: rejects equal ranks at 0.05."])])
def test_rank_section_from_given_ranks(p_value, verdict):
    ranks = {"datasets": ["d1", "d2"], "dropped": {}, "ranks": pd.Series({"b": 2.6, "a": 1.0, "c": 2.4}),
             "friedman": {"statistic": 4.0, "p_value": p_value}, "cd": 1.2}
    lines = render_markdown(percent_table(), ranks=ranks).splitlines()
    start = lines.index("## Friedman test and Nemenyi critical difference")
    caveat = ["(The Friedman test does not reject, so the Nemenyi post-hoc pairs are not to be read as significant.)"]
    assert lines[start + 2:] == ["3 rows over 2 complete dataset(s): d1, d2.", *verdict,
                                 "Nemenyi CD (0.05) = 1.200; average ranks: a 1.00, c 2.40, b 2.60.",
                                 "Pairs whose average ranks differ by more than CD: a vs c (1.40), a vs b (1.60).",
                                 *(caveat if p_value > 0.05 else [])]
    assert not any(line.startswith("- avg") for line in lines)  # nothing dropped: no note


@pytest.mark.parametrize("tune_seeds, over", [
    (None, ""), ([0, 1, 2], " over seeds 0-2"), ([0, 2], " over seeds 0, 2"), ([3, 4], " over seeds 3, 4")])
def test_tuned_notes_name_picks_gaps_and_tuning_seeds(tune_seeds, over):
    table = percent_table(picks={"q (tuned)": {"d1": ("q_2", 81.234), "d2": ("q_1", 60.0)}, "e (tuned)": {}},
                          tune_seeds=tune_seeds, incomplete={"e (tuned)": {"d2": "e_1 lacks tuning seed(s) [7]"}},
                          unrun={"q (tuned)": {"d2": ["q_3", "q_4"]}})
    notes = [line for line in render_markdown(table).splitlines() if line.startswith("- ")]
    assert notes[:4] == [
        f"- q (tuned): per dataset, the model with the best mean validation main metric{over} (never test): "
        "d1: q_2 (val 81.23), d2: q_1 (val 60.00).",
        f"- e (tuned): per dataset, the model with the best mean validation main metric{over} (never test): no runs.",
        "- e (tuned) on d2: left empty, tuning incomplete (e_1 lacks tuning seed(s) [7]).",
        "- q (tuned) on d2: picked among the candidates that ran (q_3, q_4 not run)."]


def test_table_frame_holds_the_numbers():
    frame = table_frame(percent_table(picks={"b": {"d1": ("b_1", 0.7), "d2": ("b_2", 0.6)}}))
    assert frame.index.name == "model" and frame.index.tolist() == ["a", "b"]
    assert frame.columns.tolist() == ["d1", "d1_sd", "d1_n", "d2", "d2_sd", "d2_n", "avg", "avg_rank", "picked"]
    assert frame.d1.tolist() == [81.0, 72.0] and frame.d1_sd.tolist() == pytest.approx([2 ** 0.5, 2.0])
    assert frame.d1_n.dtype == "Int64" and frame.d1_n.tolist() == [2, 3] and frame.d2_n.tolist() == [pd.NA, 1]
    assert frame.d2.isna().tolist() == [True, False] and frame.d2_sd.isna().all()
    assert frame.avg.tolist() == [81.0, 72.0] and frame.avg_rank.tolist() == [1.0, 2.0]
    assert frame.picked.tolist() == ["", "d1=b_1; d2=b_2"]


def test_markdown_table():
    assert markdown_table(["model", "n"], [["gat", "10"], ["ltga", "3"]]) == [
        "| model | n |", "|---|---|", "| gat | 10 |", "| ltga | 3 |"]
    assert markdown_table(["a"], []) == ["| a |", "|---|"]


ORACLE = "o (test oracle; not a baseline)"
SMALL_PAPER = Paper("a paper", "test accuracy (%)", ("d1", "d3"),
                    {"a": PaperRow("Table 7", "A", {"d1": (79.0, 1.5), "d3": (1.0, 0.0)}, 40.0),
                     ORACLE: PaperRow("Table 8", "O", {"d1": (85.0, 0.5)}, 50.0)})


def test_report_beside_a_paper_with_an_oracle_row():
    # a is cited on d1 (the paper has no d2); b has no paper row; the oracle (90 +- 1 on d1) is shown, never bold or
    # ranked. Blocks: the paper's datasets (d1) and all (d1, d2: d2 dropped, a lacks it). d3 has no runs, so the
    # paper's Avg. over d1 and d3 is not set beside ours.
    table = percent_table(oracles={ORACLE: {"d1": ("x", 90.0)}})
    table.scores[ORACLE, "d1"] = pd.Series({0: 90.0, 1: 91.0, 2: 89.0})
    markdown = render_markdown(table, paper=SMALL_PAPER)
    assert markdown.split("\n\n## ")[0] == """\
# Results: test main metric (accuracy on d1; roc_auc on d2), in %, mean ± sd over seeds

| model | d1 | d2 | avg (paper's datasets) | avg rank (paper's datasets) | avg (all datasets) \
| avg rank (all datasets) |
|---|---|---|---|---|---|---|
| a | **81.00 ± 1.41 (n=2)** [79.0 ± 1.5] | - | **81.00** | **1.00** | **81.00** | **1.00** |
| b | 72.00 ± 2.00 | **60.00 (n=1)** | 72.00 | 2.00 | 72.00 | 2.00 |
| o (test oracle; not a baseline) | 90.00 ± 1.00 [85.0 ± 0.5] | - | 90.00 | - | 90.00 | - |

Cells: 3 seeds unless marked (n=...); '-': no runs; best per column in bold; [...]: a paper's number (table named \
below); oracle rows are never bold, ranked or tested.

- o (test oracle; not a baseline): per dataset, the model with the best mean TEST main metric, an upper bound that \
no practitioner could pick; not in avg rank, paired tests or rank tests: d1: x (test 90.00).
- avg, avg rank and the Friedman test (paper's datasets: d1) use every one of those datasets.
- avg, avg rank and the Friedman test (all datasets: d1, d2) use the 1 dataset(s) where every row has runs; \
dropped: d2 (missing: a).
- [bracketed]: a paper's test accuracy (%), Table 7: a = "A".
- [bracketed]: a paper's test accuracy (%), Table 8: o (test oracle; not a baseline) = "O".
- No row of a paper for: b.
- Not in a paper (no brackets): d2 (roc_auc).
- A paper's Avg. (over its 2 datasets) is not set beside ours: ours over the paper's datasets lacks d3 (no runs, \
or not by every row), so the two would average different datasets."""
    sections = markdown.split("\n\n## ")[1:]
    assert [s.splitlines()[0] for s in sections] == ["Friedman test and Nemenyi critical difference: paper's datasets",
                                                     "Friedman test and Nemenyi critical difference: all datasets"]
    assert all("average ranks: a 1.00, b 2.00." in s and ORACLE not in s for s in sections)
    frame = table_frame(table, SMALL_PAPER)
    assert frame.index.tolist() == ["a", "b", ORACLE] and "d2_paper" not in frame
    assert frame.d1_paper.tolist()[0::2] == [79.0, 85.0] and math.isnan(frame.at["b", "d1_paper"])
    assert frame.paper_row.tolist() == ["Table 7: A", "", "Table 8: O"]
    assert frame.avg.tolist() == [81.0, 72.0, 90.0] and math.isnan(frame.at[ORACLE, "avg_rank"])
    assert frame.at[ORACLE, "picked"] == "d1=x"


def test_a_paper_of_test_accuracy_refuses_other_numbers():
    with pytest.raises(ReportError, match="a paper reports test accuracy, but this table is val accuracy"):
        render_markdown(percent_table(split="val"), paper=SMALL_PAPER)
    with pytest.raises(ReportError, match="but this table is test ece"):
        render_markdown(percent_table(metric="ece"), paper=SMALL_PAPER)


def test_percent_and_own_units_side_by_side():
    """The 4c layout: ROC-AUC in percent on molhiv beside AP as a fraction on Peptides-func (as the
    paper prints them). Each column keeps its digits, and no avg mixes the two units. Means and
    sds by hand: 78.40 ± 0.28 (0.4 / sqrt 2), 77.30 ± 0.42, 0.5350 ± 0.0071, 0.5100 ± 0.0141."""
    table = table_of({("sig", "molhiv"): {0: 78.6, 1: 78.2}, ("gps", "molhiv"): {0: 77.6, 1: 77.0},
                      ("sig", "peptides_func"): {0: 0.53, 1: 0.54}, ("gps", "peptides_func"): {0: 0.52, 1: 0.50}},
                     rows=["gps", "sig"], datasets=["molhiv", "peptides_func"], percent={"molhiv"},
                     main_metrics={"molhiv": "roc_auc", "peptides_func": "ap"})
    comparisons = pd.DataFrame([["molhiv", "sig", "gps", 2, 1.1, "t", 11.0, 0.0577, 0.0577, 7.78, None],
                                ["peptides_func", "sig", "gps", 2, 0.025, "t", 1.67, 0.344, 0.344, 1.18, None]],
                               columns=COLUMNS)
    lines = render_markdown(table, comparisons).splitlines()
    assert lines[0] == ("# Results: test main metric (roc_auc on molhiv; ap on peptides_func), "
                        "in % on molhiv, own units elsewhere, mean ± sd over seeds")
    assert lines[4:6] == ["| gps | 77.30 ± 0.42 | 0.5100 ± 0.0141 | - | 2.00 |",
                          "| sig | **78.40 ± 0.28** | **0.5350 ± 0.0071** | - | **1.00** |"]
    assert ("- avg left out: it would mix percentages (molhiv) with scores in their metrics' own units; "
            "avg rank and the rank tests do not depend on units.") in lines
    start = lines.index("## Paired tests: sig vs each model, by seed")
    assert "(percentage points on molhiv, metric units elsewhere)" in lines[start + 2]
    assert lines[start + 6:start + 8] == ["| molhiv | gps | 2 | +1.10 | t | 11 | 0.0577 | 0.0577 | 7.78 |",
                                          "| peptides_func | gps | 2 | +0.0250 | t | 1.67 | 0.344 | 0.344 | 1.18 |"]
    assert math.isnan(table_frame(table).at["sig", "avg"])
    assert table_frame(table.restricted(["molhiv"])).at["sig", "avg"] == pytest.approx(78.4)


def test_avg_over_percent_datasets_alone_has_percent_digits():
    """Beside an AP column that lacks a row, avg runs over the ROC-AUC column alone, in its 2 decimals."""
    table = table_of({("sig", "molhiv"): {0: 78.6, 1: 78.2}, ("gps", "molhiv"): {0: 77.6, 1: 77.0},
                      ("sig", "peptides_func"): {0: 0.53, 1: 0.54}},
                     rows=["gps", "sig"], datasets=["molhiv", "peptides_func"], percent={"molhiv"},
                     main_metrics={"molhiv": "roc_auc", "peptides_func": "ap"})
    lines = render_markdown(table).splitlines()
    assert lines[4:6] == ["| gps | 77.30 ± 0.42 | - | 77.30 | 2.00 |",
                          "| sig | **78.40 ± 0.28** | **0.5350 ± 0.0071** | **78.40** | **1.00** |"]
    assert not any(line.startswith("- avg left out") for line in lines)
