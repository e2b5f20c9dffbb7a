"""Atomic file writes, shared by every floor: a kill mid-write never leaves a half-written file."""
from __future__ import annotations

import os
import tempfile
from pathlib import Path


def atomic_write(path: str | Path, write) -> None:
    """Call ``write(handle)`` on a temporary binary file beside ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
