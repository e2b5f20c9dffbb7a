"""Reading ``torch.save`` files without running code from them, shared by every floor.

:func:`load_weights_only` is ``torch.load(map_location="cpu", weights_only=True)`` whose failure (a
planted pickle, a truncated zip, garbage, an unreadable file) becomes one exception with a one-line
message; :func:`reason` is that line's account of the failure.
"""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch


def reason(err: Exception) -> str:
    """The type and first line of ``err``, without torch's advice to retry with ``weights_only=False``."""
    lines = str(err).strip().splitlines()
    return f"{type(err).__name__}: {lines[0].split('WeightsUnpickler error: ')[-1]}" if lines else type(err).__name__


def load_weights_only(path: str | Path, error: Callable[[str], Exception]):
    """``torch.load(path, map_location="cpu", weights_only=True)``; on any failure raises
    ``error(reason(err))`` (without the chained traceback)."""
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a payload, a truncated zip, garbage, an unreadable file
        raise error(reason(err)) from None
