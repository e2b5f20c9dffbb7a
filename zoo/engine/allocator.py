"""glibc's malloc told to keep freed memory for reuse, for the training processes.

A training step allocates and frees the same activation tensors every step. glibc's defaults
give freed memory back to the operating system: the top of the heap beyond a trim threshold, and
every block above the mmap threshold, which glibc raises as blocks are freed but never above
32 MiB on 64-bit, so a larger block (an edge tensor of a graph with many edges) is always mapped
on malloc and unmapped on free. The next step then takes page faults on memory it just had.
:func:`keep_freed_memory` sets, through ``mallopt``, the number of mmapped blocks to 0 (every
block, of any size, comes from the heap) and the trim threshold to 2 GiB - 1 (``mallopt`` takes an
int): freed blocks and the heap top up to 2 GiB then stay with the process. ``python
tools/benchmark.py allocator`` measures what this changes on the paper's ZINC step; README
"Training" gives the measurement on Minesweeper and Tolokers. Results are unchanged: only where
memory comes from differs.

The tools that train (train, sweep, tune, csbm_sweep, finetune) call it first. It leaves
everything alone, and says why, where the user already chose: any ``MALLOC_*`` variable or
``GLIBC_TUNABLES`` set, an ``LD_PRELOAD`` (jemalloc, as README's "Training" advises for large
graphs), or ``ZOO_MALLOC=default``; and on a C library other than glibc. Before that, where the system
has jemalloc, :func:`zoo._malloc.preload_jemalloc` has already run the tool with it preloaded, an
``LD_PRELOAD`` this then leaves alone.
"""
from __future__ import annotations

import ctypes
import os
import platform

from zoo._malloc import user_choice

MMAP_MAX = 0
"""How many blocks glibc may mmap at once: none, so every block comes from the heap and is reused."""
TRIM_THRESHOLD = (1 << 31) - 1
"""Free bytes at the heap top kept before glibc trims it (the largest int ``mallopt`` takes)."""
_M_TRIM_THRESHOLD, _M_MMAP_MAX = -1, -4  # glibc's malloc.h

_setting = "glibc defaults (keep_freed_memory not called)"


def keep_freed_memory(environ=None) -> str:
    """Apply the settings above unless the user chose (see the module docstring); return what
    was done, as :func:`allocator_setting` will report it.

    >>> keep_freed_memory({"ZOO_MALLOC": "default"})
    'left as set (ZOO_MALLOC=default)'
    """
    global _setting
    environ = os.environ if environ is None else environ
    chosen = user_choice(environ)
    if chosen is not None:
        _setting = f"left as set ({chosen})"
    elif platform.libc_ver()[0] != "glibc":
        _setting = f"left as set (C library {platform.libc_ver()[0] or 'unknown'}, not glibc)"
    else:
        libc = ctypes.CDLL("libc.so.6")
        if libc.mallopt(_M_MMAP_MAX, MMAP_MAX) != 1 or libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD) != 1:
            _setting = "glibc refused mallopt; defaults kept"
        else:
            _setting = f"glibc mallopt: mmap_max {MMAP_MAX}, trim_threshold {TRIM_THRESHOLD}"
    return _setting


MALLCTL_ARENAS_ALL = 4096
"""jemalloc's index for "every arena" in ``arena.<i>.purge`` (``MALLCTL_ARENAS_ALL``, jemalloc 5)."""


def release_freed_memory() -> str:
    """Give the memory the allocator keeps for reuse back to the system, and say how.

    Called as a run starts and every few minutes of it (:func:`zoo.engine.epoch_loop.run_epochs`):
    kept memory (with jemalloc without purging, the most the process ever held) is of little use
    to tensors of other shapes, and an earlier run's would count in the next run's recorded peak
    (``peak_rss_bytes``). jemalloc purges every arena (``mallctl("arena.4096.purge")``); glibc
    trims its heaps (``malloc_trim(0)``); other C libraries are left alone.

    >>> release_freed_memory() in ("jemalloc: arenas purged", "glibc: malloc_trim", "left alone")
    True
    """
    if platform.system() != "Linux":
        return "left alone"
    process = ctypes.CDLL(None)  # the symbols of the running process, a preloaded jemalloc's first
    if hasattr(process, "mallctl"):
        purged = process.mallctl(f"arena.{MALLCTL_ARENAS_ALL}.purge".encode(), None, None, None, ctypes.c_size_t(0))
        return "jemalloc: arenas purged" if purged == 0 else f"jemalloc refused the purge (error {purged})"
    if platform.libc_ver()[0] == "glibc":
        process.malloc_trim(ctypes.c_size_t(0))
        return "glibc: malloc_trim"
    return "left alone"


def allocator_setting() -> str:
    """What :func:`keep_freed_memory` did in this process (recorded in ``environment.json``)."""
    return _setting
