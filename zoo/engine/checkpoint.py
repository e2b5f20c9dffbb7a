"""Run checkpoints (``last.pt``, ``best.pt``): written atomically, read with ``weights_only=True``.

A checkpoint holds tensors and plain data only (dicts, lists, numbers, strings; RNG states as
tensors, see :mod:`zoo.engine.reproducibility`), so reading one never runs code from the file.
:func:`save_checkpoint` refuses a state that ``weights_only`` could not read back (checked on a
run's first save), and
:func:`load_checkpoint` turns a planted pickle, a truncated or a corrupt file into one
:class:`CheckpointError` line naming the file and the fix.
"""
from __future__ import annotations

import copy
import io
import json
import pickle
from pathlib import Path

import torch
from torch.nn.parameter import UninitializedTensorMixin

from zoo._atomic import atomic_write
from zoo._safe_load import load_weights_only, reason


class CheckpointError(ValueError):
    """A checkpoint file cannot be read; the one-line message names the file and the fix."""


def save_checkpoint(state: dict, path: str | Path, *, verify: bool = True) -> None:
    """``torch.save`` to ``path`` through a temporary file and an atomic rename.

    With ``verify`` (the default), first serialises ``state`` in memory, reads it back with
    ``weights_only=True`` and raises ``TypeError`` (nothing written) if ``state`` holds an object
    it refuses. A caller that writes states of one shape again and again (the epoch loop's
    ``last.pt``) verifies the first only. The file itself is streamed, never built in memory: a
    whole checkpoint as one growing buffer, every 30 s of training, fragmented the heap of a
    training process by about the checkpoint's size a save (README "Training", "Memory").
    """
    if verify:
        buffer = io.BytesIO()
        torch.save(state, buffer)
        buffer.seek(0)
        try:
            torch.load(buffer, weights_only=True)
        except pickle.UnpicklingError as err:
            raise TypeError(f"cannot checkpoint to {path}: {reason(err)}; "
                            "a checkpoint holds tensors and plain data only") from None
        del buffer
    atomic_write(path, lambda handle: torch.save(state, handle))


def cpu_state_dict(module: torch.nn.Module) -> dict:
    """A copy of ``module.state_dict()`` on the CPU, each tensor its own (parameters that are views
    of one buffer, as :mod:`zoo.engine.flat_optimizer` makes them, are copied apart; a lazy module's
    parameter not yet sized, e.g. LINKX's before its first forward, stays an uninitialized copy)."""
    state = module.state_dict()
    copied = type(state)((key, copy.deepcopy(tensor) if isinstance(tensor, UninitializedTensorMixin)
                          else tensor.detach().to("cpu", copy=True)) for key, tensor in state.items())
    copied._metadata = getattr(state, "_metadata", None)
    return copied


def load_checkpoint(path: str | Path) -> dict:
    """Load a checkpoint written by :func:`save_checkpoint` onto the CPU, without unpickling code."""
    return load_weights_only(path, lambda why: CheckpointError(
        f"checkpoint {path} cannot be read ({why}): it is truncated, corrupt or not written by zoo; "
        "delete it, or rerun with --force to retrain this seed"))


def write_json(obj, path: str | Path) -> None:
    """Write JSON atomically (sorted keys, indented)."""
    text = json.dumps(obj, indent=2, sort_keys=True, default=str).encode()
    atomic_write(path, lambda handle: handle.write(text))

