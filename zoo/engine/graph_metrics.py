"""Graph-level metrics: MAE, RMSE, R2, and ROC-AUC / average precision with the OGB Evaluator's semantics.

Inputs are ``[n]`` or ``[n, T]`` tensors or arrays. Missing labels are NaN and are ignored.
ROC-AUC and AP are computed per task (column) on the labelled rows, tasks whose labelled rows
hold only one class are skipped, and the result is the mean over the remaining tasks, exactly
as ``ogb.graphproppred.Evaluator`` does for ogbg-molhiv (rocauc) and ogbg-molpcba (ap).
Scores may be logits or probabilities: both metrics depend only on their order.

>>> y = [[0.0], [1.0], [float("nan")], [1.0]]
>>> roc_auc(y, [[0.1], [0.8], [0.5], [0.3]]), average_precision(y, [[0.1], [0.8], [0.5], [0.3]])
(1.0, 1.0)
>>> mae([1.0, 2.0], [1.5, 2.0])
0.25
"""
from __future__ import annotations

import numpy as np
import torch
from scipy.stats import rankdata

METRIC_MODES = {"mae": "min", "rmse": "min", "r2": "max", "roc_auc": "max", "ap": "max"}
"""Whether a larger value of each metric is better (``max``) or worse (``min``)."""


def mae(y_true, y_pred) -> float:
    """Mean absolute error over all labelled (non-NaN) entries."""
    y_true, y_pred = _pair(y_true, y_pred)
    labelled = ~np.isnan(y_true)
    if not labelled.any():
        raise ValueError("MAE needs at least one non-NaN target; all are NaN")
    return float(np.abs(y_pred[labelled] - y_true[labelled]).mean())


def rmse(y_true, y_pred) -> float:
    """Root mean squared error over all labelled (non-NaN) entries.

    >>> rmse([0.0, 0.0], [3.0, 4.0])  # sqrt((9 + 16) / 2)
    3.5355339059327378
    """
    y_true, y_pred = _pair(y_true, y_pred)
    labelled = ~np.isnan(y_true)
    if not labelled.any():
        raise ValueError("RMSE needs at least one non-NaN target; all are NaN")
    return float(np.sqrt(((y_pred[labelled] - y_true[labelled]) ** 2).mean()))


def r2(y_true, y_pred) -> float:
    """Coefficient of determination 1 - SS_res / SS_tot per task on its labelled rows, mean over tasks.

    >>> r2([1.0, 2.0, 3.0], [1.0, 2.0, 4.0])  # 1 - 1 / 2
    0.5
    """
    y_true, y_pred = _pair(y_true, y_pred)
    scores = []
    for t in range(y_true.shape[1]):
        labelled = ~np.isnan(y_true[:, t])
        truth, pred = y_true[labelled, t], y_pred[labelled, t]
        total = ((truth - truth.mean()) ** 2).sum()
        if labelled.sum() >= 2 and total > 0:
            scores.append(1.0 - ((truth - pred) ** 2).sum() / total)
    if not scores:
        raise ValueError("R2 needs a task with at least two labelled rows that are not all equal")
    return float(np.mean(scores))


def roc_auc(y_true, y_score) -> float:
    """Mean over tasks of the ROC-AUC (ties count one half), OGB semantics (module doc)."""
    return _per_task_mean(y_true, y_score, _binary_roc_auc, "ROC-AUC")


def average_precision(y_true, y_score) -> float:
    """Mean over tasks of the average precision (step-wise, no interpolation), OGB semantics."""
    return _per_task_mean(y_true, y_score, _binary_ap, "AP")


_METRICS = {"mae": mae, "rmse": rmse, "r2": r2, "roc_auc": roc_auc, "ap": average_precision}


def graph_metric(name: str, y_true, y_pred) -> float:
    """Compute a metric by name: ``mae``, ``rmse``, ``r2``, ``roc_auc`` or ``ap``.

    >>> graph_metric("mae", [0.0, 1.0], [1.0, 1.0])
    0.5
    """
    if name not in _METRICS:
        raise ValueError(f"unknown graph metric {name!r}; available: {sorted(_METRICS)}")
    return _METRICS[name](y_true, y_pred)


def _as_numpy(x) -> np.ndarray:
    """float64 numpy copy of a tensor, array or nested list."""
    if isinstance(x, torch.Tensor):
        x = x.detach().cpu().double().numpy()
    return np.asarray(x, dtype=np.float64)


def _pair(y_true, y_pred) -> tuple[np.ndarray, np.ndarray]:
    """Both as float64 ``[n, T]`` with equal shapes."""
    y_true, y_pred = _as_numpy(y_true), _as_numpy(y_pred)
    if y_true.ndim == 1:
        y_true = y_true[:, None]
    if y_pred.ndim == 1:
        y_pred = y_pred[:, None]
    if y_true.shape != y_pred.shape or y_true.ndim != 2:
        raise ValueError(
            f"targets and predictions must have the same shape [n] or [n, T]; got "
            f"{y_true.shape} and {y_pred.shape}"
        )
    if np.isnan(y_pred).any():
        raise ValueError("predictions contain NaN; only targets may be NaN (missing labels)")
    return y_true, y_pred


def _per_task_mean(y_true, y_score, fn, label: str) -> float:
    """Apply ``fn(labels, scores)`` to each task with both classes labelled; average."""
    y_true, y_score = _pair(y_true, y_score)
    values = []
    for t in range(y_true.shape[1]):
        labelled = ~np.isnan(y_true[:, t])
        labels, scores = y_true[labelled, t], y_score[labelled, t]
        bad = ~np.isin(labels, (0.0, 1.0))
        if bad.any():
            raise ValueError(f"{label} needs 0/1 labels; task {t} has {np.unique(labels[bad])[:5]}")
        if labels.any() and not labels.all():
            values.append(fn(labels, scores))
    if not values:
        raise ValueError(
            f"{label} is undefined: no task has both a positive and a negative labelled example"
        )
    return float(np.mean(values))


def _binary_roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Mann-Whitney form of the ROC-AUC with average ranks for ties."""
    ranks = rankdata(scores)
    pos = labels == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def _binary_ap(labels: np.ndarray, scores: np.ndarray) -> float:
    """Sum over distinct thresholds (descending) of recall increase x precision at that threshold."""
    order = np.argsort(-scores, kind="stable")
    scores, labels = scores[order], labels[order]
    last = np.r_[np.nonzero(np.diff(scores))[0], len(scores) - 1]  # end of each tie block
    tp = np.cumsum(labels)[last]
    precision = tp / (last + 1)
    recall_gain = np.diff(np.r_[0.0, tp]) / tp[-1]
    return float(np.sum(recall_gain * precision))
