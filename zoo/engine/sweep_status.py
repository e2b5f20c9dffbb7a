"""Where a sweep stands, without training anything: each seed of each recipe is finished, copyable
from a finished twin (another recipe with the same config hash), diverged (``diverged.json``: a
sweep does not retrain it), under way (with the epoch its ``last.pt`` reached, and the pid of the
process training it now, if one is) or still to run, with the training time left
(``tools/sweep.py --status``).

Times are ``train_seconds`` (the training steps' wall clock, evaluation not included), so they
carry the load of the machine they ran on. A seed under way is extrapolated from its own pace
over the epochs it has left, less the seconds a write between batches has spent on the current
one (an upper bound when early stopping ends it sooner); a seed with no whole epoch yet, or still
to run, takes the mean of its recipe's finished seeds (those outside a ``seeds`` selection
too) less what it has spent. A recipe with no
finished seed takes the mean of its seeds under way, each projected to its whole schedule at its
own pace; a recipe with neither is not estimated.

The same projection runs on ``train_cpu_seconds`` (the process's CPU time in the training
steps, recorded since session 34), which does not grow when other jobs share the cores: the
hours of one core a sweep still needs. A seed whose CPU time was not recorded takes its recipe's
CPU pace for the share of epochs it has left.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

from zoo.engine.checkpoint import load_checkpoint
from zoo.engine.divergence import DIVERGED
from zoo.engine.epoch_loop import LAST
from zoo.engine.experiment import finished_runs, finished_twin, run_folder
from zoo.engine.recipe import Recipe
from zoo.engine.run_lock import holder_of

STATES = ("finished", "twin", "diverged", "under way", "to run")
TO_TRAIN = ("under way", "to run")  # the states whose time left counts


@dataclasses.dataclass
class SeedStatus:
    """One seed of one recipe: its state (one of :data:`STATES`), the epochs it has run
    (``under way`` only) of the recipe's ``epochs``, training seconds spent and left, wall clock
    and CPU (None when not known), and the pid of the process training it now (``under way``
    only; None if none)."""
    recipe: str
    seed: int
    state: str
    epochs: int
    epoch: int | None = None
    seconds: float | None = None
    left: float | None = None
    pid: str | None = None
    cpu_seconds: float | None = None
    cpu_left: float | None = None


# (metrics.json and last.pt key, last.pt "partial" key, SeedStatus spent and left fields) per clock
CLOCKS = (("train_seconds", "seconds", "seconds", "left"),
          ("train_cpu_seconds", "cpu_seconds", "cpu_seconds", "cpu_left"))


def sweep_status(recipes: list[Recipe], out: str | Path = "runs", seeds: list[int] | None = None) -> list[SeedStatus]:
    """The status of every (recipe, seed) a ``tools/sweep.py`` call with the same arguments would
    train, in recipe order.

    >>> from zoo.engine.recipe import load_recipe
    >>> sweep_status([load_recipe("recipes/zinc_cpu_g1.yaml")], "runs/zinc_cpu")[0]  # records in git
    SeedStatus(recipe='zinc_cpu_g1', seed=0, state='finished', epochs=30, epoch=None, seconds=6442.98..., left=0.0, pid=None, cpu_seconds=None, cpu_left=0.0)
    """
    rows = []
    for recipe in recipes:
        base, epochs = run_folder(recipe, out), recipe.optim.epochs
        own = []
        for seed in seeds if seeds is not None else recipe.seeds:
            seed_dir = base / f"seed{seed}"
            twin = None if seed_dir.exists() else finished_twin(base, seed_dir.name)
            if (seed_dir / "metrics.json").exists() or twin is not None:
                metrics = json.loads(((twin or seed_dir) / "metrics.json").read_text())
                own.append(SeedStatus(recipe.name, seed, "twin" if twin else "finished", epochs,
                                      seconds=metrics.get("train_seconds"), left=0.0,
                                      cpu_seconds=metrics.get("train_cpu_seconds"), cpu_left=0.0))
            elif (seed_dir / DIVERGED).exists():
                own.append(SeedStatus(recipe.name, seed, "diverged", epochs, left=0.0, cpu_left=0.0))
            elif (seed_dir / LAST).exists():
                saved = load_checkpoint(seed_dir / LAST)
                loop, partial = saved["state"], saved.get("partial") or {}
                done = loop["epoch"]  # whole epochs; a write between batches adds the partial epoch's time
                row = SeedStatus(recipe.name, seed, "under way", epochs, epoch=done, pid=holder_of(seed_dir))
                for key, inside_key, spent_field, left_field in CLOCKS:
                    if loop.get(key) is None:  # CPU time of a run begun before it was recorded
                        continue
                    inside = partial.get(inside_key, 0.0)
                    setattr(row, spent_field, loop[key] + inside)
                    if done:
                        setattr(row, left_field, max(loop[key] / done * (epochs - done) - inside, 0.0))
                own.append(row)
            elif seed_dir.exists():
                own.append(SeedStatus(recipe.name, seed, "under way", epochs, epoch=0, pid=holder_of(seed_dir)))
            else:
                own.append(SeedStatus(recipe.name, seed, "to run", epochs))
        finished = finished_runs(base)
        for key, _, spent_field, left_field in CLOCKS:
            # every finished seed of the recipe sets its pace, those outside a ``seeds`` selection too
            paces = [run[key] for run in finished if run.get(key) is not None]
            if not paces:  # the projected whole runs of the seeds under way (whole epochs trained)
                paces = [getattr(row, spent_field) + getattr(row, left_field) for row in own
                         if row.state == "under way" and getattr(row, left_field) is not None]
            for row in own:
                if getattr(row, left_field) is not None or not paces:
                    continue
                pace, spent = sum(paces) / len(paces), getattr(row, spent_field)
                # no whole epoch trained yet: the pace less what it has spent; its time not recorded: the epochs left
                left = pace - spent if spent is not None else pace * (epochs - (row.epoch or 0)) / epochs
                setattr(row, left_field, max(left, 0.0))
        rows.extend(own)
    return rows


def format_status(rows: list[SeedStatus]) -> str:
    """A table with one line per recipe (its seeds in each state, hours left by the wall clock and of
    CPU), then the totals.

    >>> print(format_status([SeedStatus("a", 0, "finished", 30, seconds=3600.0, left=0.0,
    ...                                 cpu_seconds=3000.0, cpu_left=0.0),
    ...                      SeedStatus("a", 1, "under way", 30, epoch=10, seconds=1200.0, left=2400.0, pid="42",
    ...                                 cpu_seconds=1000.0, cpu_left=2000.0),
    ...                      SeedStatus("a", 2, "to run", 30, left=3600.0, cpu_left=3000.0)]))
    recipe  finished  twin  diverged  under way                to run  hours left  CPU hours left
    a       0         -     -         1 (epoch 10/30, pid 42)  2       1.7         1.4
    <BLANKLINE>
    3 runs: 1 finished, 0 twin, 0 diverged, 1 under way (1 training now), 1 to run.
    Training time left: 1.7 h.
    CPU time left: 1.4 h of one core.
    (train_seconds and train_cpu_seconds, at the pace of each recipe's finished seeds, or of its seeds under way when none has finished; evaluation not included)
    """
    names = list(dict.fromkeys(row.recipe for row in rows))
    header = ["recipe", *STATES, "hours left", "CPU hours left"]
    table = [header]
    for name in names:
        own = [row for row in rows if row.recipe == name]
        cells = [name]
        for state in STATES:
            picked = [row for row in own if row.state == state]
            if state == "under way":
                cells.append(", ".join(f"{row.seed} (epoch {row.epoch or 0}/{row.epochs}"
                                       + (f", pid {row.pid})" if row.pid else ")") for row in picked) or "-")
            else:
                cells.append(_seed_ranges([row.seed for row in picked]))
        left = [row for row in own if row.state in TO_TRAIN]
        cells += [_hours([row.left for row in left]), _hours([row.cpu_left for row in left])]
        table.append(cells)
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in table]
    training = sum(row.pid is not None for row in rows)
    now = f" ({training} training now)" if training else ""
    counts = ", ".join(f"{sum(row.state == state for row in rows)} {state}" + (now if state == "under way" else "")
                       for state in STATES)
    left = [row for row in rows if row.state in TO_TRAIN]
    lines += ["", f"{_runs(len(rows))}: {counts}.",
              _left_line("Training time left", "h", [row.left for row in left],
                         "finished seed or whole epoch under way"),
              _left_line("CPU time left", "h of one core", [row.cpu_left for row in left],
                         "finished seed or whole epoch under way that recorded its CPU time"),
              "(train_seconds and train_cpu_seconds, at the pace of each recipe's finished seeds, or of its seeds "
              "under way when none has finished; evaluation not included)"]
    return "\n".join(lines)


def _left_line(label: str, unit: str, lefts: list[float | None], lacking: str) -> str:
    """``label``'s total of ``lefts`` (one per run still to train) in hours, with the count of runs
    not estimated because their recipes have no ``lacking``."""
    unknown = sum(left is None for left in lefts)
    if lefts and unknown == len(lefts):
        return f"{label}: not estimated, no recipe with runs left has a {lacking} yet."
    line = f"{label}: {_hours([left for left in lefts if left is not None])} {unit}"
    if unknown:
        line += (f" for {_runs(len(lefts) - unknown)}; {_runs(unknown)} of recipes with no {lacking} "
                 f"{'is' if unknown == 1 else 'are'} not estimated")
    return line + "."


def _runs(count: int) -> str:
    return f"{count} run" + ("" if count == 1 else "s")


def _hours(seconds: list[float | None]) -> str:
    """Hours left of the runs still to train: ``?`` where none is estimated, ``+?`` where some are not."""
    if not seconds:
        return "0.0"
    known = [s for s in seconds if s is not None]
    text = f"{sum(known) / 3600:.1f}" if known else "?"
    return text + ("+?" if known and len(known) < len(seconds) else "")


def _seed_ranges(seeds: list[int]) -> str:
    """``[0, 1, 2, 5]`` as ``"0-2,5"`` (the form ``--seeds`` takes); ``"-"`` when empty."""
    spans: list[list[int]] = []
    for seed in sorted(seeds):
        if spans and seed == spans[-1][1] + 1:
            spans[-1][1] = seed
        else:
            spans.append([seed, seed])
    return ",".join(f"{lo}-{hi}" if hi > lo else f"{lo}" for lo, hi in spans) or "-"
