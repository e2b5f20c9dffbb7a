"""results_table, ResultsTable and the tuned-row helpers, on written run folders and hand-built tables."""
import numpy as np
import pytest

from tests.analysis.report_inputs import OFFSETS, table_of, write_mae_run, write_run
from zoo.analysis.rendering import render_markdown
from zoo.analysis.report import make_report
from zoo.analysis.runs import ReportError, collect_runs
from zoo.analysis.table_statistics import paired_comparisons, rank_analysis
from zoo.analysis.tables import ResultsTable, order_datasets, parse_tuned, pick_best, results_table


def test_table_means_in_percent_and_missing_cells(runs):
    table = results_table(collect_runs(runs), models=["gat", "gatv2"], reference="ltga_edge")
    assert table.rows == ["gat", "gatv2", "ltga_edge"]
    assert table.datasets == ["cora", "texas", "tolokers"]
    expected = 100 * (0.55 + np.mean(OFFSETS * np.arange(5) / 2))
    assert table.mean.at["gat", "texas"] == pytest.approx(expected)
    assert table.sd.at["gat", "texas"] == pytest.approx(100 * np.std(OFFSETS * np.arange(5) / 2, ddof=1))
    assert table.n.at["ltga_edge", "cora"] == 5
    assert np.isnan(table.mean.at["gatv2", "tolokers"])
    assert table.complete_datasets == ["cora", "texas"]
    assert table.avg["ltga_edge"] == pytest.approx(table.mean.loc["ltga_edge", ["cora", "texas"]].mean())
    assert table.avg_rank.tolist() == [2.5, 2.5, 1.0]  # cora: 2, 3, 1; texas: 3, 2, 1


def test_roc_auc_in_percent_beside_ap_in_its_own_units(tmp_path):
    for seed in range(2):
        write_mae_run(tmp_path, "sig", seed, 0.8, 0.78 + seed / 100, dataset="molhiv", metric="roc_auc")
        write_mae_run(tmp_path, "sig", seed, 0.6, 0.53 + seed / 100, dataset="peptides_func", metric="ap")
    table = results_table(collect_runs([tmp_path]))
    assert table.percent_datasets == {"molhiv"} and not table.percent
    assert table.mean.loc["sig"].tolist() == pytest.approx([78.5, 0.535])
    assert (table.digits("molhiv"), table.digits("peptides_func")) == (2, 4)
    assert not table.units_agree(table.complete_datasets) and np.isnan(table.avg["sig"])
    assert table.restricted(["molhiv"]).avg["sig"] == pytest.approx(78.5)


def test_tuned_row_picks_by_validation_not_test(runs):
    table = results_table(collect_runs(runs), tuned={"qfrozen": "qfrozen_*"}, reference="ltga_edge")
    assert table.rows == ["gat", "gatv2", "ltga_edge", "qfrozen (tuned)"]
    picks = {d: m for d, (m, _) in table.picks["qfrozen (tuned)"].items()}
    assert picks == {"cora": "qfrozen_2.0", "texas": "qfrozen_1.5", "tolokers": "qfrozen_2.0"}
    assert table.mean.at["qfrozen (tuned)", "texas"] < 60  # qfrozen_1.5's test score, not qfrozen_2.0's ~70
    assert "texas: qfrozen_1.5" in render_markdown(table)


def test_tuned_row_can_pick_on_a_subset_of_seeds(runs, tmp_path):
    # cora: over all 5 seeds qfrozen_2.0 wins (0.81 vs 0.78); on seed 0 alone qfrozen_1.5 must win
    # once its seed-0 validation score is raised above qfrozen_2.0's 0.81.
    write_run(runs, "cora", "qfrozen_1.5", 0, 0.90, 0.50)
    df = collect_runs(runs)
    assert results_table(df, tuned={"q": "qfrozen_*"}).picks["q (tuned)"]["cora"][0] == "qfrozen_2.0"
    table = results_table(df, tuned={"q": "qfrozen_*"}, tune_seeds=[0])
    assert table.picks["q (tuned)"]["cora"] == ("qfrozen_1.5", pytest.approx(90.0))
    assert table.scores["q (tuned)", "cora"].index.tolist() == [0, 1, 2, 3, 4]  # reported on every seed
    assert "validation main metric over seeds 0 (never test)" in render_markdown(table)
    partial = results_table(df, tuned={"q": "qfrozen_*"}, tune_seeds=[0, 7])
    assert "cora" not in partial.picks["q (tuned)"] and ("q (tuned)", "cora") not in partial.scores
    assert "qfrozen_1.5 lacks tuning seed(s) [7]" in partial.incomplete["q (tuned)"]["cora"]
    assert "- q (tuned) on cora: left empty, tuning incomplete (qfrozen_1.5 lacks tuning seed(s) [7]" \
        in render_markdown(partial)
    without_one = df[~((df.model == "qfrozen_2.0") & (df.dataset == "cora"))]
    table = results_table(without_one, tuned={"q": "qfrozen_*"}, tune_seeds=[0])
    assert table.picks["q (tuned)"]["cora"][0] == "qfrozen_1.5" and table.unrun["q (tuned)"] == {"cora": ["qfrozen_2.0"]}
    assert "- q (tuned) on cora: picked among the candidates that ran (qfrozen_2.0 not run)." in render_markdown(table)


