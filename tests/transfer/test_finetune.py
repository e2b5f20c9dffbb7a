"""finetune(): run files, checkpoint and card, NaN-masked multi-task loss, input errors, freezing, from scratch."""
import json

import pytest
import torch

from tests.transfer.helpers import MODEL_ARGS, write_csv
from zoo.data import DatasetError, InvalidSmilesError
from zoo.engine.environment import git_commit
from zoo.engine.graph_trainer import masked_loss
from zoo.engine.reproducibility import seed_everything
from zoo.models import create_model
from zoo.models.pretrained import load_pretrained
from zoo.transfer import TransferError, finetune

FAST = {"epochs": 2, "progress": False}


def _encoder(state):
    return {k: v for k, v in state.items() if not k.startswith("head.")}


def test_finetune_writes_runs_checkpoints_and_summary(pretrained_path, regression_csv, tmp_path, capsys):
    out = tmp_path / "ft"
    summary = finetune(pretrained_path, regression_csv, target_cols=["y1", "y2"], seeds=(0, 1), out=out, **FAST)
    printed = capsys.readouterr().out
    assert printed.count("skipped 1 row(s) with invalid SMILES") == 1  # reported once, not per seed
    assert "row 30" in printed and "'C1CC'" in printed and "RDKit parse failure" in printed

    saved = json.loads((out / "metrics.json").read_text())
    assert saved == json.loads(json.dumps(summary))
    for seed in ("0", "1"):
        for part in ("val", "test"):
            assert {"rmse", "mae", "r2"} <= set(saved["per_seed"][seed][part])
    assert saved["summary"]["test"]["rmse"]["n"] == 2 and saved["summary"]["test"]["rmse"]["sd"] >= 0

    model = load_pretrained(out / "seed0" / "model.safetensors")
    card = model.card
    assert card["model_args"]["num_outputs"] == 2 and card["target_columns"] == ["y1", "y2"]
    assert card["task"] == "graph_regression" and card["metric"] == "rmse"
    assert card["dataset"]["path"] == str(regression_csv.resolve()) and len(card["dataset"]["sha256"]) == 64
    assert card["split"]["kind"] == "random" and card["split"]["sizes"]["train"] == 24
    parent = load_pretrained(pretrained_path).card
    assert card["parent"]["weights_sha256"] == parent["weights_sha256"] and card["parent"]["name"] == "tiny"
    assert card["metrics"]["test"] == saved["per_seed"]["0"]["test"] and "finetune(" in card["command"]
    assert card["recipe"]["optim"]["epochs"] == 2 and card["recipe"]["optim"]["patience"] == 2
    assert card["recipe"]["optim"]["warmup_epochs"] == 0  # 10 of 100 epochs, scaled to 2
    assert card["pe_spec"]["rwse_k"] == 4 and card["featurizer"]["name"] == "ogb-smiles2graph"
    assert card["git_commit"] == git_commit() and card["versions"]["torch"] == torch.__version__.split("+")[0]
    run = json.loads((out / "seed0" / "metrics.json").read_text())
    assert all(torch.isfinite(torch.tensor(row["train_loss"])) for row in run["curves"])  # NaN cells masked


def test_masked_multitask_loss_matches_a_hand_computation():
    prediction = torch.tensor([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])
    target = torch.tensor([[2.0, float("nan")], [0.5, 1.0], [float("nan"), float("nan")]])
    # labelled cells: |1-2|, |0.5-0.5|, |-1-1|
    assert float(masked_loss(prediction, target, "graph_regression")) == pytest.approx((1 + 0 + 2) / 3)
    labels = torch.tensor([[1.0, float("nan")], [0.0, 1.0], [float("nan"), float("nan")]])
    softplus = torch.nn.functional.softplus
    by_hand = (softplus(torch.tensor(-1.0)) + softplus(torch.tensor(0.5)) + softplus(torch.tensor(1.0))) / 3
    assert float(masked_loss(prediction, labels, "graph_classification")) == pytest.approx(float(by_hand))


def test_invalid_smiles_raise_in_strict_mode(pretrained_path, regression_csv, tmp_path):
    with pytest.raises(InvalidSmilesError, match=r"(?s)strict.*line 32 \(row 30\): 'C1CC'"):
        finetune(pretrained_path, regression_csv, target_cols="y1", strict=True, out=tmp_path / "ft", **FAST)


