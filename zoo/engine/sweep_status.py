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


@dataclasses.dataclass
class SeedStatus:
    """One seed of one recipe: its state (one of :data:`STATES`), the epochs it has run
    (``under way`` only) of the recipe's ``epochs``, training seconds spent and left (None when
    not known), and the pid of the process training it now (``under way`` only; None if none)."""
    recipe: str
    seed: int
    state: str
    epochs: int
    epoch: int | None = None
    seconds: float | None = None
    left: float | None = None
    pid: str | None = None


def sweep_status(recipes: list[Recipe], out: str | Path = "runs", seeds: list[int] | None = None) -> list[SeedStatus]:
    """The status of every (recipe, seed) a ``tools/sweep.py`` call with the same arguments would
    train, in recipe order.

    >>> from zoo.engine.recipe import load_recipe
    >>> sweep_status([load_recipe("recipes/zinc_cpu_g1.yaml")], "runs/zinc_cpu")[0]  # records in git
    SeedStatus(recipe='zinc_cpu_g1', seed=0, state='finished', epochs=30, epoch=None, seconds=6442.98..., left=0.0, pid=None)
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
                                      seconds=metrics.get("train_seconds"), left=0.0))
            elif (seed_dir / DIVERGED).exists():
                own.append(SeedStatus(recipe.name, seed, "diverged", epochs, left=0.0))
            elif (seed_dir / LAST).exists():
                saved = load_checkpoint(seed_dir / LAST)
                loop, inside = saved["state"], (saved.get("partial") or {}).get("seconds", 0.0)
                done = loop["epoch"]  # whole epochs; a write between batches adds ``inside`` seconds
                pace = loop["train_seconds"] / done if done else None
                own.append(SeedStatus(recipe.name, seed, "under way", epochs, epoch=done,
                                      seconds=loop["train_seconds"] + inside,
                                      left=None if pace is None else max(pace * (epochs - done) - inside, 0.0),
                                      pid=holder_of(seed_dir)))
            elif seed_dir.exists():
                own.append(SeedStatus(recipe.name, seed, "under way", epochs, epoch=0, pid=holder_of(seed_dir)))
            else:
                own.append(SeedStatus(recipe.name, seed, "to run", epochs))
        # every finished seed of the recipe sets its pace, those outside a ``seeds`` selection too
        paces = [run["train_seconds"] for run in finished_runs(base) if run.get("train_seconds") is not None]
        if not paces:  # the projected whole runs of the seeds under way (whole epochs trained)
            paces = [row.seconds + row.left for row in own if row.state == "under way" and row.left is not None]
        for row in own:
            if row.left is None:  # no whole epoch trained yet
                row.left = max(sum(paces) / len(paces) - (row.seconds or 0.0), 0.0) if paces else None
        rows.extend(own)
    return rows


def format_status(rows: list[SeedStatus]) -> str:
    """A table with one line per recipe (its seeds in each state, hours left), then the totals.

    >>> print(format_status([SeedStatus("a", 0, "finished", 30, seconds=3600.0, left=0.0),
    ...                      SeedStatus("a", 1, "under way", 30, epoch=10, seconds=1200.0, left=2400.0, pid="42"),
    ...                      SeedStatus("a", 2, "to run", 30, left=3600.0)]))
    recipe  finished  twin  diverged  under way                to run  hours left
    a       0         -     -         1 (epoch 10/30, pid 42)  2       1.7
    <BLANKLINE>
    3 runs: 1 finished, 0 twin, 0 diverged, 1 under way (1 training now), 1 to run.
    Training time left: 1.7 h.
    (train_seconds, at the pace of each recipe's finished seeds, or of its seeds under way when none has finished; evaluation not included)
    """
    names = list(dict.fromkeys(row.recipe for row in rows))
    header = ["recipe", *STATES, "hours left"]
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
        cells.append(_hours([row.left for row in own]))
        table.append(cells)
    widths = [max(len(line[i]) for line in table) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(width) for cell, width in zip(line, widths)).rstrip() for line in table]
    training = sum(row.pid is not None for row in rows)
    now = f" ({training} training now)" if training else ""
    counts = ", ".join(f"{sum(row.state == state for row in rows)} {state}" + (now if state == "under way" else "")
                       for state in STATES)
    unknown = sum(row.left is None for row in rows)
    left = f"Training time left: {_hours([row.left for row in rows if row.left is not None])} h"
    if unknown == len(rows):
        left = "Training time left: not estimated, no recipe has a finished seed or a whole epoch under way yet"
    elif unknown:
        left += f" for {len(rows) - unknown} runs; {unknown} runs of recipes with no finished seed and no whole epoch " \
                "under way are not estimated"
    lines += ["", f"{len(rows)} runs: {counts}.", left + ".",
              "(train_seconds, at the pace of each recipe's finished seeds, or of its seeds under way when none has "
              "finished; evaluation not included)"]
    return "\n".join(lines)


def _hours(seconds: list[float | None]) -> str:
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
