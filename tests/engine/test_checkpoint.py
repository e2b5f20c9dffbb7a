"""Run checkpoints: weights_only round trip, refusal of what weights_only cannot read (on write and
on read, one line naming the file), a save streamed to disk, and a corrupt last.pt through
tools/train.py and sweep.py."""
import json
import pickle
import tracemalloc

import numpy as np
import pytest
import torch

from tests.tools.tool_loader import ROOT, load_tool
from zoo.engine import load_recipe, run_folder
from zoo.engine.checkpoint import CheckpointError, cpu_state_dict, load_checkpoint, save_checkpoint, write_json


def test_a_training_state_round_trips_through_weights_only(tmp_path):
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.Adam(model.parameters())
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    state = {"model": cpu_state_dict(model), "optimizers": [optimizer.state_dict()],
             "state": {"epoch": 4, "best": float("inf"), "curves": [{"loss": 0.5}], "stopped": False, "note": None}}
    save_checkpoint(state, tmp_path / "last.pt")
    loaded = torch.load(tmp_path / "last.pt", weights_only=True)  # the reference reader
    again = load_checkpoint(tmp_path / "last.pt")
    assert again["state"] == loaded["state"] == state["state"]
    assert all(torch.equal(again["model"][k], v) for k, v in state["model"].items())
    assert torch.equal(again["optimizers"][0]["state"][0]["exp_avg"], optimizer.state_dict()["state"][0]["exp_avg"])


def test_a_state_weights_only_cannot_read_is_refused_before_writing(tmp_path):
    for bad in ({"x": np.float64(1.0)}, {"rng": np.random.get_state()}, {"f": print}):
        with pytest.raises(TypeError, match="cannot checkpoint to .*last.pt: UnpicklingError: Unsupported"):
            save_checkpoint(bad, tmp_path / "last.pt")
    assert not list(tmp_path.iterdir())
    save_checkpoint({"w": torch.ones(2)}, tmp_path / "plain.pt", verify=False)  # no read-back, same bytes
    assert torch.equal(load_checkpoint(tmp_path / "plain.pt")["w"], torch.ones(2))


def test_a_save_without_verify_streams_to_disk_instead_of_building_the_file_in_memory(tmp_path):
    # the epoch loop saves last.pt every 30 s: a whole-file buffer each time fragmented the heap of
    # a training process by about the checkpoint's size a save (session 42: a molhiv process grew
    # by 60-70 MB an epoch). tracemalloc sees Python's allocations, a file-sized bytes buffer among them.
    state = {"model": {f"w{i}": torch.randn(1 << 18) for i in range(8)}}  # 8 MiB of tensors
    tracemalloc.start()
    try:
        save_checkpoint(state, tmp_path / "last.pt", verify=False)
        streamed = tracemalloc.get_traced_memory()[1]
        tracemalloc.reset_peak()
        save_checkpoint(state, tmp_path / "first.pt")  # verify: one in-memory copy to read back
        verified = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    size = (tmp_path / "last.pt").stat().st_size
    assert size > 8 << 20 and streamed < size // 8 and verified > size
    assert all(torch.equal(load_checkpoint(tmp_path / name)["model"][key], value)
               for name in ("last.pt", "first.pt") for key, value in state["model"].items())


@pytest.mark.parametrize("content, reason", [
    (lambda good: good[: len(good) // 2], "failed finding central directory"),
    (lambda good: b"", "EOFError"),
    (lambda good: b"not a checkpoint", "UnpicklingError"),
    (lambda good: pickle.dumps({"model": print}, protocol=2), "Unsupported"),
])
def test_an_unreadable_checkpoint_is_one_line_naming_the_file(tmp_path, content, reason):
    save_checkpoint({"w": torch.ones(4)}, tmp_path / "good.pt")
    path = tmp_path / "last.pt"
    path.write_bytes(content((tmp_path / "good.pt").read_bytes()))
    with pytest.raises(CheckpointError, match=f"checkpoint {path} cannot be read .*{reason}") as info:
        load_checkpoint(path)
    message = str(info.value)
    assert "\n" not in message and "--force" in message and "weights_only" not in message


def test_write_json_is_sorted_and_indented(tmp_path):
    write_json({"b": 1, "a": [1, 2]}, tmp_path / "m.json")
    assert (tmp_path / "m.json").read_text() == json.dumps({"a": [1, 2], "b": 1}, indent=2)


@pytest.mark.parametrize("tool", ["train", "sweep"])
def test_a_truncated_last_pt_exits_2_naming_the_file_and_force(tool, tmp_path, capsys, offline_env):
    recipe = ROOT / "recipes/texas_gat.yaml"
    args = [str(recipe), "--seeds", "0", "--epochs", "3", "--out", str(tmp_path / "runs")]
    last = run_folder(load_recipe(recipe, [], epochs=3), tmp_path / "runs") / "seed0" / "last.pt"
    save_checkpoint({"model": {"w": torch.ones(1000)}}, last)
    last.write_bytes(last.read_bytes()[:1000])  # what a full disk or a copy cut short leaves
    assert load_tool(tool).main(args) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and err[0].startswith(f"error: checkpoint {last} cannot be read") and "--force" in err[0]
    assert load_tool(tool).main(args + ["--force"]) == 0  # the hint works
    assert (last.parent / "metrics.json").is_file() and not last.exists()
