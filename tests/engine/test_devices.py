"""Device choice: clear errors on this CPU machine, and the same run on CUDA where there is one."""
import importlib.util
import json
from pathlib import Path

import pytest
import torch

from zoo.engine import load_recipe, run_recipe
from zoo.engine.devices import resolve_device

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("train_cli_devices", ROOT / "tools" / "train.py")
train_cli = importlib.util.module_from_spec(spec)
spec.loader.exec_module(train_cli)


def test_resolve_device():
    assert resolve_device("cpu") == resolve_device(None) == torch.device("cpu")
    assert resolve_device("auto") == torch.device("cuda" if torch.cuda.is_available() else "cpu")
    with pytest.raises(ValueError, match="device 'gpu' is not one of cpu, cuda, cuda:<index>, auto"):
        resolve_device("gpu")
    with pytest.raises(ValueError, match="device 'meta' is not one of"):
        resolve_device("meta")


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the message on a machine without CUDA")
def test_cuda_without_a_gpu_names_the_fix(capsys):
    with pytest.raises(ValueError, match="torch.cuda.is_available\\(\\) is False .* use --device cpu"):
        resolve_device("cuda")
    assert train_cli.main([str(ROOT / "recipes/texas_gcn.yaml"), "--device", "cuda"]) == 2
    assert "use --device cpu" in capsys.readouterr().err


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
@pytest.mark.parametrize("recipe", ["texas_ltga_head", "texas_gcn"])
def test_a_cuda_run_matches_the_cpu_run(recipe, zoo_data, zoo_cache, tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA", str(zoo_data))
    monkeypatch.setenv("ZOO_CACHE", str(zoo_cache))
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    runs = {}
    for device in ("cpu", "cuda"):
        run_recipe(load_recipe(ROOT / f"recipes/{recipe}.yaml", epochs=30), tmp_path / device, seeds=[0],
                   progress=False, device=device)
        (metrics,) = (tmp_path / device).rglob("metrics.json")
        runs[device] = json.loads(metrics.read_text())
        best = torch.load(metrics.parent / "best.pt")  # no map_location: the checkpoint holds CPU tensors
        assert all(tensor.device.type == "cpu" for tensor in best["model"].values())
    cpu, cuda = runs["cpu"]["curves"], runs["cuda"]["curves"]
    assert [round(r["val_loss"], 3) for r in cpu[:5]] == [round(r["val_loss"], 3) for r in cuda[:5]]
