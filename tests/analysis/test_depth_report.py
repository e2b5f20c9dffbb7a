"""The depth-sweep table (the LTGA paper's Table 19 layout) from hand-made run folders: means and
sds over seeds computed by hand."""
import json
from pathlib import Path

import numpy as np
import pytest
import yaml

from zoo.analysis.depth_report import depth_table, render_depth
from zoo.analysis.runs import collect_runs


def write_depth_run(root: Path, recipe: str, dataset: str, seed: int, score: float, oversmoothing: dict | None,
                    main: str = "accuracy") -> None:
    """One seed folder as tools/train.py writes it (the files the report reads)."""
    seed_dir = root / recipe / "0123456789" / f"seed{seed}"
    seed_dir.mkdir(parents=True, exist_ok=True)
    (seed_dir.parent / "config.yaml").write_text(yaml.safe_dump({"name": recipe, "dataset": dataset,
                                                                 "model": {"name": "gcn"}}))
    metrics = {"seed": seed, "split": seed, "dataset": dataset, "main_metric": main, "best_epoch": 3,
               "final": {"val": {main: score}, "test": {main: score, "ece": 0.1}}, "curves": [],
               **({"oversmoothing": oversmoothing} if oversmoothing else {})}
    (seed_dir / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture()
def depth_runs(tmp_path):
    for seed, (score, energy, mad) in enumerate([(0.80, 0.1, 0.7), (0.82, 0.2, 0.8), (0.84, 0.3, 0.9)]):
        write_depth_run(tmp_path, "cora_depth2_gcn", "cora", seed, score, {"dirichlet_energy": energy, "mad": mad})
        write_depth_run(tmp_path, "cora_depth8_gcn", "cora", seed, score / 4, {"dirichlet_energy": energy / 100,
                                                                               "mad": mad / 10})
    write_depth_run(tmp_path, "minesweeper_depth4_ltga_head", "minesweeper", 0, 0.70, None, main="roc_auc")
    write_depth_run(tmp_path, "cora_gat", "cora", 0, 0.5, {"dirichlet_energy": 9.0, "mad": 9.0})  # not a depth run
    return collect_runs(tmp_path)


def test_depth_table_by_hand(depth_runs):
    table = depth_table(depth_runs)
    assert list(table.index) == [("cora", "gcn", 2), ("cora", "gcn", 8), ("minesweeper", "ltga_head", 4)]
    row = table.loc[("cora", "gcn", 2)]
    assert (row.score, row.score_sd, row.n, row.metric) == (pytest.approx(82.0), pytest.approx(2.0), 3, "accuracy")
    assert (row.dirichlet_energy, row.mad) == (pytest.approx(0.2), pytest.approx(0.8))
    row = table.loc[("cora", "gcn", 8)]
    assert row.score == pytest.approx(20.5)
    assert (row.dirichlet_energy, row.mad) == (pytest.approx(0.002), pytest.approx(0.08))
    row = table.loc[("minesweeper", "ltga_head", 4)]
    assert row.metric == "roc_auc" and row.score == pytest.approx(70.0)
    assert np.isnan(row.dirichlet_energy)  # the run recorded no diagnostics


def test_depth_table_renders_one_row_per_model_and_a_column_group_per_depth(depth_runs):
    text = render_depth(depth_table(depth_runs))
    lines = text.splitlines()
    assert lines[0] == ("| dataset | model | metric | score L=2 | E_dir L=2 | MAD L=2 | score L=4 | E_dir L=4 "
                        "| MAD L=4 | score L=8 | E_dir L=8 | MAD L=8 |")
    # the paper's Table 19 Cora GCN cells in brackets
    assert lines[2] == ("| cora | gcn | accuracy | 82.0 ± 2.0 (n=3) [80.9 ± 0.5] | 0.200 [0.155] | 0.800 [0.790] "
                        "| - | - | - | 20.5 ± 0.5 (n=3) [44.5 ± 18.2] | 0.002 [0.030] | 0.080 [0.342] |")
    assert lines[3] == "| minesweeper | ltga_head | roc_auc | - | - | - | 70.0 (n=1) | - | - | - | - | - |"


def test_no_depth_run_gives_an_empty_table(tmp_path):
    write_depth_run(tmp_path, "cora_gat", "cora", 0, 0.5, None)
    assert depth_table(collect_runs(tmp_path)).empty
