"""The epoch loop every trainer shares: resume, early stopping, best weights, checkpoints,
TensorBoard scalars and a progress bar (on a terminal; where standard error is a file or a pipe,
as in a background job's log, one line an epoch instead; :mod:`zoo._progress` does the same for
the batches of a long epoch).

``last.pt`` is written atomically (model, optimisers, schedulers, loop state and RNG states)
after the first epoch, then after any epoch that ends ``checkpoint_every`` seconds (default
:data:`CHECKPOINT_EVERY`) or more after the last write, and after the last epoch. A trainer whose
epochs can be long (the graph trainer: a molhiv epoch of the paper's model is half an hour on a
CPU) also writes it between batches, once ``checkpoint_every`` seconds have passed since the
epoch began and since the last write (:class:`BatchCheckpoints`); the end of the first epoch is
then written only on that clock. A killed run continues from its last
write with the result it would have reached uninterrupted, so a kill costs at most about
``checkpoint_every`` seconds of training (plus one epoch for a trainer without batch checkpoints).
Writing every epoch made a Cora LTGA-Edge seed use 39.2 s of CPU instead of 22.0 s (README,
"Training-step overhead"). Under torchrun only rank 0 writes checkpoints, events and the bar.
"""
from __future__ import annotations

import contextlib
import math
import sys
import time
from itertools import islice
from pathlib import Path
from typing import Callable

import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm.auto import tqdm

from zoo._progress import on_terminal
from zoo.engine.allocator import release_freed_memory
from zoo.engine.checkpoint import cpu_state_dict, load_checkpoint, save_checkpoint
from zoo.engine.distributed import is_main
from zoo.engine.divergence import FIXES, TrainingDiverged
from zoo.engine.memory import gigabytes, peak_resident_bytes, reset_peak
from zoo.engine.reproducibility import rng_state, set_rng_state
from zoo.ops import NonFiniteScores

LAST = "last.pt"
CHECKPOINT_EVERY = 30.0  # seconds of training a kill can cost
RELEASE_EVERY = 300.0
"""Seconds between returns of the allocator's kept memory to the system during a run
(:func:`zoo.engine.allocator.release_freed_memory`), at an epoch's end or between batches; it is
also released as a run starts, so a sweep's earlier, larger run does not count in its peak. Kept
memory is what makes a step fast (no page faults on memory the last step freed), but over a long
run of batches of varying shape the allocator keeps more than it reuses: a Peptides-func run's
resident set rose epoch by epoch, 7.1 to 12.4 GB under jemalloc without purging (README
"Training"). Once every five minutes the next step faults its working set back in, once."""


class BatchCheckpoints:
    """What ``run_epochs`` hands a ``train_epoch(epoch, batches)`` that can stop inside an epoch.

    ``start``: the epoch's batches already trained before a kill; iterate ``remaining(batches)``
    to skip them (the batch order must be the same, e.g. a loader re-seeded per epoch);
    ``carry``: the running values the epoch had then (``{}`` on a fresh epoch). Call
    ``done(trained, carry)`` after each batch with the number of batches trained so far and the
    running values: it writes ``last.pt`` once ``checkpoint_every`` seconds have passed since the
    epoch began and since the last write.
    """

    def __init__(self, start: int, carry: dict, save: Callable[[int, dict], None]):
        self.start, self.carry, self._save = start, carry, save

    def remaining(self, batches):
        """``batches`` from the ``start``-th on. The skipped ones are still drawn, so a sampler
        reaches the same state, and torch's generator is then set back to what ``last.pt`` held
        (a loader draws its base seed from it when its iteration begins)."""
        batches = iter(batches)
        if self.start:
            rng = torch.get_rng_state()
            for _ in islice(batches, self.start):
                pass
            torch.set_rng_state(rng)
        return batches

    def done(self, trained: int, carry: dict) -> None:
        self._save(trained, carry)


