"""End-to-end report over a small tree of run folders written by the tests."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import yaml

from zoo.analysis.rendering import render_markdown
from zoo.analysis.report import make_report
from zoo.analysis.runs import ReportError, collect_runs
from zoo.analysis.table_statistics import paired_comparisons, rank_analysis
from zoo.analysis.tables import parse_tuned, results_table

ROOT = Path(__file__).resolve().parents[2]
SEEDS = range(5)
# (dataset, model) -> (val main metric, test main metric) per seed; gatv2 has no tolokers runs.
OFFSETS = np.array([0.00, 0.02, -0.01, 0.03, 0.01])
CASES = {
    ("texas", "gat"): (0.60, 0.55), ("texas", "gatv2"): (0.62, 0.58), ("texas", "ltga_edge"): (0.66, 0.63),
    # val and test disagree: qfrozen_1.5 wins on validation, qfrozen_2.0 on test.
    ("texas", "qfrozen_1.5"): (0.70, 0.50), ("texas", "qfrozen_2.0"): (0.65, 0.70),
    ("cora", "gat"): (0.80, 0.81), ("cora", "gatv2"): (0.79, 0.80), ("cora", "ltga_edge"): (0.82, 0.83),
    ("cora", "qfrozen_1.5"): (0.78, 0.82), ("cora", "qfrozen_2.0"): (0.81, 0.79),
    ("tolokers", "gat"): (0.75, 0.74), ("tolokers", "ltga_edge"): (0.78, 0.77),
    ("tolokers", "qfrozen_1.5"): (0.76, 0.76), ("tolokers", "qfrozen_2.0"): (0.77, 0.72),
}


def write_run(root: Path, dataset: str, model: str, seed: int, val: float, test: float,
              config_hash: str = "0123456789") -> None:
    """One seed folder as tools/train.py writes it (only the files the report reads)."""
    main = "roc_auc" if dataset == "tolokers" else "accuracy"
    run_dir = root / f"{dataset}_{model}" / config_hash
    (run_dir / f"seed{seed}").mkdir(parents=True, exist_ok=True)
    config = {"name": f"{dataset}_{model}", "dataset": dataset, "model": {"name": model.split("_")[0]}}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    block = lambda x: {"accuracy": x, "macro_f1": x - 0.1, "nll": 1 - x, "brier": 0.5, "ece": 0.1,  # noqa: E731
                       **({"roc_auc": x} if main == "roc_auc" else {})}
    metrics = {"seed": seed, "split": seed, "dataset": dataset, "main_metric": main, "best_epoch": 10,
               "epochs_run": 30, "final": {"train": block(0.99), "val": block(val), "test": block(test)},
               "curves": []}
    (run_dir / f"seed{seed}" / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture()
def runs(tmp_path) -> Path:
    for (dataset, model), (val, test) in CASES.items():
        for seed in SEEDS:
            write_run(tmp_path / "runs", dataset, model, seed, val + OFFSETS[seed], test + OFFSETS[seed] * seed / 2)
    return tmp_path / "runs"


def test_collect_runs_reads_identity_from_config(runs):
    df = collect_runs([runs])
    assert len(df) == len(CASES) * len(SEEDS)
    row = df[(df.recipe == "texas_qfrozen_1.5") & (df.seed == 3)].iloc[0]
    identity = (row.dataset, row.model, row.arch, row.split, row.main_metric)
    assert identity == ("texas", "qfrozen_1.5", "qfrozen", 3, "accuracy")
    assert row.val_accuracy == pytest.approx(0.73) and row.test_accuracy == pytest.approx(0.545)
    assert set(df[df.dataset == "tolokers"].main_metric) == {"roc_auc"}
    assert len(collect_runs([runs, runs / "texas_gat"])) == len(df)  # overlapping paths count once


def test_a_seed_found_twice_is_an_error(runs, tmp_path):
    write_run(tmp_path / "runs2", "texas", "gat", 3, 0.5, 0.5)
    with pytest.raises(ReportError, match="seed 3 of texas_gat \\(0123456789\\) found more than once"):
        collect_runs([runs, tmp_path / "runs2"])


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


def test_other_metric_split_and_csv(runs):
    markdown, frame = make_report([runs], models=["gat"], metric="nll", split="val")
    assert "val nll" in markdown and "in %" not in markdown
    assert frame.at["gat", "texas"] == pytest.approx(0.4 - OFFSETS.mean())
    assert frame.at["gat", "texas_n"] == 5
    _, frame = make_report([runs], tuned={"qfrozen": "qfrozen_*"})
    assert frame.at["qfrozen (tuned)", "picked"] == "cora=qfrozen_2.0; texas=qfrozen_1.5; tolokers=qfrozen_2.0"


def test_errors_name_the_bad_value(runs, tmp_path):
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
    (tmp_path / "empty").mkdir()
    with pytest.raises(ReportError, match="no finished runs"):
        collect_runs([tmp_path / "empty"])
    with pytest.raises(ReportError, match="not found: .*missing"):
        collect_runs([tmp_path / "missing"])


def load_tool():
    spec = importlib.util.spec_from_file_location("report_tool", ROOT / "tools" / "report.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_writes_outputs(runs, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "report.py"), str(runs), "--reference", "ltga_edge",
                           "--tuned", "qfrozen=qfrozen_*", "--markdown", str(tmp_path / "t.md"),
                           "--csv", str(tmp_path / "t.csv")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "qfrozen (tuned)" in done.stdout and (tmp_path / "t.md").read_text() == done.stdout
    assert (tmp_path / "t.csv").read_text().startswith("model,cora,cora_sd,cora_n")


def test_cli_exits_2_with_a_clear_message(runs, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    tool = load_tool()
    assert tool.main([str(tmp_path / "empty")]) == 2
    assert f"error: no finished runs (<recipe>/<config-hash>/seed<k>/metrics.json) under {tmp_path / 'empty'}" \
        in capsys.readouterr().err
    assert tool.main([str(runs), "--reference", "gcn"]) == 2
    assert "no runs of model 'gcn'" in capsys.readouterr().err
    assert tool.main([str(runs), "--alpha", "5"]) == 2
    assert "alpha must lie in (0, 1), got 5.0" in capsys.readouterr().err
    assert tool.main([str(runs), "--tuned", "q=qfrozen_*", "--tune-seeds", "0-x"]) == 2
    assert "seeds '0-x': '0-x' is not a seed or a range; write them like 0-9 or 0,3,5" in capsys.readouterr().err
    assert tool.main([str(runs), "--tuned", "q=qfrozen_*", "--tune-seeds", "0-2"]) == 0
    assert "validation main metric over seeds 0-2 (never test)" in capsys.readouterr().out
    assert tool.main([str(runs), "--diagnostics"]) == 2
    assert "no run has LTGA attention diagnostics" in capsys.readouterr().err
    assert tool.main([str(runs), "--timing"]) == 2
    assert "no run recorded its training time" in capsys.readouterr().err


def _write_mae_run(root: Path, model: str, seed: int, val: float, test: float) -> None:
    run_dir = root / f"zinc_{model}" / "0123456789"
    (run_dir / f"seed{seed}").mkdir(parents=True, exist_ok=True)
    (run_dir / "config.yaml").write_text(yaml.safe_dump({"name": f"zinc_{model}", "dataset": "zinc", "model": {"name": "x"}}))
    metrics = {"seed": seed, "split": 0, "dataset": "zinc", "main_metric": "mae",
               "final": {"val": {"mae": val}, "test": {"mae": test}}}
    (run_dir / f"seed{seed}" / "metrics.json").write_text(json.dumps(metrics))


def test_lower_is_better_metrics_rank_bold_and_tune_downwards(tmp_path):
    for seed in range(3):
        _write_mae_run(tmp_path, "gated", seed, 0.20, 0.15 + seed / 100)
        _write_mae_run(tmp_path, "plain", seed, 0.25, 0.18 + seed / 100)
        _write_mae_run(tmp_path, "wide_a", seed, 0.30, 0.10)   # best on test, worse on validation
        _write_mae_run(tmp_path, "wide_b", seed, 0.22, 0.165)
    table = results_table(collect_runs(tmp_path), models=["gated", "plain"], tuned={"wide": "wide_*"})
    assert table.higher_is_better is False
    assert table.picks["wide (tuned)"]["zinc"][0] == "wide_b"   # lowest validation MAE, not highest
    assert table.avg_rank["gated"] == 1.0 and table.avg_rank["plain"] == 3.0
    assert "| gated | **0.1600 ± 0.0100** |" in make_report([tmp_path], models=["gated", "plain"])[0]


def test_mixed_metric_directions_are_refused(runs, tmp_path):
    _write_mae_run(runs, "gated", 0, 0.2, 0.2)
    with pytest.raises(ReportError, match="mix lower-is-better and higher-is-better"):
        results_table(collect_runs(runs), models=["gat", "gated"])