def test_a_reference_matched_by_a_tuned_pattern_stays_a_plain_row(runs):
    table = results_table(collect_runs(runs), tuned={"q": "qfrozen_*"}, reference="qfrozen_1.5")
    # qfrozen_2.0 is consumed by the tuned row; the reference keeps its own row in name order
    assert table.rows == ["gat", "gatv2", "ltga_edge", "qfrozen_1.5", "q (tuned)"]
    assert table.mean.at["qfrozen_1.5", "texas"] == pytest.approx(100 * (0.50 + np.mean(OFFSETS * np.arange(5) / 2)))


def test_errors_name_the_bad_value(runs):
    df = collect_runs(runs)
    with pytest.raises(ReportError, match="'gcn'"):
        results_table(df, models=["gcn"])
    with pytest.raises(ReportError, match="'entmax_\\*'"):
        results_table(df, tuned={"entmax": "entmax_*"})
    with pytest.raises(ReportError, match="'f1'"):
        results_table(df, metric="f1")
    with pytest.raises(ReportError, match="'qfrozen'"):
        parse_tuned("qfrozen")
    write_run(runs, "texas", "gat", 0, 0.5, 0.5, config_hash="fedcba9876")
    with pytest.raises(ReportError, match="2 configurations"):
        results_table(collect_runs(runs))


def test_lower_is_better_metrics_rank_bold_and_tune_downwards(tmp_path):
    for seed in range(3):
        write_mae_run(tmp_path, "gated", seed, 0.20, 0.15 + seed / 100)
        write_mae_run(tmp_path, "plain", seed, 0.25, 0.18 + seed / 100)
        write_mae_run(tmp_path, "wide_a", seed, 0.30, 0.10)   # best on test, worse on validation
        write_mae_run(tmp_path, "wide_b", seed, 0.22, 0.165)
    table = results_table(collect_runs(tmp_path), models=["gated", "plain"], tuned={"wide": "wide_*"})
    assert table.higher_is_better is False
    assert table.picks["wide (tuned)"]["zinc"][0] == "wide_b"   # lowest validation MAE, not highest
    assert table.avg_rank["gated"] == 1.0 and table.avg_rank["plain"] == 3.0
    assert "| gated | **0.1600 ± 0.0100** |" in make_report([tmp_path], models=["gated", "plain"])[0]


def test_mixed_metric_directions_are_refused(runs, tmp_path):
    write_mae_run(runs, "gated", 0, 0.2, 0.2)
    with pytest.raises(ReportError, match="mix lower-is-better and higher-is-better"):
        results_table(collect_runs(runs), models=["gat", "gated"])


def hand_table(higher_is_better: bool = True) -> ResultsTable:
    """Rows a, b, c over d1, d2, d3; c has no d3 runs and a single d1 seed."""
    cells = {("a", "d1"): [1, 3], ("b", "d1"): [2, 2], ("c", "d1"): [5],
             ("a", "d2"): [4, 6], ("b", "d2"): [7, 9], ("c", "d2"): [1, 2],
             ("a", "d3"): [1], ("b", "d3"): [2]}
    return table_of({key: dict(enumerate(values)) for key, values in cells.items()}, ["a", "b", "c"],
                    ["d1", "d2", "d3"], higher_is_better=higher_is_better)


