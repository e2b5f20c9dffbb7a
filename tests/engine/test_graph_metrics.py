"""Graph metrics against the OGB Evaluator (ogbg-molhiv: ROC-AUC, ogbg-molpcba: AP)."""
import numpy as np
import pytest
import torch
from ogb.graphproppred import Evaluator

from zoo.engine.graph_metrics import METRIC_MODES, average_precision, graph_metric, mae, roc_auc


def _random_labels(rng, n, tasks, nan_frac=0.3, ties=False):
    y = (rng.random((n, tasks)) < 0.3).astype(float)
    y[rng.random((n, tasks)) < nan_frac] = np.nan
    score = rng.normal(size=(n, tasks))
    if ties:
        score = np.round(score, 1)
    return y, score


@pytest.mark.parametrize("seed", range(5))
@pytest.mark.parametrize("ties", [False, True])
def test_roc_auc_matches_ogb_molhiv(seed, ties):
    rng = np.random.default_rng(seed)
    y, score = _random_labels(rng, 200, 1, ties=ties)
    expected = Evaluator("ogbg-molhiv").eval({"y_true": y, "y_pred": score})["rocauc"]
    assert roc_auc(y, score) == pytest.approx(expected, abs=1e-12)
    assert roc_auc(torch.tensor(y), torch.tensor(score)) == pytest.approx(expected, abs=1e-12)


@pytest.mark.parametrize("seed", range(3))
@pytest.mark.parametrize("ties", [False, True])
def test_ap_matches_ogb_molpcba(seed, ties):
    rng = np.random.default_rng(seed)
    y, score = _random_labels(rng, 150, 128, nan_frac=0.5, ties=ties)
    y[:, 3] = np.where(np.isnan(y[:, 3]), np.nan, 0.0)  # one class only: skipped
    y[:, 7] = np.nan  # no labels: skipped
    expected = Evaluator("ogbg-molpcba").eval({"y_true": y, "y_pred": score})["ap"]
    assert average_precision(y, score) == pytest.approx(expected, abs=1e-12)


def test_multitask_roc_auc_skips_one_class_tasks():
    y = np.array([[0, 1], [1, 1], [np.nan, 1], [1, np.nan]], dtype=float)
    score = np.array([[0.1, 0.3], [0.9, 0.2], [0.5, 0.1], [0.2, 0.0]])
    assert roc_auc(y, score) == 1.0  # task 1 is all positive, so only task 0 counts


def test_undefined_metrics_raise():
    with pytest.raises(ValueError, match="no task has both"):
        roc_auc([[1.0], [1.0]], [[0.2], [0.3]])
    with pytest.raises(ValueError, match="0/1 labels"):
        average_precision([[0.0], [2.0]], [[0.2], [0.3]])
    with pytest.raises(ValueError, match="same shape"):
        mae(torch.zeros(3, 2), torch.zeros(3))
    with pytest.raises(ValueError, match="all are NaN"):
        mae([float("nan")], [1.0])
    with pytest.raises(ValueError, match="unknown graph metric 'rsme'"):
        graph_metric("rsme", [0.0], [0.0])


def test_mae_ignores_nan_targets():
    y = torch.tensor([[1.0, float("nan")], [3.0, 4.0]])
    pred = torch.tensor([[2.0, 100.0], [3.0, 2.0]])
    assert mae(y, pred) == pytest.approx(1.0)
    assert graph_metric("mae", y, pred) == mae(y, pred)
    assert METRIC_MODES == {"mae": "min", "rmse": "min", "r2": "max", "roc_auc": "max", "ap": "max"}


def test_rmse_and_r2_match_sklearn_on_labelled_entries():
    from sklearn.metrics import mean_squared_error, r2_score

    gen = np.random.default_rng(3)
    truth, pred = gen.normal(size=(40, 2)), gen.normal(size=(40, 2))
    truth[[1, 7, 20], 0] = np.nan
    keep0, keep1 = ~np.isnan(truth[:, 0]), ~np.isnan(truth[:, 1])
    squared = np.concatenate([(truth[keep0, 0] - pred[keep0, 0]) ** 2, (truth[keep1, 1] - pred[keep1, 1]) ** 2])
    assert graph_metric("rmse", truth, pred) == pytest.approx(np.sqrt(squared.mean()), abs=1e-12)
    assert graph_metric("rmse", truth[keep0, 0], pred[keep0, 0]) == pytest.approx(
        np.sqrt(mean_squared_error(truth[keep0, 0], pred[keep0, 0])), abs=1e-12)
    expected = np.mean([r2_score(truth[keep0, 0], pred[keep0, 0]), r2_score(truth[:, 1], pred[:, 1])])
    assert graph_metric("r2", truth, pred) == pytest.approx(expected, abs=1e-12)


def test_r2_without_variance_is_an_error():
    with pytest.raises(ValueError, match="R2 needs"):
        graph_metric("r2", [1.0, 1.0, 1.0], [0.0, 1.0, 2.0])
