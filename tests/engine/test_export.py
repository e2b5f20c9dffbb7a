"""Export of a finished run (a real 2-epoch training) as a pretrained checkpoint, and the one card builder."""
import csv
import json
import shlex
import shutil
from pathlib import Path

import pytest
import torch
import yaml

import zoo
from tests.tools.tool_loader import load_tool
from zoo.data import FEATURIZER_SPEC, load_csv_dataset
from zoo.engine import experiment
from zoo.engine.environment import environment
from zoo.engine.export import export_run, model_card
from zoo.engine.recipe import build_recipe, load_recipe
from zoo.models import create_model
from zoo.models.pretrained import PretrainedError, load_pretrained

SMILES = ["CCO", "CCN", "CCC", "CCCC", "CCCO", "c1ccccc1", "c1ccccc1O", "c1ccccc1N", "c1ccncc1", "C1CCCCC1",
          "C1CCCCC1O", "CC(C)O", "CC(=O)O", "CC(=O)N", "CCOC", "COC", "CNC", "C1CC1", "C1CCC1", "c1ccoc1",
          "c1ccsc1", "OCCO", "NCCN", "CC#N"]
MODEL = {"name": "siggate_gt", "dim": 16, "heads": 2, "layers": 1, "local": "gine", "pe": "rwse", "rwse_k": 4,
         "dim_pe": 4}


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
    (tmp / "toy.yaml").write_text(yaml.safe_dump({"dataset": "zinc_smiles", "task": "graph_regression",
                                                  "model": MODEL, "optim": {"epochs": 2, "batch_size": 8}}))
    recipe = load_recipe(tmp / "toy.yaml")
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(experiment, "load_graph_dataset", lambda name, **options: data)
        experiment.run_recipe(recipe, tmp / "runs", progress=False)
    return experiment.run_folder(recipe, tmp / "runs") / "seed0"


def training_command(run, *options):
    """The command that trained the ``finished_run`` fixture (its recipe file is beside runs/)."""
    return shlex.join(["python", "tools/train.py", str(run.parents[3] / "toy.yaml"), *options])


def test_model_card_records_the_model_its_data_and_the_environment():
    recipe = build_recipe({"dataset": "zinc_smiles", "name": "toy", "task": "graph_regression", "model": MODEL})
    model = create_model("siggate_gt", num_outputs=3, **{k: v for k, v in MODEL.items() if k != "name"})
    metrics = {"main_metric": "mae", "best_epoch": 4,
               "final": {"train": {"mae": 0.1}, "val": {"mae": 0.2}, "test": {"mae": 0.3}}}
    env = environment()
    card = model_card("toy_seed0", model, recipe, metrics, env, num_outputs=3, split={"kind": "random"},
                      target_columns=("a", "b", "c"), command="cmd", dataset={"path": Path("/x.csv")},
                      parent="from scratch")
    assert card["model_args"] == {**{k: v for k, v in MODEL.items() if k != "name"}, "num_outputs": 3}
    assert card["architecture"] == "siggate_gt" and card["recipe"] == json.loads(json.dumps(recipe.to_dict()))
    assert card["metrics"] == {"val": {"mae": 0.2}, "test": {"mae": 0.3}} and card["best_epoch"] == 4
    assert card["metric"] == "mae" and card["task"] == "graph_regression" and card["pe_spec"] == model.pe_spec()
    assert card["target_columns"] == ["a", "b", "c"] and card["dataset"] == {"path": "/x.csv"}  # plain JSON data
    assert card["parent"] == "from scratch" and "featurizer" not in card
    assert card["zoo_version"] == zoo.__version__ and card["git_commit"] == env["git_commit"]
    assert card["versions"] == {"python": env["python"], **env["packages"]}
    assert "earlier_environments" not in card  # trained in one environment


