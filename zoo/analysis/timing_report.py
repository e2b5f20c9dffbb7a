"""Training time and schedule per (model, dataset), read from what each finished run recorded.

Each run's ``metrics.json`` holds ``train_seconds`` (wall clock of the training steps summed over
epochs, evaluation excluded, kept across resumes), ``train_cpu_seconds`` (the process's CPU time in
those steps, over all its threads: a paused or shared machine does not inflate it; runs started
before session 33 lack it), ``peak_rss_bytes`` (the run's largest resident set,
:mod:`zoo.engine.memory`; runs started before 5 December 2026 lack it), ``epochs_run`` and
``best_epoch``: a seed whose best epoch is its last was still improving when the schedule ended.
Its ``environment.json`` holds ``torch_threads`` as of the run's last start or resume, and the
malloc setting of each start (:mod:`zoo.engine.allocator`; it changes both the time and the peak,
README "Training"): a row lists the settings its seeds ran under, and ``by_allocator``
(``--by-allocator``) splits it by them. The
times are whatever the machine gave the run, so compare rows that ran under the same load only. For
a seed whose best epoch is its last, the "last-epoch gain" is how much that epoch improved the
monitored validation value over the best of all earlier epochs, relative to it: a large gain means
the run was still learning, a gain of a fraction of a percent that the schedule had settled. "NaN
evaluations" counts the epochs whose evaluation predictions were not finite (recorded as NaN,
never selected).

    python tools/report.py runs/ltga --timing
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from zoo.analysis.rendering import markdown_table
from zoo.analysis.runs import ReportError, per_seed_rows
from zoo.analysis.tables import LOWER_IS_BETTER, in_run_order


def allocator_label(setting: str) -> str:
    """A short name for a recorded malloc setting: the preloaded library's file name and the other
    variables the user set, or glibc's ``mallopt`` values.

    >>> allocator_label("left as set (LD_PRELOAD=/tmp/jemalloc/usr/lib/x86_64-linux-gnu/libjemalloc.so.2)")
    'libjemalloc.so.2'
    >>> allocator_label("left as set (LD_PRELOAD=/opt/libjemalloc.so.2; MALLOC_CONF=narenas:1)")
    'libjemalloc.so.2; MALLOC_CONF=narenas:1'
    >>> allocator_label("glibc mallopt: mmap_max 0, trim_threshold 2147483647")
    'glibc mmap_max 0, trim_threshold 2147483647'
    """
    if setting.startswith("left as set (") and setting.endswith(")"):
        chosen = setting.removeprefix("left as set (").removesuffix(")").split("; ")
        return "; ".join(Path(item.partition("=")[2]).name if item.startswith("LD_PRELOAD=") else item
                         for item in chosen)
    return setting.replace("glibc mallopt: ", "glibc ")


def _allocators(environment: dict) -> frozenset:
    """The labels of the settings a seed ran under, over its starts and resumes."""
    starts = [*environment.get("earlier", []), environment]
    return frozenset(allocator_label(start["allocator"]) for start in starts if "allocator" in start)


def _joined(labels) -> str:
    """Labels as one sorted " + "-joined string ("-" for none)."""
    return " + ".join(sorted(labels)) or "-"


def _seed_row(path: Path) -> dict | None:
    metrics = json.loads((path / "metrics.json").read_text())
    seconds, epochs = metrics.get("train_seconds"), metrics.get("epochs_run")
    if not seconds or not epochs:
        return None
    file = path / "environment.json"
    environment = json.loads(file.read_text()) if file.exists() else {}
    threads = environment.get("torch_threads")
    best = metrics.get("best_epoch")
    best_is_last = best is not None and best == epochs - 1
    nan_epochs = sum(any(key.endswith("_nonfinite") for key in row) for row in metrics.get("curves") or [])
    settings = _allocators(environment)
    return {"settings": settings, "setting": _joined(settings), "epochs": epochs, "seconds": seconds,
            "per_epoch": seconds / epochs, "threads": threads,
            "cpu_seconds": metrics.get("train_cpu_seconds"), "peak": metrics.get("peak_rss_bytes"),
            "best": best, "best_is_last": best_is_last,
            "last_gain": _last_epoch_gain(metrics, best) if best_is_last else None, "nan_epochs": nan_epochs}


def _last_epoch_gain(metrics: dict, best: int) -> float | None:
    """Relative improvement of the monitored value at epoch ``best`` over the best earlier epoch.

    The monitor is ``metrics["monitor"]``. Runs written before the trainers recorded it monitored
    ``val_<main_metric>`` if they are graph-property runs (they record ``split_source``) and
    ``val_loss`` otherwise (node runs)."""
    monitor = metrics.get("monitor") or (f"val_{metrics['main_metric']}" if "split_source" in metrics else "val_loss")
    values = [row[monitor] for row in metrics.get("curves") or [] if monitor in row]
    if best == 0 or len(values) != best + 1:
        return None
    lower = monitor.removeprefix("val_") in LOWER_IS_BETTER
    finite = [value for value in values[:-1] if not math.isnan(value)]  # NaN: non-finite evaluation, never best
    if not finite:
        return None
    earlier = min(finite) if lower else max(finite)
    if earlier == 0:  # a gain relative to zero is undefined
        return None
    return (earlier - values[-1] if lower else values[-1] - earlier) / abs(earlier)


def timing_table(runs: pd.DataFrame, by_allocator: bool = False) -> pd.DataFrame:
    """One row per (model, dataset), or per (model, dataset, setting) with ``by_allocator`` (the
    malloc settings a seed ran under, joined by " + "): the settings of its seeds (``allocator``),
    seeds ``n``, thread counts, mean epochs, seconds per epoch (median, min, max over seeds), mean
    training minutes per seed (wall clock, and CPU time over the seeds that recorded it), the
    range of the best (selected) epoch, how many seeds selected their last epoch, and the range of those seeds' last-epoch gain.

    ``runs`` is :func:`zoo.analysis.runs.collect_runs` output (its ``path`` column is read).

    >>> from zoo.analysis import collect_runs
    >>> runs = collect_runs(["runs/ltga16/cora_ltga_edge", "runs/ltga16/cora_ltga_head"])  # records in git
    >>> table = timing_table(runs)
    >>> table[["n", "epochs", "best_min", "best_max", "best_is_last"]]  # doctest: +NORMALIZE_WHITESPACE
                        n  epochs  best_min  best_max  best_is_last
    model     dataset
    ltga_edge cora     10    53.5        28        44             0
    ltga_head cora     10    55.6        29        48             0
    >>> set(table.allocator)  # the trainers' setting until session 27
    {'glibc mmap_threshold 33554432, trim_threshold 2147483647'}
    """
    rows = per_seed_rows(runs, _seed_row)
    if not rows:
        raise ReportError("no run recorded its training time (metrics.json 'train_seconds' and 'epochs_run')")
    groups = pd.DataFrame(rows).groupby(["model", "dataset"] + (["setting"] if by_allocator else []))
    table = pd.DataFrame({
        "allocator": groups.settings.agg(lambda sets: _joined(frozenset().union(*sets))),
        "n": groups.size(),
        "threads": groups.threads.agg(lambda t: ",".join(str(int(v)) for v in sorted(t.dropna().unique())) or "-"),
        "epochs": groups.epochs.mean(),
        "per_epoch_median": groups.per_epoch.median(),
        "per_epoch_min": groups.per_epoch.min(),
        "per_epoch_max": groups.per_epoch.max(),
        "minutes": groups.seconds.mean() / 60,
        "cpu_minutes": groups.cpu_seconds.mean() / 60,
        "cpu_known": groups.cpu_seconds.count(),
        "peak_max": groups.peak.max(),
        "peak_known": groups.peak.count(),
        "best_min": groups.best.min(),
        "best_max": groups.best.max(),
        "best_is_last": groups.best_is_last.sum(),
        "best_known": groups.best.count(),
        "last_gain_min": groups.last_gain.min(),
        "last_gain_max": groups.last_gain.max(),
        "nan_epochs": groups.nan_epochs.sum(),
        "nan_seeds": groups.nan_epochs.agg(lambda counts: int((counts > 0).sum()))})
    return in_run_order(table, runs)


def render_timing(table: pd.DataFrame) -> str:
    """The timing table as Markdown."""
    header = ["model", "dataset", "allocator", "n", "threads", "epochs", "s / epoch (median)", "min-max",
              "minutes / seed",
              "CPU minutes / seed", "peak resident", "best epoch", "best = last", "last-epoch gain", "NaN evaluations"]
    rows = [[key[0], key[1], row.allocator, str(int(row.n)), row.threads, f"{row.epochs:.0f}",
             f"{row.per_epoch_median:.2f}",
             f"{row.per_epoch_min:.2f}-{row.per_epoch_max:.2f}", f"{row.minutes:.1f}", _cpu_minutes(row),
             _peak(row), _best_range(row),
             "-" if pd.isna(row.best_min) else f"{int(row.best_is_last)} of {int(row.best_known)}",
             _gain_range(row), _nan_evaluations(row)]
            for key, row in table.iterrows()]
    return "\n".join(markdown_table(header, rows) + [
        "", "Training steps only (evaluation excluded), wall clock as each run recorded it in metrics.json, under "
            "whatever else the machine ran at the time. allocator: the malloc settings the seeds ran under "
            "(environment.json; zoo.engine.allocator), which change both time and memory (--by-allocator: a row "
            "per setting). "
            "CPU minutes / seed: the process's CPU time over all its "
            "threads in the same steps, which pauses and shared cores do not inflate (up to the thread count times "
            "the wall clock; over the seeds that recorded it, 'k of n' when not all did). peak resident: the largest "
            "resident set of any seed's training processes (the memory a run needs, freed memory the process "
            "keeps for reuse included; over the seeds that recorded it, 'k of n' when not all did). best epoch: the range (0-based) of the epoch each seed "
            "selected; best = last: seeds whose best epoch is the last they ran, still improving when the "
            "schedule ended; last-epoch gain: by how much (range over those seeds) their last epoch improved "
            "the monitored validation value over the best earlier epoch; NaN evaluations: epochs whose "
            "predictions were not finite (metrics recorded as NaN, never selected; zoo.engine.divergence), "
            "and in how many seeds."]) + "\n"


def _cpu_minutes(row) -> str:
    if not row.cpu_known:
        return "-"
    share = "" if row.cpu_known == row.n else f" ({int(row.cpu_known)} of {int(row.n)})"
    return f"{row.cpu_minutes:.1f}{share}"


def _peak(row) -> str:
    if not row.peak_known:
        return "-"
    share = "" if row.peak_known == row.n else f" ({int(row.peak_known)} of {int(row.n)})"
    return f"{row.peak_max / 1e9:.1f} GB{share}"


def _best_range(row) -> str:
    if pd.isna(row.best_min):
        return "-"
    low, high = int(row.best_min), int(row.best_max)
    return str(low) if low == high else f"{low}-{high}"


def _nan_evaluations(row) -> str:
    if not row.nan_epochs:
        return "-"
    return f"{int(row.nan_epochs)} epoch{'s' * (row.nan_epochs != 1)} in {int(row.nan_seeds)} " \
        f"seed{'s' * (row.nan_seeds != 1)}"


def _gain_range(row) -> str:
    if pd.isna(row.last_gain_min):
        return "-"
    low, high = 100 * row.last_gain_min, 100 * row.last_gain_max
    return f"{low:.2f}%" if f"{low:.2f}" == f"{high:.2f}" else f"{low:.2f}-{high:.2f}%"
