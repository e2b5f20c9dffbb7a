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
    """Another process is training this seed folder; the message names the folder and the fix,
    ``holder`` the other process (``"pid N"``, or how it is known)."""

    def __init__(self, message: str, holder: str):
        super().__init__(message)
        self.holder = holder


@contextlib.contextmanager
def hold_seed(seed_dir: str | Path, hold: bool = True, agree=None):
    """Hold ``seed_dir`` (an existing folder) for the body, or raise :class:`RunBusyError` if
    another process holds it. ``hold=False``: take nothing (a torchrun or DistDGL rank other than
    0, which writes nothing). ``agree``: a sum over the ranks (``zoo.engine.distributed.all_sum``),
    so that every rank raises when rank 0 finds the folder busy, instead of waiting for it in a
    collective.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder, hold_seed(folder):
    ...     pass
    """
    fd = os.open(seed_dir, os.O_RDONLY | os.O_DIRECTORY) if hold else None
    try:
        busy = False
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                busy = True
        if agree is not None:
            busy = agree(float(busy)) > 0
        if busy:
            pid = _holder(os.fstat(fd).st_ino) if fd is not None else None
            who = f"pid {pid}" if pid else ("pid unknown" if fd is not None else "as rank 0 found")
            raise RunBusyError(
                f"{seed_dir} is being trained by another process ({who}: a second train or sweep over the "
                f"same --out); wait for it to end, or stop it ({f'kill -TERM {pid}' if pid else 'kill -TERM <pid>'}) "
                "and rerun this command to resume from its last checkpoint", who)
        yield
    finally:
        if fd is not None:
            os.close(fd)


@contextlib.contextmanager
def one_at_a_time(folder: str | Path):
    """Hold ``folder``'s flock for the body, waiting for another process that holds it: for short
    writes that jobs sharing a sweep make in turn (a config folder's ``summary.json``), not for
    training (:func:`hold_seed` refuses instead of waiting).

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as folder, one_at_a_time(folder):
    ...     pass
    """
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


def holder_of(seed_dir: str | Path) -> str | None:
    """The pid of the process training ``seed_dir`` now (holding its lock), read from
    ``/proc/locks`` without taking the lock; None if none does, or where it cannot tell.

    >>> import tempfile
    >>> with tempfile.TemporaryDirectory() as seed_dir:
    ...     free = holder_of(seed_dir)
    ...     with hold_seed(seed_dir):
    ...         free, holder_of(seed_dir) == str(os.getpid())
    (None, True)
    """
    with contextlib.suppress(OSError):
        return _holder(os.stat(seed_dir).st_ino)
    return None


def _holder(inode: int) -> str | None:
    """The pid that holds a flock on ``inode``, from ``/proc/locks`` (None where it cannot tell)."""
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            fields = line.split()
            if "FLOCK" in fields and len(fields) > 5 and fields[5].rsplit(":", 1)[-1] == str(inode):
                return fields[4]
    return None
