"""One process at a time in a seed's run folder.

Two jobs training the same seed folder (a sweep started twice, or ``train.py`` beside a sweep
over the same ``--out``) would write their checkpoints and metrics over each other's.
:func:`hold_seed` takes an exclusive ``flock`` on the seed folder itself while it trains, so the
second job stops with :class:`RunBusyError` instead. The lock is the kernel's: it goes when its
process ends, however it ends, so a killed run leaves no stale lock and adds no file.
"""
from __future__ import annotations

import contextlib
import fcntl
import os
from pathlib import Path


class RunBusyError(RuntimeError):
    """Another process is training this seed folder; the message names the folder and the fix."""


@contextlib.contextmanager
def hold_seed(seed_dir: str | Path, hold: bool = True):
    """Hold ``seed_dir`` (an existing folder) for the body; with ``hold=False`` (torchrun ranks
    other than 0, which do not write) do nothing. Raises :class:`RunBusyError` if another
    process holds it.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder, hold_seed(folder):
    ...     pass
    """
    if not hold:
        yield
        return
    fd = os.open(seed_dir, os.O_RDONLY | os.O_DIRECTORY)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            pid = _holder(os.fstat(fd).st_ino)
            raise RunBusyError(
                f"{seed_dir} is being trained by another process ({f'pid {pid}' if pid else 'pid unknown'}: a second "
                "train or sweep over the same --out); wait for it to end, or stop it "
                f"({f'kill -TERM {pid}' if pid else 'kill -TERM <pid>'}) and rerun this command to resume from its "
                "last checkpoint"
            ) from None
        yield
    finally:
        os.close(fd)


def _holder(inode: int) -> str | None:
    """The pid that holds a flock on ``inode``, from ``/proc/locks`` (None where it cannot tell)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "FLOCK" in fields and len(fields) > 5 and fields[5].rsplit(":", 1)[-1] == str(inode):
                return fields[4]
    return None