def test_model_card_names_every_environment_of_a_resumed_run():
    recipe = build_recipe({"dataset": "zinc_smiles", "name": "toy", "task": "graph_regression", "model": MODEL})
    model = create_model("siggate_gt", num_outputs=1, **{k: v for k, v in MODEL.items() if k != "name"})
    metrics = {"main_metric": "mae", "best_epoch": 4, "final": {"val": {"mae": 0.2}, "test": {"mae": 0.3}}}
    first, second = {"git_commit": "aaa", "zoo": "0.1"}, {"git_commit": "bbb", "zoo": "0.1"}
    env = environment() | {"earlier": [first, second]}
    card = model_card("toy", model, recipe, metrics, env, num_outputs=1, split={}, target_columns=(), command="cmd")
    assert card["earlier_environments"] == [first, second] and card["git_commit"] == env["git_commit"]


def test_export_run_writes_a_loadable_card(finished_run, tmp_path):
    command = training_command(finished_run, "--seeds", "0")
    path = export_run(finished_run, "toy_model", command, directory=tmp_path)
    assert path == tmp_path / "toy_model.safetensors" and (tmp_path / "toy_model.json").is_file()
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
    assert card["command"] == command and card["git_commit"] == environment["git_commit"]
    assert card["zoo_version"] == zoo.__version__ and card["versions"]["torch"] == torch.__version__.split("+")[0]
    best = torch.load(finished_run / "best.pt")["model"]
    assert all(torch.equal(tensor, best[key]) for key, tensor in model.state_dict().items())


def test_export_run_refuses_unfinished_runs_and_large_files(finished_run, tmp_path, monkeypatch):
    unfinished = shutil.copytree(finished_run, tmp_path / "seed0")
    (unfinished / "metrics.json").unlink()
    with pytest.raises(PretrainedError, match="unfinished"):
        export_run(unfinished, "toy", "", directory=tmp_path)
    monkeypatch.setattr("zoo.engine.export.MAX_EXPORT_BYTES", 1000)
    with pytest.raises(PretrainedError, match="over the 0.001 MB limit"):
        export_run(finished_run, "toy", "", directory=tmp_path)
    with pytest.raises(PretrainedError, match="file stem"):
        export_run(finished_run, "../toy", "", directory=tmp_path)
    assert not list(tmp_path.glob("toy*"))


def test_export_cli(finished_run, tmp_path, capsys):
    cli = load_tool("export_pretrained")
    command = training_command(finished_run, "--out", "runs")
    assert cli.main([str(finished_run), "--name", "toy", "--command", command, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert f"{tmp_path / 'toy.safetensors'} (" in out and str(tmp_path / "toy.json") in out and "test mae" in out
    # a command that would train another model is refused before anything is written
    other = training_command(finished_run, "--set", "model.dim=32")
    assert cli.main([str(finished_run), "--name", "other", "--command", other, "--out", str(tmp_path)]) == 2
    assert "model.dim: 32 by the command, 16 in the run" in capsys.readouterr().err
    assert cli.main([str(finished_run), "--name", "other", "--command", "make train", "--out", str(tmp_path)]) == 2
    assert "runs neither tools/train.py nor tools/sweep.py" in capsys.readouterr().err
    assert not list(tmp_path.glob("other*"))
    assert cli.main([str(tmp_path / "nowhere"), "--name", "toy", "--out", str(tmp_path)]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_export_run_reads_best_pt_as_weights_only_and_refuses_anything_else(finished_run, tmp_path):
    run = shutil.copytree(finished_run, tmp_path / "seed0")
    torch.save({"epoch": 3}, run / "best.pt")
    with pytest.raises(PretrainedError, match="best.pt is not a best-epoch checkpoint"):
        export_run(run, "toy", "", directory=tmp_path)
    data = (finished_run / "best.pt").read_bytes()
    (run / "best.pt").write_bytes(data[: len(data) // 2])
    with pytest.raises(PretrainedError, match=f"checkpoint {run / 'best.pt'} cannot be read .*--force") as info:
        export_run(run, "toy", "", directory=tmp_path)
    assert "\n" not in str(info.value) and not list(tmp_path.glob("toy*"))
