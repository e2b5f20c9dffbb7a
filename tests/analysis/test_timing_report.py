"""timing_table / render_timing on run folders with hand-written training times."""
import json
from pathlib import Path

import pytest
import yaml

from zoo.analysis.runs import ReportError, collect_runs
from zoo.analysis.timing_report import render_timing, timing_table


def write_run(root: Path, dataset: str, seed: int, seconds: float | None, epochs: int, threads: int | None,
              best: int | None = None, **extra) -> None:
    run = root / f"{dataset}_gat" / "0123456789"
    (run / f"seed{seed}").mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": f"{dataset}_gat", "dataset": dataset,
                                                     "model": {"name": "gat"}}))
    block = {"accuracy": 0.5}
    metrics = {"seed": seed, "main_metric": "accuracy", "final": {"val": block, "test": block}, "epochs_run": epochs,
               **extra}
    if seconds is not None:
        metrics["train_seconds"] = seconds
    if best is not None:
        metrics["best_epoch"] = best
    (run / f"seed{seed}" / "metrics.json").write_text(json.dumps(metrics))
    if threads is not None:
        (run / f"seed{seed}" / "environment.json").write_text(json.dumps({"torch_threads": threads}))


def test_per_epoch_seconds_over_seeds(tmp_path):
    write_run(tmp_path, "texas", 0, seconds=30.0, epochs=10, threads=2, best=9,    # 3.0 s / epoch, best the last
              train_cpu_seconds=48.0, peak_rss_bytes=2_360_000_000)                # 2 threads, 80% busy
    write_run(tmp_path, "texas", 1, seconds=20.0, epochs=20, threads=1, best=3,    # 1.0
              train_cpu_seconds=12.0, peak_rss_bytes=9_960_000_000)                # paused for 8 s
    write_run(tmp_path, "texas", 2, seconds=40.0, epochs=20, threads=2, best=19)   # 2.0, best the last; no CPU time
    write_run(tmp_path, "cora", 0, seconds=6.0, epochs=3, threads=None)   # 2.0, no environment.json
    write_run(tmp_path, "cora", 1, seconds=None, epochs=3, threads=2)     # not recorded: left out
    table = timing_table(collect_runs(tmp_path))
    assert list(table.index) == [("gat", "cora"), ("gat", "texas")]  # the report's dataset order
    texas = table.loc[("gat", "texas")]
    assert texas.n == 3 and texas.threads == "1,2" and texas.epochs == pytest.approx(50 / 3)
    assert texas.allocator == "-"  # no environment.json records one
    assert (texas.per_epoch_median, texas.per_epoch_min, texas.per_epoch_max) == pytest.approx((2.0, 1.0, 3.0))
    assert texas.minutes == pytest.approx(30.0 / 60)
    assert (texas.cpu_minutes, texas.cpu_known) == (pytest.approx(30.0 / 60), 2)  # the mean of 48 and 12 s
    assert (texas.peak_max, texas.peak_known) == (9_960_000_000, 2)  # the larger of the two recorded
    assert (texas.best_min, texas.best_max, texas.best_is_last) == (3, 19, 2)
    cora = table.loc[("gat", "cora")]
    assert cora.n == 1 and cora.threads == "-" and cora.per_epoch_median == pytest.approx(2.0)
    text = render_timing(table)
    assert "| gat | texas | - | 3 | 1,2 | 17 | 2.00 | 1.00-3.00 | 0.5 | 0.5 (2 of 3) | 10.0 GB (2 of 3) | 3-19 | 2 of 3 | - |" \
        in text
    assert "| gat | cora | - | 1 | - | 3 | 2.00 | 2.00-2.00 | 0.1 | - | - | - | - | - |" in text   # no best_epoch recorded


