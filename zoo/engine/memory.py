"""The peak resident set of a training run, so that a run records how much memory it needed.

Linux keeps each process's high-water mark of resident memory (``VmHWM`` in
``/proc/self/status``) and lets the process lower it to the current resident set (``5`` written to
``/proc/self/clear_refs``, Linux 4.0 and later). :func:`zoo.engine.epoch_loop.run_epochs` resets
it as a run starts, so that a sweep's earlier runs in the same process do not count (their kept
memory is released just before, :func:`zoo.engine.allocator.release_freed_memory`), and keeps the
largest mark across resumes. The mark is what the kernel holds for the process: with
:mod:`zoo.engine.allocator`'s setting it includes freed memory kept for reuse, which is memory the
machine cannot give to another job all the same. Elsewhere (no ``/proc``) nothing is recorded.
"""
from __future__ import annotations

from pathlib import Path

PROC = Path("/proc/self")


def reset_peak(proc: Path = PROC) -> bool:
    """Lower this process's high-water mark to its current resident set; False where the kernel
    offers no reset (the mark then counts from the process's start)."""
    try:
        (proc / "clear_refs").write_text("5")
    except OSError:
        return False
    return True


def peak_resident_bytes(proc: Path = PROC) -> int | None:
    """This process's high-water mark of resident memory in bytes, or None where it is not known.

    >>> peak_resident_bytes() > 0
    True
    """
    try:
        status = (proc / "status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            value, unit = line.split()[1:3]
            if unit != "kB":
                raise ValueError(f"{proc / 'status'}: VmHWM in {unit!r}, expected kB: {line!r}")
            return int(value) * 1024
    return None


def gigabytes(n_bytes: int | None) -> str:
    """``n_bytes`` as decimal gigabytes for a log line or table (``-`` when unknown).

    >>> gigabytes(9_734_000_000), gigabytes(None)
    ('9.7 GB', '-')
    """
    return "-" if n_bytes is None else f"{n_bytes / 1e9:.1f} GB"
