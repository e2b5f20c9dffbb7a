"""Atomic file writes, shared by every floor: a kill mid-write never leaves a half-written file.

The temporary file is created with ``os.open(..., 0o666)``, so the kernel applies the process
umask exactly as for a plain ``open(path, "w")`` (``mkstemp`` forces 0600), without reading or
changing the umask.
"""
from __future__ import annotations

import os
import secrets
from pathlib import Path

_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_CLOEXEC", 0)


def atomic_write(path: str | Path, write) -> None:
    """Call ``write(handle)`` on a temporary binary file beside ``path``, then rename it to ``path``."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    while True:
        tmp = path.parent / f".{path.name}.{secrets.token_hex(8)}.tmp"
        try:
            fd = os.open(tmp, _FLAGS, 0o666)
            break
        except FileExistsError:  # a name another writer holds: draw again
            continue
    try:
        with os.fdopen(fd, "wb") as handle:
            write(handle)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
