"""timing_table / render_timing on run folders with hand-written training times."""
import json
from pathlib import Path

import pytest
import yaml

from zoo.analysis.runs import ReportError, collect_runs
from zoo.analysis.timing_report import render_timing, timing_table


def write_run(root: Path, dataset: str, seed: int, seconds: float | None, epochs: int, threads: int | None,
              best: int | None = None) -> None:
    run = root / f"{dataset}_gat" / "0123456789"
    (run / f"seed{seed}").mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": f"{dataset}_gat", "dataset": dataset,
                                                     "model": {"name": "gat"}}))
    block = {"accuracy": 0.5}
    metrics = {"seed": seed, "main_metric": "accuracy", "final": {"val": block, "test": block}, "epochs_run": epochs}
    if seconds is not None:
        metrics["train_seconds"] = seconds
    if best is not None:
        metrics["best_epoch"] = best
    (run / f"seed{seed}" / "metrics.json").write_text(json.dumps(metrics))
    if threads is not None:
        (run / f"seed{seed}" / "environment.json").write_text(json.dumps({"torch_threads": threads}))


def test_per_epoch_seconds_over_seeds(tmp_path):
    write_run(tmp_path, "texas", 0, seconds=30.0, epochs=10, threads=2, best=9)    # 3.0 s / epoch, best the last
    write_run(tmp_path, "texas", 1, seconds=20.0, epochs=20, threads=1, best=3)    # 1.0
    write_run(tmp_path, "texas", 2, seconds=40.0, epochs=20, threads=2, best=19)   # 2.0, best the last
    write_run(tmp_path, "cora", 0, seconds=6.0, epochs=3, threads=None)   # 2.0, no environment.json
    write_run(tmp_path, "cora", 1, seconds=None, epochs=3, threads=2)     # not recorded: left out
    table = timing_table(collect_runs(tmp_path))
    assert list(table.index) == [("gat", "cora"), ("gat", "texas")]  # the report's dataset order
    texas = table.loc[("gat", "texas")]
    assert texas.n == 3 and texas.threads == "1,2" and texas.epochs == pytest.approx(50 / 3)
    assert (texas.per_epoch_median, texas.per_epoch_min, texas.per_epoch_max) == pytest.approx((2.0, 1.0, 3.0))
    assert texas.minutes == pytest.approx(30.0 / 60)
    assert (texas.best_min, texas.best_max, texas.best_is_last) == (3, 19, 2)
    cora = table.loc[("gat", "cora")]
    assert cora.n == 1 and cora.threads == "-" and cora.per_epoch_median == pytest.approx(2.0)
    text = render_timing(table)
    assert "| gat | texas | 3 | 1,2 | 17 | 2.00 | 1.00-3.00 | 0.5 | 3-19 | 2 of 3 |" in text
    assert "| gat | cora | 1 | - | 3 | 2.00 | 2.00-2.00 | 0.1 | - | - |" in text   # no best_epoch recorded


def test_no_recorded_time_is_an_error(tmp_path):
    write_run(tmp_path, "cora", 0, seconds=None, epochs=3, threads=2)
    with pytest.raises(ReportError, match="train_seconds"):
        timing_table(collect_runs(tmp_path))