def test_input_errors_name_the_bad_value(pretrained_path, regression_csv, tmp_path):
    run = dict(out=tmp_path / "ft", **FAST)
    with pytest.raises(TransferError, match=r"not found\. Columns in the file: \['smiles', 'y1', 'y2'\]"):
        finetune(pretrained_path, regression_csv, target_cols=["pIC50"], **run)
    with pytest.raises(TransferError, match="target_cols is missing"):
        finetune(pretrained_path, regression_csv, **run)
    with pytest.raises(TransferError, match="task must be one of.*'ranking'"):
        finetune(pretrained_path, regression_csv, target_cols="y1", task="ranking", **run)
    with pytest.raises(TransferError, match="epochs must be an int >= 1, got 0"):
        finetune(pretrained_path, regression_csv, target_cols="y1", epochs=0, progress=False)
    with pytest.raises(TransferError, match=r"column 'y1' holds 0\.5.*task='regression'"):
        finetune(pretrained_path, regression_csv, target_cols="y1", task="classification", **run)


def test_one_valid_molecule_is_a_clear_error(pretrained_path, tmp_path):
    csv = write_csv(tmp_path / "one.csv", ["smiles", "y"], [["CCO", 1.0], ["C1CC", 2.0]])
    with pytest.raises(DatasetError, match=r"1 usable molecule\(s\).*at least 2 are needed"):
        finetune(pretrained_path, csv, target_cols="y", out=tmp_path / "ft", **FAST)
    few = write_csv(tmp_path / "few.csv", ["smiles", "y"], [["CCO", 1.0], ["CC", 2.0], ["CCC", 3.0]])
    with pytest.raises(DatasetError, match=r"val split has 1 of 3 usable molecule\(s\).*cannot give r2.*larger CSV"):
        finetune(pretrained_path, few, target_cols="y", out=tmp_path / "ft", **FAST)


def test_freeze_encoder_trains_only_the_head(pretrained_path, regression_csv, tmp_path):
    finetune(pretrained_path, regression_csv, target_cols="y1", freeze_encoder=True, out=tmp_path / "ft", **FAST)
    start = load_pretrained(pretrained_path).state_dict()
    tuned = load_pretrained(tmp_path / "ft" / "seed0" / "model.safetensors")
    assert tuned.card["freeze_encoder"] is True
    after = tuned.state_dict()
    for key, value in _encoder(start).items():  # weights and BatchNorm statistics
        assert torch.equal(value, after[key]), key
    assert not torch.equal(start["head.0.weight"], after["head.0.weight"])


def test_from_scratch_starts_from_a_fresh_seeded_model(pretrained_path, regression_csv, tmp_path):
    seed_everything(3)
    fresh = _encoder(create_model("siggate_gt", **MODEL_ARGS).state_dict())
    pretrained = _encoder(load_pretrained(pretrained_path).state_dict())
    # with no epochs of training the saved model is the start model (lr 0 leaves it untouched)
    finetune(pretrained_path, regression_csv, target_cols="y1", from_scratch=True, seeds=3, lr=1e-30,
             out=tmp_path / "ft", **FAST)
    tuned = load_pretrained(tmp_path / "ft" / "seed3" / "model.safetensors")
    assert tuned.card["parent"] == "from scratch"
    after = _encoder(tuned.state_dict())
    weights = [k for k in fresh if "running" not in k and "num_batches" not in k]  # BatchNorm stats move in training
    assert all(torch.allclose(fresh[k], after[k], atol=1e-20) for k in weights)
    assert not all(torch.equal(pretrained[k], after[k]) for k in weights)
    with pytest.raises(TransferError, match="drop one of them"):
        finetune(pretrained_path, regression_csv, target_cols="y1", from_scratch=True, freeze_encoder=True,
                 out=tmp_path / "bad", **FAST)


def test_classification_reports_roc_auc_and_ap(pretrained_path, classification_csv, tmp_path):
    summary = finetune(pretrained_path, classification_csv, target_cols=["active"], task="classification",
                       out=tmp_path / "ft", **FAST)
    assert {"roc_auc", "ap"} <= set(summary["per_seed"]["0"]["test"])
    assert load_pretrained(tmp_path / "ft" / "seed0" / "model.safetensors").card["task"] == "graph_classification"
