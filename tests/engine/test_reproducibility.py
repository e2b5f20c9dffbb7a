"""RNG state capture: through a weights_only checkpoint, every generator continues where it stopped."""
import random

import numpy as np
import torch

from zoo.engine.checkpoint import load_checkpoint, save_checkpoint
from zoo.engine.reproducibility import rng_state, seed_everything, set_rng_state


def _draws():
    return random.random(), random.gauss(0, 1), np.random.rand(3).tolist(), np.random.randn(), torch.rand(3).tolist()


def test_a_restored_state_repeats_the_draws_after_a_weights_only_round_trip(tmp_path):
    seed_everything(7)
    random.gauss(0, 1)  # leaves a cached Gaussian in Python's generator
    np.random.randn()  # and in NumPy's legacy one
    save_checkpoint({"rng": rng_state()}, tmp_path / "last.pt")
    expected = _draws()
    seed_everything(8)
    set_rng_state(load_checkpoint(tmp_path / "last.pt")["rng"])
    assert _draws() == expected


def test_the_state_is_tensors_and_plain_numbers():
    state = rng_state()
    assert state["python"]["words"].dtype == state["numpy"]["keys"].dtype == torch.int64
    assert state["torch"].dtype == torch.uint8
    assert random.getstate()[1] == tuple(state["python"]["words"].tolist())
    assert (np.random.get_state()[1] == state["numpy"]["keys"].numpy()).all()
