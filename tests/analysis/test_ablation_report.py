"""The ablation table (the LTGA paper's Tables 13-18 layout) from hand-made run folders: mean q at the
selected epoch, score and ECE averaged over seeds by hand, values in the paper's order."""
import json
from pathlib import Path

import pytest
import yaml

from zoo.analysis.ablation_report import ablation_table, render_ablation
from zoo.analysis.runs import collect_runs


def write_ablation_run(root: Path, recipe: str, seed: int, score: float, q_best: list[float], ece: float) -> None:
    """One seed folder; the curves hold a q at the best epoch (3) and a different one later."""
    dataset = recipe.split("_ablate_")[0]
    main = "roc_auc" if dataset == "minesweeper" else "accuracy"
    seed_dir = root / recipe / "0123456789" / f"seed{seed}"
    seed_dir.mkdir(parents=True, exist_ok=True)
    (seed_dir.parent / "config.yaml").write_text(yaml.safe_dump({"name": recipe, "dataset": dataset,
                                                                 "model": {"name": "ltga"}}))
    best = {"epoch": 3, **{f"q_mean/layer{i // 2}_head{i % 2}": q for i, q in enumerate(q_best)}}
    later = {"epoch": 4, **{key: 9.0 for key in best if key != "epoch"}}
    metrics = {"seed": seed, "split": seed, "dataset": dataset, "main_metric": main, "best_epoch": 3,
               "final": {"val": {main: score}, "test": {main: score, "ece": ece}}, "curves": [best, later]}
    (seed_dir / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture()
def ablation_runs(tmp_path):
    write_ablation_run(tmp_path, "minesweeper_ablate_kappa_50", 0, 0.70, [1.0, 1.0, 1.1, 1.1], 0.09)
    write_ablation_run(tmp_path, "minesweeper_ablate_kappa_5", 0, 0.72, [1.2, 1.4, 1.6, 1.8], 0.08)
    write_ablation_run(tmp_path, "minesweeper_ablate_kappa_5", 1, 0.74, [1.0, 1.0, 1.0, 1.0], 0.10)
    write_ablation_run(tmp_path, "minesweeper_ablate_granularity_layer", 0, 0.73, [1.3, 1.3], 0.09)
    write_ablation_run(tmp_path, "minesweeper_ablate_granularity_edge", 0, 0.75, [0.9, 1.1, 1.2, 1.2], 0.07)
    write_ablation_run(tmp_path, "minesweeper_ablate_lambda_0.01", 0, 0.71, [1.5, 1.5], 0.1)
    write_ablation_run(tmp_path, "cora_ablate_warmup_200", 0, 0.81, [1.0, 1.0], 0.2)
    write_ablation_run(tmp_path, "wisconsin_ablate_warmup_0", 0, 0.45, [1.0, 1.0], 0.2)
    write_ablation_run(tmp_path, "minesweeper_ltga_head", 0, 0.5, [2.0, 2.0], 0.5)  # not an ablation run
    return collect_runs(tmp_path)


def test_ablation_table_by_hand(ablation_runs):
    table = ablation_table(ablation_runs)
    assert list(table.index) == [("cora", "warmup", "200"), ("wisconsin", "warmup", "0"),
                                 ("minesweeper", "lambda", "0.01"),
                                 ("minesweeper", "kappa", "5"), ("minesweeper", "kappa", "50"),
                                 ("minesweeper", "granularity", "edge"), ("minesweeper", "granularity", "layer")]
    row = table.loc[("minesweeper", "kappa", "5")]
    # seed 0: mean q 1.5, seed 1: 1.0 -> 1.25; the later epoch's q (9.0) is not read
    assert (row.score, row.score_sd, row.q, row.ece, row.n) == (
        pytest.approx(73.0), pytest.approx(2 ** 0.5), pytest.approx(1.25), pytest.approx(0.09), 2)
    assert row.metric == "roc_auc" and table.loc[("cora", "warmup", "200")].metric == "accuracy"
    assert table.loc[("minesweeper", "granularity", "edge"), "q"] == pytest.approx(1.1)


def test_ablation_table_renders_the_papers_columns(ablation_runs):
    lines = render_ablation(ablation_table(ablation_runs)).splitlines()
    assert lines[0] == "| dataset | parameter | value | metric | score | mean q | ECE | n | paper score | paper q |"
    # the paper's Table 13 beside Cora (T_w = 0 is its one cell where q left 1.000); none for Minesweeper
    assert lines[2] == "| cora | T_w | 200 | accuracy | 81.0 | 1.000 | 0.200 | 1 | 81.1 ± 0.8 | 1.000 |"
    assert lines[5] == "| minesweeper | κ | 5 | roc_auc | 73.0 ± 1.4 | 1.250 | 0.090 | 2 | - | - |"
    assert lines[7] == "| minesweeper | granularity | edge | roc_auc | 75.0 | 1.100* | 0.070 | 1 | - | - |"
    assert lines[3] == "| wisconsin | T_w | 0 | accuracy | 45.0 | 1.000 | 0.200 | 1 | 47.1 ± 5.5 | 1.001 |"
    assert "*: LTGA-Edge has no scalar q" in lines[-1]


def test_no_ablation_run_gives_an_empty_table(tmp_path):
    write_ablation_run(tmp_path, "cora_ltga_head", 0, 0.8, [1.0], 0.1)
    assert ablation_table(collect_runs(tmp_path)).empty
