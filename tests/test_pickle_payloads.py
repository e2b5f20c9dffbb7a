"""No pickle payload runs on a checkpoint path the zoo reads: pretrained (legacy .pt and the
safetensors + JSON pair), fine-tuned, resume (last.pt) and export (best.pt).

Every planted file is first shown to be live (plain ``torch.load``/``pickle.loads`` runs it and
creates the marker); then each reader refuses it with one line naming the file, the marker stays
absent, and each command line exits 2 with that line and no traceback.
"""
import json
import pickle

import pytest
import torch

from tests.tools.tool_loader import ROOT, load_tool
from zoo.engine import load_recipe, run_folder
from zoo.engine.checkpoint import CheckpointError, load_checkpoint
from zoo.engine.export import export_run
from zoo.models import create_model
from zoo.models.pretrained import PretrainedError, load_pretrained, save_pretrained

ARGS = dict(num_outputs=1, dim=16, heads=2, layers=1, pe="rwse", rwse_k=4, dim_pe=4)


class Payload:
    """Unpickling this creates ``marker`` (as ``os.system`` or anything else could run)."""

    def __init__(self, marker):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture
def marker(tmp_path):
    return tmp_path / "PAYLOAD_RAN"


def plant(path, marker, how="torch"):
    """Write a payload at ``path`` shaped like the checkpoint expected there; check that it is live."""
    path.parent.mkdir(parents=True, exist_ok=True)
    obj = {"format": "zoo-pretrained/1", "card": {"name": Payload(marker)}, "state_dict": {}, "model": Payload(marker),
           "recipe": {}}
    if how == "torch":
        torch.save(obj, path)
        torch.load(path, weights_only=False)
    else:
        path.write_bytes(pickle.dumps(obj, protocol=2))
        pickle.loads(path.read_bytes())
    assert marker.exists(), "the planted payload is not live"
    marker.unlink()
    return path


def _one_line(err_text, path):
    lines = [line for line in err_text.splitlines() if line.strip()]
    assert len(lines) == 1 and str(path) in lines[0] and "Traceback" not in err_text, err_text
    return lines[0]


def _library_refuses(call, error, path, marker):
    with pytest.raises(error) as info:
        call()
    _one_line(str(info.value), path)
    assert not marker.exists()


def _cli_refuses(tool, argv, path, marker, capsys):
    capsys.readouterr()
    assert load_tool(tool).main(argv) == 2
    out, err = capsys.readouterr()
    assert _one_line(err, path).startswith("error: ") and "Traceback" not in out
    assert not marker.exists()


def _pair(folder, name="model"):
    torch.manual_seed(0)
    return save_pretrained(create_model("siggate_gt", **ARGS), {"architecture": "siggate_gt", "model_args": ARGS},
                           folder / f"{name}.safetensors")


@pytest.fixture
def csv_files(tmp_path):
    smiles = ["CCO", "CCN", "CCC", "CCCC", "CCCO", "c1ccccc1", "c1ccccc1O", "c1ccncc1", "C1CCCCC1", "CC(=O)O"]
    (tmp_path / "new.csv").write_text("smiles\n" + "\n".join(smiles) + "\n")
    (tmp_path / "train.csv").write_text("smiles,y\n" + "\n".join(f"{s},{i}" for i, s in enumerate(smiles)) + "\n")
    return tmp_path / "new.csv", tmp_path / "train.csv"


@pytest.mark.parametrize("how", ["torch", "pickle"])
def test_legacy_pretrained_pt(tmp_path, marker, csv_files, capsys, how):
    path = plant(tmp_path / "shipped" / "evil.pt", marker, how)
    _library_refuses(lambda: load_pretrained(path), PretrainedError, path, marker)
    _library_refuses(lambda: load_pretrained("evil", directory=path.parent), PretrainedError, path, marker)
    new, train = csv_files
    _cli_refuses("predict", ["--model", str(path), "--data", str(new), "--out", str(tmp_path / "p.csv")], path,
                 marker, capsys)
    _cli_refuses("finetune", ["--pretrained", str(path), "--data", str(train), "--target-cols", "y", "--quiet",
                              "--out", str(tmp_path / "ft")], path, marker, capsys)
    assert not (tmp_path / "p.csv").exists() and not (tmp_path / "ft").exists()


@pytest.mark.parametrize("part", [".safetensors", ".json"])
def test_safetensors_pair_with_a_pickle_in_place_of_either_file(tmp_path, marker, csv_files, capsys, part):
    weights = _pair(tmp_path / "shipped", "evil")
    path = plant(weights.with_suffix(part), marker)
    _library_refuses(lambda: load_pretrained(weights), PretrainedError, path, marker)
    _library_refuses(lambda: load_pretrained("evil", directory=weights.parent), PretrainedError, path, marker)
    new, train = csv_files
    _cli_refuses("predict", ["--model", str(weights), "--data", str(new), "--out", str(tmp_path / "p.csv")], path,
                 marker, capsys)
    _cli_refuses("finetune", ["--pretrained", str(weights.with_suffix(".json")), "--data", str(train),
                              "--target-cols", "y", "--quiet", "--out", str(tmp_path / "ft")], path, marker, capsys)


@pytest.mark.parametrize("name", ["model.safetensors", "model.json", "model.pt"])
def test_fine_tuned_model_in_a_run_folder(tmp_path, marker, csv_files, capsys, name):
    seed_dir = tmp_path / "runs" / "finetune" / "seed0"  # where finetune writes model.safetensors + model.json
    _pair(seed_dir)
    path = plant(seed_dir / name, marker)
    model = seed_dir / ("model.pt" if name.endswith(".pt") else "model.safetensors")
    new, _ = csv_files
    _cli_refuses("predict", ["--model", str(model), "--data", str(new), "--out", str(tmp_path / "p.csv")], path,
                 marker, capsys)


@pytest.mark.parametrize("how", ["torch", "pickle"])
def test_resume_last_pt(tmp_path, marker, capsys, offline_env, how):
    recipe = ROOT / "recipes/texas_gat.yaml"
    seed_dir = run_folder(load_recipe(recipe, [], epochs=2), tmp_path / "runs") / "seed0"
    path = plant(seed_dir / "last.pt", marker, how)
    _library_refuses(lambda: load_checkpoint(path), CheckpointError, path, marker)
    _cli_refuses("train", [str(recipe), "--seeds", "0", "--epochs", "2", "--out", str(tmp_path / "runs"), "--quiet"],
                 path, marker, capsys)
    _cli_refuses("tune", [str(recipe), "--tune-seeds", "0", "--seeds", "0", "--epochs", "2",
                          "--out", str(tmp_path / "runs")], path, marker, capsys)


@pytest.mark.parametrize("how", ["torch", "pickle"])
def test_export_best_pt(tmp_path, marker, capsys, how):
    run = tmp_path / "runs" / "zinc_siggate" / "0123456789" / "seed0"
    run.mkdir(parents=True)
    (run / "metrics.json").write_text(json.dumps({"main_metric": "mae"}))  # a finished run, as far as export can tell
    path = plant(run / "best.pt", marker, how)
    _library_refuses(lambda: export_run(run, "evil", "", directory=tmp_path / "out"), PretrainedError, path, marker)
    _cli_refuses("export_pretrained", [str(run), "--name", "evil", "--out", str(tmp_path / "out")], path, marker,
                 capsys)
    assert not (tmp_path / "out").exists()
