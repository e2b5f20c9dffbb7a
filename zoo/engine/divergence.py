"""Non-finite numbers in a training run, stopped or recorded where they appear.

* A training loss that is not finite stops the run with :class:`TrainingDiverged` before its
  gradients reach the weights (:func:`check_loss`), naming the epoch and batch.
* Predictions that are not finite in evaluation (training is fine, but eval mode, e.g. BatchNorm's
  running statistics, lets activations overflow on some graphs) do not stop it: the trainer
  records that epoch's metrics as NaN, with the number of graphs affected
  (:func:`nonfinite_rows`), and model selection never picks a NaN epoch. A graph whose attention
  scores overflow there (``zoo.ops.NonFiniteScores``) counts as such a prediction, whatever the
  normaliser; attention that overflows in training, or in a node model's evaluation, stops the run.
* A seed that diverged is recorded in its folder (:func:`record_divergence`, ``diverged.json``), so
  a rerun or a later sweep reports it instead of training it into the same NaN again; ``--force``
  retrains it from scratch.

>>> check_loss(0.5, "epoch 0, batch 1")
0.5
>>> nonfinite_rows(torch.tensor([[1.0], [float("nan")], [float("inf")]]))
2
"""
from __future__ import annotations

import json
import math
from pathlib import Path

import torch

from zoo.engine.checkpoint import write_json

DIVERGED = "diverged.json"

FIXES = ("lower the learning rate (optim.lr: --set optim.lr=5e-4 with tools/train.py, --lr with tools/finetune.py), "
         "lengthen optim.warmup_epochs or set optim.clip_grad_norm")


class TrainingDiverged(RuntimeError):
    """The run cannot go on: its training loss, or every epoch's validation, is not finite."""


def check_loss(value: float, where: str) -> float:
    """``value`` if finite, else :class:`TrainingDiverged` naming ``where`` (e.g. ``"epoch 2, batch 7
    of zinc_cpu_relu seed 3"``) and the fixes to try."""
    if not math.isfinite(value):
        raise TrainingDiverged(
            f"training diverged: the training loss is {value} at {where}, so no update was made from it. "
            f"last.pt holds an earlier state. To go on, check the inputs for NaN, or {FIXES}.")
    return value


def nonfinite_rows(output: torch.Tensor) -> int:
    """How many rows (graphs, nodes) of ``output`` hold a NaN or an infinity."""
    return int((~torch.isfinite(output)).reshape(len(output), -1).any(1).sum())


def record_divergence(seed_dir: Path, recipe: str, seed: int, err: TrainingDiverged) -> None:
    """Write ``seed_dir/diverged.json``: this seed's run ended in :class:`TrainingDiverged` ``err``.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as seed_dir:
    ...     record_divergence(seed_dir, "cora_gat", 0, TrainingDiverged("training diverged: the loss is nan"))
    ...     recorded_divergence(seed_dir)
    'training diverged: the loss is nan'
    """
    write_json({"recipe": recipe, "seed": seed, "message": str(err)}, Path(seed_dir) / DIVERGED)


def still_diverged(message: str, record: Path, whose: str = "") -> TrainingDiverged:
    """The :class:`TrainingDiverged` of a divergence recorded in ``record`` (``whose``: e.g.
    ``"seed 0, 1 of cora_gcn: "``): its message, where it is recorded and what a rerun does."""
    return TrainingDiverged(f"{message} ({whose}recorded in {record}; a rerun reports it again, --force retrains)")


def recorded_divergence(seed_dir: Path) -> str | None:
    """The message of ``seed_dir``'s recorded divergence, or None if it has none."""
    path = Path(seed_dir) / DIVERGED
    return json.loads(path.read_text())["message"] if path.exists() else None