def test_results_table_statistics_by_hand():
    table = hand_table()
    assert table.mean.to_numpy().tolist()[:2] == [[2.0, 5.0, 1.0], [2.0, 8.0, 2.0]]
    assert table.mean.loc["c", ["d1", "d2"]].tolist() == [5.0, 1.5] and np.isnan(table.mean.at["c", "d3"])
    assert table.sd.at["a", "d1"] == pytest.approx(2 ** 0.5) and table.sd.at["b", "d1"] == 0.0
    assert np.isnan(table.sd.at["c", "d1"])  # one seed: no sample sd
    assert table.n.loc["c"].tolist()[:2] == [1.0, 2.0] and np.isnan(table.n.at["c", "d3"])
    assert table.complete_datasets == ["d1", "d2"]
    assert table.avg.tolist() == [3.5, 5.0, 3.25]
    # d1: c 1, a and b tie at 2.5; d2: b 1, a 2, c 3
    assert table.avg_rank.tolist() == [2.25, 1.75, 2.0]
    # lower is better: d1: a and b 1.5, c 3; d2: c 1, a 2, b 3
    assert hand_table(higher_is_better=False).avg_rank.tolist() == [1.75, 2.25, 2.0]


def test_no_complete_dataset_leaves_avg_rank_empty():
    table = hand_table()
    table.datasets = ["d3"]
    assert table.complete_datasets == [] and table.avg_rank.isna().all() and table.avg.isna().all()


def test_pick_best_breaks_ties_by_name_and_follows_the_direction():
    val = {"q_2.0": 0.7, "q_0.5": 0.7, "q_1.5": 0.6}
    assert pick_best(val, lower_is_better=False) == "q_0.5"
    assert pick_best(val, lower_is_better=True) == "q_1.5"
    assert pick_best({"b": 0.1, "a": 0.1}, lower_is_better=True) == "a"


def test_parse_tuned_and_its_errors():
    assert parse_tuned(" qfrozen = qfrozen_* ,entmax=entmax_*") == {"qfrozen": "qfrozen_*", "entmax": "entmax_*"}
    for bad in ("", "q=", "=q_*", "q=q_*,"):
        with pytest.raises(ReportError, match="--tuned takes NAME=PATTERN items"):
            parse_tuned(bad)
    with pytest.raises(ReportError, match="names the row 'q' twice"):
        parse_tuned("q=qfrozen_*,q=entmax_*")


def test_order_datasets_paper_order_then_sorted():
    assert order_datasets(["zinc", "tolokers", "texas", "cora", "amazon_ratings", "cora", "abc"]) == \
        ["cora", "texas", "amazon_ratings", "tolokers", "abc", "zinc"]


def test_oracle_row_picks_by_test_and_is_not_a_ranked_row(runs):
    table = results_table(collect_runs(runs), tuned={"q": "qfrozen_*"}, oracle={"q": "qfrozen_*"},
                          reference="ltga_edge")
    oracle = "q (test oracle; not a baseline)"
    assert table.rows == ["gat", "gatv2", "ltga_edge", "q (tuned)"]   # qfrozen_* consumed by both, oracle apart
    drift = 100 * np.mean(OFFSETS * np.arange(5) / 2)
    # test means: texas 1.5 -> 50, 2.0 -> 70; cora 82 vs 79; tolokers 76 vs 72 (validation picks the other one)
    assert table.oracles[oracle] == {"cora": ("qfrozen_1.5", pytest.approx(82 + drift)),
                                     "texas": ("qfrozen_2.0", pytest.approx(70 + drift)),
                                     "tolokers": ("qfrozen_1.5", pytest.approx(76 + drift))}
    assert {d: m for d, (m, _) in table.picks["q (tuned)"].items()} == \
        {"cora": "qfrozen_2.0", "texas": "qfrozen_1.5", "tolokers": "qfrozen_2.0"}
    assert table.scores[oracle, "texas"].mean() == pytest.approx(70 + drift)
    assert oracle not in table.mean.index and oracle not in table.avg_rank.index
    assert table.cells("mean", [oracle]).at[oracle, "cora"] == pytest.approx(82 + drift)
    assert oracle not in set(paired_comparisons(table, "ltga_edge").model)
    assert oracle not in rank_analysis(table)["ranks"].index
    with pytest.raises(ReportError, match="--oracle pattern 'zz_\\*' matches no model"):
        results_table(collect_runs(runs), oracle={"z": "zz_*"})
    with pytest.raises(ReportError, match="--oracle takes NAME=PATTERN items"):
        parse_tuned("q", "--oracle")


def test_restricted_table_averages_and_ranks_its_block_only():
    table = hand_table()
    block = table.restricted(["d2", "d3", "zz"])
    assert block.datasets == ["d2", "d3"] and table.datasets == ["d1", "d2", "d3"]
    assert block.complete_datasets == ["d2"]                  # c lacks d3
    assert block.avg.tolist() == [5.0, 8.0, 1.5]
    assert block.avg_rank.tolist() == [2.0, 1.0, 3.0]         # d2 alone: b 8, a 5, c 1.5