def run_epochs(
    *,
    model: torch.nn.Module,
    optimizers: list,
    run_dir: Path,
    epochs: int,
    patience: int,
    train_epoch: Callable[[int], dict],
    evaluate: Callable[[], dict],
    monitor: str,
    mode: str,
    schedulers: list = (),
    desc: str = "",
    progress: bool = True,
    on_epoch_end: Callable[[int, dict], None] | None = None,
    checkpoint_every: float = CHECKPOINT_EVERY,
    batch_checkpoints: bool = False,
    release_every: float = RELEASE_EVERY,
) -> dict:
    """Train until ``epochs`` or ``patience`` epochs without a better ``monitor`` value.

    ``train_epoch(epoch)`` trains once and returns a row of scalars; ``evaluate()`` returns more
    (it must contain ``monitor``); ``mode`` is ``"min"`` or ``"max"``. Returns the loop state:
    ``epoch`` (epochs run), ``best_epoch``, ``best``, ``best_model`` (state dict), ``curves``
    (one row per epoch), ``train_seconds`` (wall clock of the training steps), ``train_cpu_seconds``
    (the process's CPU time over all its threads in those steps, which a paused or shared machine
    does not inflate; None for a run resumed from a checkpoint written before it was recorded),
    ``peak_rss_bytes`` (the largest resident set of the processes that ran it, kept across resumes,
    :mod:`zoo.engine.memory`; under torchrun, each rank's own, and rank 0 saves it;
    None where unknown, or for a run resumed from a checkpoint written before it was recorded) and
    ``stopped_early``; :class:`TrainingDiverged` if no
    epoch's ``monitor`` was better than the start, i.e. every one was NaN. ``on_epoch_end(epoch, row)`` runs
    after each epoch (after its checkpoint, if one was written; ``checkpoint_every=0`` writes one
    every epoch). ``batch_checkpoints``: call ``train_epoch(epoch, batches)`` with a
    :class:`BatchCheckpoints`, so that ``last.pt`` is also written between batches.
    ``release_every``: seconds between returns of the allocator's kept memory (:data:`RELEASE_EVERY`).
    """
    if mode not in ("min", "max"):
        raise ValueError(f"mode must be 'min' or 'max', got {mode!r}")
    better = (lambda a, b: a < b) if mode == "min" else (lambda a, b: a > b)
    state = {"epoch": 0, "best": math.inf if mode == "min" else -math.inf, "best_epoch": -1, "bad_epochs": 0,
             "best_model": cpu_state_dict(model), "curves": [], "train_seconds": 0.0, "train_cpu_seconds": 0.0,
             "peak_rss_bytes": None if peak_resident_bytes() is None else 0}
    last_path = Path(run_dir) / LAST
    partial = None  # where a kill inside an epoch stopped: {"trained", "carry", "seconds", "cpu_seconds"}
    if last_path.exists():
        saved = load_checkpoint(last_path)
        model.load_state_dict(saved["model"])
        for part, states in ((optimizers, saved["optimizers"]), (schedulers, saved["schedulers"])):
            for obj, obj_state in zip(part, states):
                obj.load_state_dict(obj_state)
        set_rng_state(saved["rng"])
        state, partial = saved["state"], saved.get("partial")
        if partial and "cpu_seconds" not in partial:
            state["train_cpu_seconds"] = None  # its epoch's CPU time so far is unknown
        state.setdefault("train_cpu_seconds", None)  # written before CPU time was recorded
        state.setdefault("peak_rss_bytes", None)  # likewise for memory
        if is_main():
            inside = f", batch {partial['trained']}" if partial else ""
            print(f"resuming {run_dir} from epoch {state['epoch']}{inside}")

    main = is_main()
    writer = SummaryWriter(str(Path(run_dir) / "tensorboard"), purge_step=state["epoch"]) if main else None
    lines = progress and main and not on_terminal()  # a log: one line an epoch, not a bar's redraws
    bar = tqdm(total=epochs, initial=state["epoch"], desc=desc, disable=not (progress and main) or lines, leave=False,
               dynamic_ncols=True)
    verify = True  # the first save of the run is read back with weights_only; later ones hold the same kinds
    saved_at = -math.inf
    release_freed_memory()  # a sweep's earlier runs in this process: their kept memory is not this run's
    reset_peak()  # nor their peak
    released_at = time.perf_counter()

    def release() -> None:
        nonlocal released_at
        if time.perf_counter() - released_at >= release_every:
            release_freed_memory()
            released_at = time.perf_counter()

    def note_peak() -> None:
        if state["peak_rss_bytes"] is not None and (peak := peak_resident_bytes()) is not None:
            state["peak_rss_bytes"] = max(state["peak_rss_bytes"], peak)

    def save(**extra):
        nonlocal verify, saved_at
        note_peak()
        save_checkpoint({"model": cpu_state_dict(model), "optimizers": [o.state_dict() for o in optimizers],
                         "schedulers": [s.state_dict() for s in schedulers], "rng": rng_state(),
                         "state": state, **extra}, last_path, verify=verify)
        verify, saved_at = False, time.perf_counter()

    def save_inside(trained: int, carry: dict) -> None:
        now = time.perf_counter()
        if main and now - max(saved_at, started) >= checkpoint_every:
            save(partial={"trained": trained, "carry": carry, "seconds": now - started,
                          "cpu_seconds": time.process_time() - cpu_started})
        release()

    try:
        while state["epoch"] < epochs and state["bad_epochs"] < patience:
            started = time.perf_counter() - (partial["seconds"] if partial else 0.0)
            cpu_started = time.process_time() - (partial.get("cpu_seconds", 0.0) if partial else 0.0)
            with overflow_is_divergence("training", state["epoch"], desc):
                if batch_checkpoints:
                    start, carry = (partial["trained"], partial["carry"]) if partial else (0, {})
                    checkpoints = BatchCheckpoints(start, carry, save_inside)
                    row = {"epoch": state["epoch"], **train_epoch(state["epoch"], checkpoints)}
                else:
                    row = {"epoch": state["epoch"], **train_epoch(state["epoch"])}
            partial = None
            for scheduler in schedulers:
                scheduler.step()
            seconds = time.perf_counter() - started
            state["train_seconds"] += seconds
            if state["train_cpu_seconds"] is not None:
                state["train_cpu_seconds"] += time.process_time() - cpu_started
            with overflow_is_divergence("evaluation", state["epoch"], desc):
                evaluated = evaluate()
            note_peak()
            release()
            row.update(evaluated)
            _say_non_finite(desc, state["epoch"], evaluated, monitor)
            state["curves"].append(row)
            if better(row[monitor], state["best"]):
                state.update(best=row[monitor], best_epoch=state["epoch"], bad_epochs=0,
                             best_model=cpu_state_dict(model))
            else:
                state["bad_epochs"] += 1
            state["epoch"] += 1
            ending = state["epoch"] >= epochs or state["bad_epochs"] >= patience
            if main and (ending or time.perf_counter() - saved_at >= checkpoint_every):
                save()
            if main:
                for key, value in row.items():
                    if key != "epoch":
                        writer.add_scalar(key.replace("_", "/", 1), value, row["epoch"])
                shown = {key: f"{value:.4g}" for key, value in row.items() if key in ("train_loss", monitor)
                         or key.startswith("val_") and not key.endswith("loss")}
                bar.update(1)
                bar.set_postfix(shown)
                if lines:
                    memory = f", peak {gigabytes(state['peak_rss_bytes'])} resident" if state["peak_rss_bytes"] else ""
                    print(f"{desc or 'the run'}, epoch {row['epoch']} ({state['epoch']}/{epochs}): "
                          + ", ".join(f"{key} {value}" for key, value in shown.items())
                          + f" ({seconds:.0f} s of training{memory})", file=sys.stderr, flush=True)
                if on_epoch_end is not None:
                    on_epoch_end(row["epoch"], row)
    finally:
        bar.close()
        if writer is not None:
            writer.close()
    state["stopped_early"] = state["bad_epochs"] >= patience
    if state["best_epoch"] < 0 and state["epoch"]:  # every value was NaN, which is never better
        raise TrainingDiverged(f"{desc or 'the run'}: none of its {state['epoch']} epochs gave a finite {monitor} "
                               f"(NaN in the curves of last.pt), so there is no model to select. To go on, {FIXES}, "
                               "and rerun with --force")
    return state


