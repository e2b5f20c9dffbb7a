"""Pretrained checkpoints: save/load round trip, integrity and featurizer checks, export of a real run."""
import csv
import hashlib
import importlib.util
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch

import zoo
from zoo.data import FEATURIZER_SPEC, load_csv_dataset
from zoo.engine import experiment
from zoo.engine.recipe import build_recipe
from zoo.models import create_model, list_models
from zoo.models.benchmark import random_molecules
from zoo.pretrained import (
    FORMAT,
    PretrainedError,
    export_run,
    load_pretrained,
    pretrained_names,
    save_pretrained,
    weights_sha256,
)

ROOT = Path(__file__).resolve().parents[1]
ARGS = dict(num_outputs=1, dim=16, heads=2, layers=1, pe="rwse", rwse_k=20, dim_pe=4)  # random_molecules has 20 rwse columns
SMILES = ["CCO", "CCN", "CCC", "CCCC", "CCCO", "c1ccccc1", "c1ccccc1O", "c1ccccc1N", "c1ccncc1", "C1CCCCC1",
          "C1CCCCC1O", "CC(C)O", "CC(=O)O", "CC(=O)N", "CCOC", "COC", "CNC", "C1CC1", "C1CCC1", "c1ccoc1",
          "c1ccsc1", "OCCO", "NCCN", "CC#N"]


def _tiny(seed=0):
    torch.manual_seed(seed)
    return create_model("siggate_gt", **ARGS)


def _card(**extra):
    return {"architecture": "siggate_gt", "model_args": dict(ARGS), **extra}


@pytest.fixture(scope="module")
def finished_run(tmp_path_factory):
    """A real run folder from zoo.engine.run_recipe: 2 epochs on 24 SMILES with two targets.

    The recipe names the zinc_smiles card (for its dataset card and featurizer); the loader is
    patched to return the toy CSV instead of featurizing 12000 molecules.
    """
    tmp = tmp_path_factory.mktemp("run")
    with open(tmp / "toy.csv", "w", newline="") as f:
        csv.writer(f).writerows([["smiles", "a", "b"]] + [[s, len(s), i % 3] for i, s in enumerate(SMILES)])
    data = load_csv_dataset(tmp / "toy.csv", "smiles", ["a", "b"], split="random", cache_root=tmp, progress=False)
    recipe = build_recipe({"dataset": "zinc_smiles", "name": "toy", "task": "graph_regression",
                           "model": {"name": "siggate_gt", "dim": 16, "heads": 2, "layers": 1, "local": "gine",
                                     "pe": "rwse", "rwse_k": 4, "dim_pe": 4},
                           "optim": {"epochs": 2, "batch_size": 8}})
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(experiment, "load_graph_dataset", lambda name, progress: data)
        experiment.run_recipe(recipe, tmp / "runs", progress=False)
    return experiment.run_folder(recipe, tmp / "runs") / "seed0"


def test_round_trip_by_path_and_by_name(tmp_path):
    model = _tiny()
    path = save_pretrained(model, _card(name="tiny"), tmp_path / "tiny.pt")
    batch = random_molecules(3)
    model.eval()
    with torch.no_grad():
        expected = model(batch)
        for loaded in (load_pretrained(path), load_pretrained("tiny", directory=tmp_path)):
            assert not loaded.training and torch.equal(loaded(batch), expected)
            assert loaded.card["name"] == "tiny" and loaded.card["model_args"] == ARGS
            assert loaded.card["weights_sha256"] == weights_sha256(model.state_dict())
            assert loaded.card["num_parameters"] == sum(p.numel() for p in model.parameters())
    assert zoo.load_pretrained is load_pretrained and zoo.save_pretrained is save_pretrained


def test_weights_sha256_matches_a_hand_computed_digest():
    a = torch.tensor([[1, 2], [3, 4]], dtype=torch.int64)
    b = torch.tensor([0.5, -2.0], dtype=torch.float32)
    reference = hashlib.sha256(
        b"a\0torch.int64\0" + b"2,2\0" + np.array([1, 2, 3, 4], dtype=np.int64).tobytes()
        + b"b\0torch.float32\0" + b"2\0" + np.array([0.5, -2.0], dtype=np.float32).tobytes()
    ).hexdigest()
    assert weights_sha256({"b": b, "a": a}) == reference  # keys sorted, not insertion order
    # a transposed (non-contiguous) tensor hashes as its contiguous copy, not as its storage
    assert weights_sha256({"a": a.t()}) == weights_sha256({"a": a.t().contiguous()}) != weights_sha256({"a": a})


def test_a_tampered_weight_is_refused(tmp_path):
    path = save_pretrained(_tiny(), _card(), tmp_path / "m.pt")
    payload = torch.load(path)
    key = next(iter(payload["state_dict"]))
    payload["state_dict"][key] = payload["state_dict"][key] + 1e-3
    torch.save(payload, path)
    with pytest.raises(PretrainedError, match="do not match their recorded sha256"):
        load_pretrained(path)


def test_a_different_featurizer_is_refused(tmp_path):
    other = dict(FEATURIZER_SPEC, atom_feature_dims=[*FEATURIZER_SPEC["atom_feature_dims"][:-1], 99])
    path = save_pretrained(_tiny(), _card(featurizer=other), tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="atom_feature_dims"):
        load_pretrained(path)
    assert load_pretrained(path, check_featurizer=False).card["featurizer"] == other
    same = save_pretrained(_tiny(), _card(featurizer=dict(FEATURIZER_SPEC, ogb_version="0.0")), tmp_path / "s.pt")
    load_pretrained(same)  # versions are informational


