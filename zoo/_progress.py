"""Progress of long loops, shared by every floor: a tqdm bar on a terminal; where standard error
is a file or a pipe (a background job's log), a plain line every :data:`LINE_EVERY` seconds
instead of a bar's redraws, so a log stays readable with ``tail`` and ``grep``.
"""
from __future__ import annotations

import sys
import time
from typing import Iterable, Iterator, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

LINE_EVERY = 60.0
"""Seconds between the lines :func:`progress` writes in a log."""


def progress(items: Iterable[T], desc: str, total: int | None = None, *, start: int = 0, enabled: bool = True,
             unit: str = "it", bar_every: float = 0.1, clock=time.perf_counter) -> Iterator[T]:
    """``items`` (``start`` of ``total`` already done; ``total`` defaults to ``len(items)``): a bar
    redrawn at most every ``bar_every`` seconds on a terminal, a line such as ``"PE lap16-rw16:
    5000/15535 graphs, 60 s"`` every :data:`LINE_EVERY` seconds in a log (none after the last
    item), nothing unless ``enabled``.

    >>> for g in progress(graphs, "PE lap16-rw16", unit="graphs"):  # doctest: +SKIP
    ...     encode(g)
    """
    if not enabled:
        yield from items
        return
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    if sys.stderr.isatty():
        yield from tqdm(items, desc=desc, total=total, initial=start, unit=unit, mininterval=bar_every, leave=False,
                        dynamic_ncols=True)
        return
    began = said = clock()
    for done, item in enumerate(items, start=start + 1):
        yield item
        now = clock()
        if now - said >= LINE_EVERY and done != total:
            print(f"{desc}: {done}{'' if total is None else f'/{total}'} {unit}, {now - began:.0f} s",
                  file=sys.stderr, flush=True)
            said = now