@contextlib.contextmanager
def overflow_is_divergence(stage: str, epoch: int, desc: str):
    """Turn a ``zoo.ops`` refusal of non-finite attention scores (they overflowed before any loss
    existed) into the :class:`TrainingDiverged` it means in a run, naming the ``stage`` (e.g.
    ``"evaluation"``) of ``epoch``."""
    try:
        yield
    except NonFiniteScores as err:
        raise TrainingDiverged(f"training diverged: the attention {err}, in the {stage} of epoch {epoch} of "
                               f"{desc or 'the run'}. Any last.pt holds an earlier state. To go on, check the inputs "
                               f"for NaN, or {FIXES}.") from err


def _say_non_finite(desc: str, epoch: int, evaluated: dict, monitor: str) -> None:
    """One line (rank 0) for an evaluation with NaN values, with the trainer's ``*_nonfinite`` counts."""
    nan = [key for key, value in evaluated.items() if isinstance(value, float) and math.isnan(value)]
    if nan and is_main():
        counts = "".join(f"; {key} {value}" for key, value in evaluated.items() if key.endswith("_nonfinite"))
        print(f"{desc or 'the run'}, epoch {epoch}: non-finite evaluation, recorded as NaN ({', '.join(nan)}{counts}); "
              f"model selection never takes a NaN {monitor}")


def finish(run_dir: Path) -> None:
    """Drop ``last.pt`` once the run's final metrics are written (best.pt stays)."""
    (Path(run_dir) / LAST).unlink(missing_ok=True)
