"""zoo.analysis.figures.calibration: reliability bins by hand and the ECE against torchmetrics."""
import numpy as np
import pytest
import torch
from torchmetrics.functional.classification import multiclass_calibration_error

from zoo.analysis.figures.calibration import expected_calibration_error, reliability_bins


def test_bins_by_hand():
    probs = [[0.95, 0.05], [0.15, 0.85], [0.55, 0.45], [0.35, 0.65], [0.9, 0.1]]
    labels = [0, 0, 0, 1, 1]
    bins = reliability_bins(probs, labels, n_bins=4)  # edges 0, .25, .5, .75, 1
    assert bins["count"].tolist() == [0, 0, 2, 3]
    # (0.5, 0.75]: 0.55 right, 0.65 right; (0.75, 1]: 0.95 right, 0.85 wrong, 0.9 wrong
    assert bins.confidence[2] == pytest.approx(0.6) and bins.accuracy[2] == pytest.approx(1.0)
    assert bins.confidence[3] == pytest.approx(0.9) and bins.accuracy[3] == pytest.approx(1 / 3)
    assert np.isnan(bins.accuracy[0])
    # ECE = 2/5 * |1 - 0.6| + 3/5 * |1/3 - 0.9| = 0.16 + 0.34
    assert expected_calibration_error(bins) == pytest.approx(0.5)


def test_a_confidence_on_an_edge_falls_in_the_lower_bin():
    bins = reliability_bins([[0.5, 0.5], [0.75, 0.25]], [0, 0], n_bins=4)
    assert bins["count"].tolist() == [0, 1, 1, 0]  # 0.5 in (0.25, 0.5], 0.75 in (0.5, 0.75]


def test_ece_is_torchmetrics_l1_calibration_error():
    generator = torch.Generator().manual_seed(0)
    logits = torch.randn(500, 5, generator=generator, dtype=torch.float64) * 2
    labels = torch.randint(0, 5, (500,), generator=generator)
    probs = logits.softmax(1)
    ours = expected_calibration_error(reliability_bins(probs.numpy(), labels.numpy()))
    theirs = float(multiclass_calibration_error(probs, labels, 5, n_bins=15, norm="l1"))
    assert ours == pytest.approx(theirs, rel=1e-6)  # torchmetrics bins in float32


def test_bad_shapes_are_refused():
    with pytest.raises(ValueError, match=r"need probabilities \[N, C\] and labels \[N\]"):
        reliability_bins([0.2, 0.8], [1])