def test_unknown_names_missing_files_and_foreign_files(tmp_path):
    save_pretrained(_tiny(), _card(), tmp_path / "zinc_siggate.pt")
    with pytest.raises(PretrainedError, match="Did you mean 'zinc_siggate'"):
        load_pretrained("zinc_sigate", directory=tmp_path)
    with pytest.raises(PretrainedError, match="no pretrained checkpoint file"):
        load_pretrained(tmp_path / "absent.pt")
    torch.save({"model": _tiny().state_dict(), "epoch": 3}, tmp_path / "best.pt")
    with pytest.raises(PretrainedError, match=f"not a zoo pretrained checkpoint.*expected '{FORMAT}'"):
        load_pretrained(tmp_path / "best.pt")
    (tmp_path / "text.pt").write_text("not a torch file")
    with pytest.raises(PretrainedError, match="not a readable zoo pretrained checkpoint"):
        load_pretrained(tmp_path / "text.pt")


def test_save_pretrained_checks_the_card(tmp_path):
    with pytest.raises(PretrainedError, match=r"lacks \['model_args'\]"):
        save_pretrained(_tiny(), {"architecture": "siggate_gt"}, tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="does not rebuild this model"):
        save_pretrained(_tiny(), _card(model_args=dict(ARGS, dim=32)), tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="not registered"):
        save_pretrained(_tiny(), _card(architecture="siggate"), tmp_path / "m.pt")
    with pytest.raises(PretrainedError, match="plain JSON"):
        save_pretrained(_tiny(), _card(path=tmp_path), tmp_path / "m.pt")
    assert not (tmp_path / "m.pt").exists()


def test_list_models_pretrained(tmp_path):
    assert list_models(pretrained=True) == pretrained_names()
    assert "siggate_gt" in list_models() and "siggate_gt" not in list_models(pretrained=True)
    for name in ("b_model", "a_model"):
        save_pretrained(_tiny(), _card(), tmp_path / f"{name}.pt")
    (tmp_path / "notes.md").write_text("not a checkpoint")
    assert pretrained_names(tmp_path) == ["a_model", "b_model"]


def test_export_run_writes_a_loadable_card(finished_run, tmp_path):
    path = export_run(finished_run, "toy_model", "python tools/train.py toy.yaml", directory=tmp_path)
    assert path == tmp_path / "toy_model.pt"
    model = load_pretrained("toy_model", directory=tmp_path)
    card, metrics = model.card, json.loads((finished_run / "metrics.json").read_text())
    environment = json.loads((finished_run / "environment.json").read_text())
    assert card["architecture"] == "siggate_gt" and card["model_args"]["num_outputs"] == 2  # two target columns
    assert card["model_args"]["dim"] == 16 and "name" not in card["model_args"]
    assert card["metrics"] == {"val": metrics["final"]["val"], "test": metrics["final"]["test"]}
    assert card["best_epoch"] == metrics["best_epoch"] and card["metric"] == "mae"
    assert card["featurizer"] == FEATURIZER_SPEC and card["pe_spec"] == {"rwse_k": 4}
    assert card["dataset"]["name"] == "zinc_smiles" and card["target_columns"] == []
    assert card["split"]["split_source"] == metrics["split_source"]
    assert card["split"]["sizes"] == metrics["split_sizes"]  # the run's, not the zinc_smiles card's 10000/1000/1000
    assert sum(card["split"]["sizes"].values()) == len(SMILES) and "sizes_from" not in card["split"]
    assert card["recipe"]["optim"]["epochs"] == 2 and card["task"] == "graph_regression"
    assert card["command"] == "python tools/train.py toy.yaml" and card["git_commit"] == environment["git_commit"]
    assert card["zoo_version"] == zoo.__version__ and card["versions"]["torch"] == torch.__version__.split("+")[0]
    best = torch.load(finished_run / "best.pt")["model"]
    assert all(torch.equal(tensor, best[key]) for key, tensor in model.state_dict().items())


def test_export_run_refuses_unfinished_runs_and_large_files(finished_run, tmp_path, monkeypatch):
    unfinished = shutil.copytree(finished_run, tmp_path / "seed0")
    (unfinished / "metrics.json").unlink()
    with pytest.raises(PretrainedError, match="unfinished"):
        export_run(unfinished, "toy", "", directory=tmp_path)
    monkeypatch.setattr("zoo.pretrained.MAX_EXPORT_BYTES", 1000)
    with pytest.raises(PretrainedError, match="over the 0.001 MB limit"):
        export_run(finished_run, "toy", "", directory=tmp_path)
    with pytest.raises(PretrainedError, match="file stem"):
        export_run(finished_run, "../toy", "", directory=tmp_path)
    assert not list(tmp_path.glob("*.pt"))


def test_export_cli(finished_run, tmp_path, capsys):
    spec = importlib.util.spec_from_file_location("export_cli", ROOT / "tools" / "export_pretrained.py")
    cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(cli)
    assert cli.main([str(finished_run), "--name", "toy", "--command", "make train", "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert str(tmp_path / "toy.pt") in out and "MB" in out and "test mae" in out
    assert cli.main([str(tmp_path / "nowhere"), "--name", "toy", "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err
