"""Metrics against hand-computed values."""
import math

import pytest
import torch

from zoo.engine.metrics import classification_metrics

PROBS = torch.tensor([[0.7, 0.2, 0.1], [0.1, 0.62, 0.28], [0.19, 0.19, 0.62], [0.5, 0.4, 0.1]], dtype=torch.float64)
LABELS = torch.tensor([0, 2, 2, 1])


def test_multiclass_metrics_match_hand_computation():
    got = classification_metrics(PROBS.log(), LABELS)
    assert set(got) == {"accuracy", "macro_f1", "nll", "brier", "ece"}
    assert got["accuracy"] == pytest.approx(0.5)
    # per class F1: 2/3 (TP 1, FP 1), 0 (TP 0), 2/3 (TP 1, FN 1)
    assert got["macro_f1"] == pytest.approx(4 / 9, abs=1e-6)
    assert got["nll"] == pytest.approx(-(math.log(0.7) + math.log(0.28) + math.log(0.62) + math.log(0.4)) / 4)
    assert got["brier"] == pytest.approx((0.14 + 0.9128 + 0.2166 + 0.62) / 4)
    # bins of width 1/15: {0.62, 0.62} acc 1/2, {0.7} acc 1, {0.5} acc 0
    assert got["ece"] == pytest.approx(0.5 * 0.12 + 0.25 * 0.3 + 0.25 * 0.5, abs=1e-6)


def test_binary_tasks_add_roc_auc():
    scores = torch.tensor([0.9, 0.8, 0.3, 0.6], dtype=torch.float64)
    logits = torch.stack([torch.zeros(4, dtype=torch.float64), torch.logit(scores)], 1)
    got = classification_metrics(logits, torch.tensor([1, 0, 0, 1]))
    assert got["roc_auc"] == pytest.approx(0.75)  # 3 of 4 positive/negative pairs ranked right


def test_subset_and_errors():
    assert list(classification_metrics(PROBS.log(), LABELS, ["accuracy"])) == ["accuracy"]
    with pytest.raises(ValueError, match="roc_auc"):
        classification_metrics(PROBS.log(), LABELS, ["roc_auc"])
    with pytest.raises(ValueError, match=r"\[N, C\]"):
        classification_metrics(PROBS.log(), LABELS[:2])
