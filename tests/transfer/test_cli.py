"""tools/finetune.py and tools/predict.py: a short run, the prediction CSV, exit codes."""
import csv
import math
import importlib.util
from pathlib import Path

import pytest
import torch

from zoo.models.pretrained import load_pretrained, save_pretrained
from zoo.transfer import predict

ROOT = Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(f"{name}_cli", ROOT / "tools" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


finetune_cli, predict_cli = _load("finetune"), _load("predict")


def test_finetune_then_predict(pretrained_path, regression_csv, tmp_path, capsys):
    out = tmp_path / "ft"
    args = ["--pretrained", str(pretrained_path), "--data", str(regression_csv), "--target-cols", "y1,y2",
            "--epochs", "2", "--seeds", "0", "--batch-size", "16", "--out", str(out), "--quiet"]
    assert finetune_cli.main(args) == 0
    printed = capsys.readouterr().out
    assert "mean +- sd over 1 seed(s)" in printed and "rmse" in printed and "   0  test" in printed

    new = tmp_path / "new.csv"
    new.write_text("id,smiles\na,CCO\nb,C1CC\n\nc,c1ccccc1\n")
    preds = tmp_path / "preds.csv"
    assert predict_cli.main(["--model", str(out / "seed0" / "model.safetensors"), "--data", str(new),
                             "--out", str(preds), "--quiet"]) == 0
    assert "line 3 (row 1): 'C1CC'" in capsys.readouterr().err
    rows = list(csv.DictReader(preds.open()))
    assert [row["id"] for row in rows] == ["a", "b", "c"]
    assert set(rows[0]) == {"id", "smiles", "pred_y1", "pred_y2"}
    assert rows[1]["pred_y1"] == "" and not math.isnan(float(rows[2]["pred_y2"]))
    direct = predict(load_pretrained(out / "seed0" / "model.safetensors"), ["CCO", "c1ccccc1"], progress=False).values
    written = [[float(rows[i][f"pred_{t}"]) for t in ("y1", "y2")] for i in (0, 2)]
    assert sum(written, []) == pytest.approx(direct.ravel().tolist(), abs=1e-6)  # each row gets its own molecule's prediction
    assert predict_cli.main(["--model", str(out / "seed0" / "model.safetensors"), "--data", str(new),
                             "--out", str(preds), "--strict", "--quiet"]) == 1


def test_rows_without_a_finite_prediction_are_left_empty_and_named(pretrained_path, tmp_path, capsys):
    model = load_pretrained(pretrained_path)
    with torch.no_grad():  # nitrogen's atom embedding (atomic number 7 - 1): molecules with an N overflow
        model.node_encoder.atom.atom_embedding_list[0].weight[6] = float("inf")
    poisoned = save_pretrained(model, model.card, tmp_path / "poisoned.safetensors")
    data = tmp_path / "new.csv"
    data.write_text("id,smiles\na,CCO\n\nb,CCN\nc,c1ccccc1\n")
    assert predict_cli.main(["--model", str(poisoned), "--data", str(data), "--out", str(tmp_path / "p.csv"),
                             "--quiet"]) == 0
    assert "1 row(s) got no finite prediction (left empty):\n  line 4 (row 1): 'CCN': the model's prediction is not " \
           "finite" in capsys.readouterr().err
    rows = list(csv.DictReader((tmp_path / "p.csv").open()))
    assert [row["pred_logp"] == "" for row in rows] == [False, True, False]


def test_bad_arguments_exit_2(pretrained_path, regression_csv, tmp_path, capsys):
    base = ["--data", str(regression_csv), "--epochs", "2", "--out", str(tmp_path / "ft"), "--quiet"]
    assert finetune_cli.main(["--pretrained", str(pretrained_path), "--target-cols", "pIC50", *base]) == 2
    assert "Columns in the file: ['smiles', 'y1', 'y2']" in capsys.readouterr().err
    assert finetune_cli.main(["--pretrained", "no_such_model", "--target-cols", "y1", *base]) == 2
    assert "no pretrained model named 'no_such_model'" in capsys.readouterr().err
    missing = tmp_path / "missing.csv"
    assert finetune_cli.main(["--pretrained", str(pretrained_path), "--target-cols", "y1", "--data", str(missing),
                              "--out", str(tmp_path / "ft"), "--quiet"]) == 2
    assert predict_cli.main(["--model", str(pretrained_path), "--data", str(regression_csv), "--smiles-col", "SMILES",
                             "--out", str(tmp_path / "p.csv")]) == 2
    assert "Columns in the file: ['smiles', 'y1', 'y2']" in capsys.readouterr().err


def test_a_diverging_finetune_exits_3_naming_the_place_and_lr(pretrained_path, regression_csv, tmp_path, capsys):
    """--lr 1e30: AdamW's first step moves every weight by about 1e30, so the next batch overflows to NaN."""
    args = ["--pretrained", str(pretrained_path), "--data", str(regression_csv), "--target-cols", "y1,y2",
            "--epochs", "2", "--seeds", "0", "--batch-size", "8", "--lr", "1e30", "--out", str(tmp_path / "ft"),
            "--quiet"]
    assert finetune_cli.main(args) == 3
    err = capsys.readouterr().err
    assert "Traceback" not in err and "error: training diverged: the training loss is nan at epoch 0, batch 2" in err
    assert "--lr with tools/finetune.py" in err
