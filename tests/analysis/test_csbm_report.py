"""The contextual-SBM table: means, sds and the q < 1 advantage over q = 1 by hand."""
import json
from pathlib import Path

import pytest
import yaml

from zoo.analysis.csbm_report import csbm_table, q_below_one_advantage, render_csbm
from zoo.analysis.runs import ReportError, collect_runs


def write_csbm_run(root: Path, dataset: str, model: str, seed: int, accuracy: float) -> None:
    seed_dir = root / f"{dataset}_{model}" / "0123456789" / f"seed{seed}"
    seed_dir.mkdir(parents=True, exist_ok=True)
    (seed_dir.parent / "config.yaml").write_text(yaml.safe_dump({"name": f"{dataset}_{model}", "dataset": dataset,
                                                                 "model": {"name": "ltga"}}))
    metrics = {"seed": seed, "split": 0, "dataset": dataset, "main_metric": "accuracy",
               "final": {"val": {"accuracy": accuracy}, "test": {"accuracy": accuracy}}}
    (seed_dir / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture()
def csbm_runs(tmp_path):
    d5, d20 = "csbm_h0.5_d5_snr0.1", "csbm_h0.5_d20_snr0.1"
    scores = {(d5, "qfrozen_1.0"): [0.40, 0.44], (d5, "qfrozen_0.5"): [0.43, 0.45], (d5, "qfrozen_0.8"): [0.41, 0.41],
              (d5, "gatv2"): [0.50, 0.50], (d20, "qfrozen_1.0"): [0.60, 0.60], (d20, "qfrozen_0.5"): [0.55, 0.57],
              ("cora", "qfrozen_0.5"): [0.9, 0.9]}  # not a cSBM card: left out
    for (dataset, model), values in scores.items():
        for seed, value in enumerate(values):
            write_csbm_run(tmp_path, dataset, model, seed, value)
    return collect_runs(tmp_path)


def test_csbm_table_and_advantage_by_hand(csbm_runs):
    table = csbm_table(csbm_runs)
    assert set(table.index.get_level_values("snr")) == {0.1} and len(table) == 6
    row = table.loc[(0.5, 5.0, 0.1, "qfrozen_1.0")]
    assert (row["mean"], row.sd, row.n) == (pytest.approx(42.0), pytest.approx(2 * 2 ** 0.5), 2)
    advantage = q_below_one_advantage(table)
    # degree 5: best q < 1 is q = 0.5 (44.0) against 42.0; degree 20: q = 0.5 (56.0) against 60.0
    assert advantage[(0.5, 5.0, 0.1)] == pytest.approx(2.0) and advantage[(0.5, 20.0, 0.1)] == pytest.approx(-4.0)


def test_csbm_render(csbm_runs):
    lines = render_csbm(csbm_table(csbm_runs)).splitlines()
    assert lines[0] == "| h | degree | SNR | gatv2 | qfrozen_0.5 | qfrozen_0.8 | qfrozen_1.0 | best q<1 − q=1 |"
    assert lines[2] == "| 0.5 | 5 | 0.1 | 50.0 ± 0.0 | 44.0 ± 1.4 | 41.0 ± 0.0 | 42.0 ± 2.8 | +2.0 |"
    assert lines[3] == "| 0.5 | 20 | 0.1 | - | 56.0 ± 1.4 | - | 60.0 ± 0.0 | -4.0 |"
    assert lines[-1].startswith("Largest q < 1 advantage over q = 1: +2.0 points; across-seed sds of the frozen-q "
                                "models: 0.0-2.8")


def test_no_csbm_run_is_a_clear_error(tmp_path):
    write_csbm_run(tmp_path, "cora", "gat", 0, 0.8)
    with pytest.raises(ReportError, match="no run on a contextual-SBM card"):
        csbm_table(collect_runs(tmp_path))