def test_a_row_per_allocator_and_a_resumed_seed_under_both(tmp_path):
    kept = "glibc mallopt: mmap_max 0, trim_threshold 2147483647"
    jemalloc = "left as set (LD_PRELOAD=/opt/lib/libjemalloc.so.2)"
    for seed, seconds, peak in ((0, 40.0, 13_400_000_000), (1, 20.0, 5_000_000_000), (2, 30.0, 6_000_000_000)):
        write_run(tmp_path, "texas", seed, seconds=seconds, epochs=10, threads=1, peak_rss_bytes=peak)
    environments = {0: {"allocator": kept}, 1: {"allocator": jemalloc},
                    2: {"allocator": jemalloc, "earlier": [{"allocator": kept}]}}  # started kept, resumed jemalloc
    for seed, environment in environments.items():
        path = tmp_path / "texas_gat" / "0123456789" / f"seed{seed}" / "environment.json"
        path.write_text(json.dumps({"torch_threads": 1, **environment}))
    mixed = timing_table(collect_runs(tmp_path)).loc[("gat", "texas")]
    assert mixed.n == 3 and mixed.allocator == "glibc mmap_max 0, trim_threshold 2147483647 + libjemalloc.so.2"
    table = timing_table(collect_runs(tmp_path), by_allocator=True)
    assert list(table.index.get_level_values("setting")) == [
        "glibc mmap_max 0, trim_threshold 2147483647", "glibc mmap_max 0, trim_threshold 2147483647 + libjemalloc.so.2",
        "libjemalloc.so.2"]
    assert list(table.n) == [1, 1, 1] and list(table.peak_max) == [13_400_000_000, 6_000_000_000, 5_000_000_000]
    assert list(table.per_epoch_median) == pytest.approx([4.0, 3.0, 2.0])
    assert "| gat | texas | libjemalloc.so.2 | 1 | 1 | 10 | 2.00 |" in render_timing(table)


def curve(name: str, values: list[float]) -> list[dict]:
    return [{"epoch": epoch, "train_loss": 9.0, name: value} for epoch, value in enumerate(values)]


def test_last_epoch_gain_over_the_best_earlier_epoch(tmp_path):
    # recorded monitor, lower is better: the best earlier loss is 0.50, the last 0.45: 10 %
    write_run(tmp_path, "texas", 0, 4.0, 4, 1, best=3, monitor="val_loss",
              curves=curve("val_loss", [0.8, 0.5, 0.6, 0.45]))
    # no monitor recorded and no split_source (a node run): val_loss, 0.40 -> 0.396: 1 %
    write_run(tmp_path, "texas", 1, 4.0, 4, 1, best=3,
              curves=[{**row, "val_accuracy": 0.1 * row["epoch"]} for row in curve("val_loss", [0.9, 0.4, 0.5, 0.396])])
    # best epoch not the last: no gain
    write_run(tmp_path, "texas", 2, 4.0, 4, 1, best=1, monitor="val_loss", curves=curve("val_loss", [0.9, 0.4, 0.5, 0.6]))
    # a graph run written before 'monitor' (it records split_source): val_<main_metric>, higher is better:
    # 0.80 -> 0.82 is 2.5 %
    write_run(tmp_path, "molhiv", 0, 4.0, 4, 1, best=3, split_source="scaffold", main_metric="roc_auc",
              curves=curve("val_roc_auc", [0.70, 0.80, 0.75, 0.82]))
    # epochs whose evaluation was not finite (NaN, zoo.engine.divergence) are never the best earlier one:
    # 0.80 -> 0.84 is 5 %; they are counted (2 epochs in 1 seed)
    nan_curve = curve("val_roc_auc", [float("nan"), 0.80, float("nan"), 0.84])
    for epoch in (0, 2):
        nan_curve[epoch]["val_nonfinite"] = 3
    write_run(tmp_path, "molhiv", 1, 4.0, 4, 1, best=3, monitor="val_roc_auc", curves=nan_curve)
    table = timing_table(collect_runs(tmp_path))
    texas = table.loc[("gat", "texas")]
    assert (texas.last_gain_min, texas.last_gain_max) == pytest.approx((0.01, 0.1))
    molhiv = table.loc[("gat", "molhiv")]
    assert (molhiv.last_gain_min, molhiv.last_gain_max) == pytest.approx((0.025, 0.05))
    text = render_timing(table)
    assert "| 0.1 | - | - | 1-3 | 2 of 3 | 1.00-10.00% |" in text
    assert "| 0.1 | - | - | 3 | 2 of 2 | 2.50-5.00% | 2 epochs in 1 seed |" in text
    assert "| 0.1 | - | - | 1-3 | 2 of 3 | 1.00-10.00% | - |" in text


def test_no_recorded_time_is_an_error(tmp_path):
    write_run(tmp_path, "cora", 0, seconds=None, epochs=3, threads=2)
    with pytest.raises(ReportError, match="train_seconds"):
        timing_table(collect_runs(tmp_path))
