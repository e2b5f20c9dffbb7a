"""Atomic checkpoint files: a kill mid-write never leaves a half-written file behind."""
from __future__ import annotations

import copy
import json
from pathlib import Path

import torch

from zoo._atomic import atomic_write


def save_checkpoint(state: dict, path: str | Path) -> None:
    """``torch.save`` to ``path`` through a temporary file and an atomic rename."""
    atomic_write(path, lambda handle: torch.save(state, handle))


def cpu_state_dict(module: torch.nn.Module) -> dict:
    """A copy of ``module.state_dict()`` whose tensors are on the CPU (a deep copy on the CPU path)."""
    state = module.state_dict()
    if all(tensor.device.type == "cpu" for tensor in state.values()):
        return copy.deepcopy(state)
    copied = type(state)((key, tensor.detach().cpu()) for key, tensor in state.items())
    copied._metadata = getattr(state, "_metadata", None)
    return copied


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` onto the CPU."""
    return torch.load(path, map_location="cpu")


def write_json(obj, path: str | Path) -> None:
    """Write JSON atomically (sorted keys, indented)."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=str).encode()
    atomic_write(path, lambda handle: handle.write(text))
