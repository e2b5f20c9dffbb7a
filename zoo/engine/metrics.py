"""Node-classification metrics on logits, on torchmetrics where it has them.

Multi-class: accuracy, macro-F1, NLL, multi-class Brier score and 15-bin ECE.
Binary tasks (Platonov et al.'s Tolokers, Minesweeper, Questions) add ROC-AUC of class 1.
"""
from __future__ import annotations

import torch
from torch.nn import functional as F
from torchmetrics.functional.classification import (
    binary_auroc,
    multiclass_accuracy,
    multiclass_calibration_error,
    multiclass_f1_score,
)


def brier_score(probs: torch.Tensor, labels: torch.Tensor) -> torch.Tensor:
    """Multi-class Brier score: mean over nodes of sum_k (p_k - [y = k])^2 (range 0 to 2)."""
    onehot = F.one_hot(labels, probs.shape[1]).to(probs.dtype)
    return ((probs - onehot) ** 2).sum(1).mean()


_METRICS = {
    "accuracy": lambda lg, p, y: multiclass_accuracy(p, y, p.shape[1], average="micro"),
    "macro_f1": lambda lg, p, y: multiclass_f1_score(p, y, p.shape[1], average="macro"),
    "nll": lambda lg, p, y: F.cross_entropy(lg, y),
    "brier": lambda lg, p, y: brier_score(p, y),
    "ece": lambda lg, p, y: multiclass_calibration_error(p, y, p.shape[1], n_bins=15, norm="l1"),
    "roc_auc": lambda lg, p, y: binary_auroc(p[:, 1], y),
}


def metric_names(num_classes: int) -> list[str]:
    """The metrics reported for a task with ``num_classes`` classes (ROC-AUC only if binary)."""
    return [name for name in _METRICS if name != "roc_auc" or num_classes == 2]


def classification_metrics(logits: torch.Tensor, labels: torch.Tensor, names: list[str] | None = None) -> dict[str, float]:
    """Metrics of one split from raw logits ``[N, C]`` and integer labels ``[N]``.

    ``names`` picks a subset (default: all of :func:`metric_names`).

    >>> classification_metrics(torch.tensor([[2.0, 0.0], [0.0, 1.0]]), torch.tensor([0, 1]), ["accuracy"])
    {'accuracy': 1.0}
    """
    if logits.ndim != 2 or labels.shape != logits.shape[:1] or logits.shape[0] == 0:
        raise ValueError(f"need logits [N, C] and labels [N] with N > 0, got {tuple(logits.shape)} and {tuple(labels.shape)}")
    logits, labels = logits.detach().double(), labels.long()
    names = metric_names(logits.shape[1]) if names is None else names
    unknown = [n for n in names if n not in _METRICS or (n == "roc_auc" and logits.shape[1] != 2)]
    if unknown:
        raise ValueError(f"unknown metric(s) {unknown} for {logits.shape[1]} classes; available: {metric_names(logits.shape[1])}")
    probs = logits.softmax(1)
    return {name: float(_METRICS[name](logits, probs, labels)) for name in names}
