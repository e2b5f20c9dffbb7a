"""The transfer table: per-seed RMSEs come from the runs it made, the forest from the same split."""
import numpy as np
import pytest
from sklearn.ensemble import RandomForestRegressor

from zoo.baselines import morgan_fingerprints
from zoo.data import load_csv_dataset
from zoo.models.pretrained import load_pretrained
from zoo.transfer import transfer_table as tt


@pytest.fixture
def toy_card(monkeypatch, regression_csv):
    card = {"source": {"smiles_column": "smiles", "target_columns": ["y1"]}}
    monkeypatch.setattr(tt, "load_card", lambda name: card)
    monkeypatch.setattr(tt, "csv_card_file", lambda name: regression_csv)
    return regression_csv


def test_rows_hold_the_runs_metrics_and_a_forest_on_the_same_split(toy_card, pretrained_path, tmp_path):
    rows = tt.transfer_table(str(pretrained_path), ["toy"], seeds=[0, 1, 2], epochs=1, out=tmp_path / "t",
                             progress=False)
    (row,) = rows
    for method in ("finetuned", "scratch"):
        for k, seed in enumerate([0, 1, 2]):
            card = load_pretrained(tmp_path / "t" / "toy" / method / f"seed{seed}" / "model.safetensors").card
            assert row["test_rmse"][method][k] == pytest.approx(card["metrics"]["test"]["rmse"])
    data = load_csv_dataset(toy_card, "smiles", ["y1"], split="random", seed=1, progress=False)
    train, test = data.split["train"].tolist(), data.split["test"].tolist()
    x = morgan_fingerprints(data.smiles)
    forest = RandomForestRegressor(n_estimators=500, random_state=1).fit(x[train], data.targets[train, 0].numpy())
    expected = np.sqrt(((forest.predict(x[test]) - data.targets[test, 0].numpy()) ** 2).mean())
    assert row["test_rmse"]["morgan_rf"][1] == pytest.approx(expected, rel=1e-6)
    assert row["finetuned_vs_scratch"]["n"] == 3 and (tmp_path / "t" / "transfer_table.json").is_file()


def test_markdown_bolds_the_lowest_mean():
    row = {"dataset": "esol", "seeds": [0, 1], "epochs": 5,
           "test_rmse": {"finetuned": [1.0, 1.2], "scratch": [1.5, 1.7], "morgan_rf": [1.1, 1.3]},
           "finetuned_vs_scratch": {"mean_diff": -0.5, "test": "wilcoxon", "p_value": 0.5}}
    text = tt.format_transfer_table([row])
    assert "| esol | **1.100 ± 0.141** | 1.600 ± 0.141 | 1.200 ± 0.141 | -0.500 (wilcoxon, p = 0.5) |" in text


def test_one_seed_is_refused_before_any_training(toy_card, pretrained_path, tmp_path):
    with pytest.raises(tt.TransferError, match="at least 2 distinct seeds"):
        tt.transfer_table(str(pretrained_path), ["toy"], seeds=[0, 0], epochs=1, out=tmp_path / "t", progress=False)
    assert not (tmp_path / "t").exists()


def test_a_rerun_reuses_finished_network_runs(toy_card, pretrained_path, tmp_path, capsys):
    first = tt.transfer_table(str(pretrained_path), ["toy"], seeds=[0, 1], epochs=1, out=tmp_path / "t", progress=False)
    model_file = tmp_path / "t" / "toy" / "scratch" / "seed1" / "model.safetensors"
    stamp = model_file.stat().st_mtime_ns
    again = tt.transfer_table(str(pretrained_path), ["toy"], seeds=[0, 1], epochs=1, out=tmp_path / "t", progress=False)
    assert again[0]["test_rmse"] == first[0]["test_rmse"] and model_file.stat().st_mtime_ns == stamp
    assert capsys.readouterr().out.count("reusing the finished runs") == 2
    tt.transfer_table(str(pretrained_path), ["toy"], seeds=[0, 1], epochs=2, out=tmp_path / "t", progress=False)
    assert model_file.stat().st_mtime_ns != stamp  # other epochs: trained again
