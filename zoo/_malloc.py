"""The choice of malloc, made before a training process loads torch (a helper below every floor).

jemalloc without purging was faster than glibc or level with it on every workload measured here,
with a lower peak than glibc told to keep freed memory. It also reuses freed memory for smaller
blocks (``lg_extent_max_active_fit``, :data:`JEMALLOC_CONF`): without that, ``sparsegate_gt`` on
ZINC-SMILES reached 20.2 GB in two epochs against 1.73 GB in 30 with glibc (README "Training").
It has to be preloaded before the process starts. The training tools (train, sweep, tune,
csbm_sweep, finetune) call :func:`preload_jemalloc` first thing: where the system has jemalloc and
the user chose nothing, it runs the same command again in the same process (``exec``: same pid,
interpreter flags and arguments) with jemalloc preloaded. Without jemalloc,
:func:`zoo.engine.allocator.keep_freed_memory` tells glibc to keep freed memory instead.

``ZOO_MALLOC`` chooses: unset, jemalloc where found, else glibc kept; ``jemalloc``, jemalloc or an
error; ``glibc``, glibc kept; ``default``, glibc's defaults. ``ZOO_JEMALLOC=PATH`` names a
library outside the system's search path. Any ``MALLOC_*``, ``GLIBC_TUNABLES`` or ``LD_PRELOAD``
the user set wins over all of this.
"""
from __future__ import annotations

import ctypes.util
import os
import sys
from pathlib import Path

JEMALLOC_CONF = "dirty_decay_ms:-1,muzzy_decay_ms:-1,lg_extent_max_active_fit:32"
"""jemalloc's ``MALLOC_CONF`` without purging: freed pages stay with the process for reuse, for
blocks of any smaller size. jemalloc's default (6) splits a free extent only for a request at
least 1/64 of its size; with purging off, freed neighbours coalesce into extents of hundreds of MB
that small blocks then pass over for new pages (jemalloc 5.1+; older ones warn and ignore it)."""
ZOO_MALLOC_CHOICES = ("jemalloc", "glibc", "default")


class MallocChoiceError(ValueError):
    """A ``ZOO_MALLOC`` or ``ZOO_JEMALLOC`` that cannot be honoured; the message names the fix."""


def chooses_allocator(name: str) -> bool:
    """Whether environment variable ``name`` is one by which a user sets the allocator up.

    >>> chooses_allocator("MALLOC_ARENA_MAX"), chooses_allocator("PATH")
    (True, False)
    """
    return name.startswith("MALLOC_") or name in ("GLIBC_TUNABLES", "LD_PRELOAD")


def user_choice(environ) -> str | None:
    """The variables by which the user already chose an allocator setting, as ``NAME=value``
    joined by ``"; "``, or None.

    >>> user_choice({"LD_PRELOAD": "/opt/libjemalloc.so.2", "MALLOC_CONF": "narenas:1", "PATH": "/bin"})
    'LD_PRELOAD=/opt/libjemalloc.so.2; MALLOC_CONF=narenas:1'
    >>> user_choice({}) is None
    True
    """
    if environ.get("ZOO_MALLOC") == "default":
        return "ZOO_MALLOC=default"
    return "; ".join(f"{name}={environ[name]}" for name in sorted(environ) if chooses_allocator(name)) or None


def jemalloc_environment(environ) -> dict[str, str] | None:
    """The variables that preload jemalloc without purging, or None where the user chose (above)
    or no jemalloc is found.

    >>> jemalloc_environment({"ZOO_MALLOC": "glibc"}) is None
    True
    >>> jemalloc_environment({"ZOO_JEMALLOC": "/no/libjemalloc.so.2"})
    Traceback (most recent call last):
    ...
    zoo._malloc.MallocChoiceError: ZOO_JEMALLOC=/no/libjemalloc.so.2 is not a file; point it at libjemalloc.so.2, or unset it to search the system's libraries
    """
    mode = environ.get("ZOO_MALLOC", "")
    if mode not in ("",) + ZOO_MALLOC_CHOICES:
        raise MallocChoiceError(f"ZOO_MALLOC={mode} is not one of {', '.join(ZOO_MALLOC_CHOICES)}; unset it to use "
                                "jemalloc where the system has it, else glibc told to keep freed memory")
    if mode == "glibc" or user_choice(environ) is not None:
        return None
    library = environ.get("ZOO_JEMALLOC")
    if library and not Path(library).is_file():
        raise MallocChoiceError(f"ZOO_JEMALLOC={library} is not a file; point it at libjemalloc.so.2, or unset it "
                                "to search the system's libraries")
    library = library or ctypes.util.find_library("jemalloc")
    if library is None:
        if mode == "jemalloc":
            raise MallocChoiceError("ZOO_MALLOC=jemalloc, but no jemalloc was found: install it (Debian/Ubuntu: "
                                    "libjemalloc2), set ZOO_JEMALLOC=PATH to its libjemalloc.so.2, or unset "
                                    "ZOO_MALLOC")
        return None
    return {"LD_PRELOAD": library, "MALLOC_CONF": JEMALLOC_CONF, "ZOO_MALLOC": "jemalloc"}


def preload_jemalloc(environ=None, execve=os.execve) -> None:
    """Run this command again with jemalloc preloaded (:func:`jemalloc_environment`), or return
    where that does not apply. A bad ``ZOO_MALLOC`` or ``ZOO_JEMALLOC`` exits with status 2."""
    environ = os.environ if environ is None else environ
    try:
        preload = jemalloc_environment(environ)
    except MallocChoiceError as error:
        print(f"error: {error}", file=sys.stderr)
        raise SystemExit(2) from None
    if preload is None:
        return
    print(f"malloc: jemalloc without purging ({preload['LD_PRELOAD']}); ZOO_MALLOC=glibc keeps glibc",
          file=sys.stderr, flush=True)
    sys.stdout.flush()
    execve(sys.executable, sys.orig_argv, {**environ, **preload})
