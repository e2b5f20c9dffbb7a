"""Reliability diagram numbers (the LTGA paper's Figure 3): per confidence bin, how often the
predicted class is right against how confident the model was.

Bins are ``n_bins`` equal widths of [0, 1], right-closed as torchmetrics' ``calibration_error``
(a confidence of exactly 0 falls in the first); the ECE of the bins is that metric's ``l1`` norm,
the ``ece`` every run's metrics.json holds (15 bins).
"""
from __future__ import annotations

import numpy as np
import pandas as pd

ECE_BINS = 15
"""Bins of the runs' recorded ECE (zoo.engine.metrics), used by the figure too."""


def reliability_bins(probs, labels, n_bins: int = ECE_BINS) -> pd.DataFrame:
    """One row per bin: ``lower``, ``upper`` (edges), ``count`` (predictions), ``confidence`` (mean
    top-class probability) and ``accuracy`` (share predicted right); NaN means in empty bins.

    >>> bins = reliability_bins([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]], [0, 0, 0], n_bins=2)
    >>> bins[["count", "confidence", "accuracy"]].round(4).to_numpy().tolist()
    [[0.0, nan, nan], [3.0, 0.7333, 0.6667]]
    """
    probs, labels = np.asarray(probs, dtype=float), np.asarray(labels)
    if probs.ndim != 2 or labels.shape != probs.shape[:1]:
        raise ValueError(f"need probabilities [N, C] and labels [N], got {probs.shape} and {labels.shape}")
    if n_bins < 1:
        raise ValueError(f"n_bins must be >= 1, got {n_bins}")
    confidence, correct = probs.max(1), (probs.argmax(1) == labels).astype(float)
    edges = np.linspace(0.0, 1.0, n_bins + 1)
    index = np.clip(np.searchsorted(edges, confidence, side="left") - 1, 0, n_bins - 1)
    count = np.bincount(index, minlength=n_bins).astype(float)
    with np.errstate(invalid="ignore", divide="ignore"):
        mean_confidence = np.bincount(index, confidence, n_bins) / count
        accuracy = np.bincount(index, correct, n_bins) / count
    return pd.DataFrame({"lower": edges[:-1], "upper": edges[1:], "count": count,
                         "confidence": mean_confidence, "accuracy": accuracy})


def expected_calibration_error(bins: pd.DataFrame) -> float:
    """``sum_b n_b / N |accuracy_b - confidence_b|`` over the non-empty bins of :func:`reliability_bins`.

    >>> round(expected_calibration_error(reliability_bins([[0.9, 0.1], [0.3, 0.7], [0.6, 0.4]], [0, 0, 0], 2)), 4)
    0.0667
    """
    full = bins[bins["count"] > 0]
    return float((full["count"] * (full.accuracy - full.confidence).abs()).sum() / full["count"].sum())
