"""Progress of long loops, shared by every floor: a tqdm bar on a terminal; where standard error
is a file or a pipe (a background job's log), a plain line every :data:`LINE_EVERY` seconds
instead of a bar's redraws, so a log stays readable with ``tail`` and ``grep``.
"""
from __future__ import annotations

import sys
import time
from typing import Callable, Iterable, Iterator, TypeVar

from tqdm.auto import tqdm

T = TypeVar("T")

LINE_EVERY = 60.0
"""Seconds between the lines :func:`progress` writes in a log."""


def on_terminal() -> bool:
    """True when standard error is a terminal (a bar), False in a log or a pipe (plain lines)."""
    return sys.stderr.isatty()


def progress(items: Iterable[T], desc: str, total: int | None = None, *, start: int = 0, enabled: bool = True,
             unit: str = "it", size: Callable[[T], int] | None = None, bar_every: float = 0.1,
             clock=time.perf_counter) -> Iterator[T]:
    """``items`` (``start`` of ``total`` already done; ``total`` defaults to ``len(items)``): a bar
    redrawn at most every ``bar_every`` seconds on a terminal, a line such as ``"PE lap16-rw16:
    5000/15535 graphs, 60 s"`` every :data:`LINE_EVERY` seconds in a log (none after the last
    item), nothing unless ``enabled``. ``size`` counts each item as ``size(item)`` units instead of
    one (e.g. ``len`` of each chunk of a download; with ``unit="B"`` a log shows ``"1.05MB/2.10MB"``).

    >>> [n * n for n in progress(range(4), "squares", unit="numbers")]  # the bar or lines go to stderr
    [0, 1, 4, 9]
    """
    if not enabled:
        yield from items
        return
    if total is None and hasattr(items, "__len__"):
        total = len(items)
    amount = size or (lambda _: 1)
    if on_terminal():
        with tqdm(desc=desc, total=total, initial=start, unit=unit, unit_scale=unit == "B", mininterval=bar_every,
                  leave=False, dynamic_ncols=True) as bar:
            for item in items:
                yield item
                bar.update(amount(item))
        return
    number, suffix = (lambda n: tqdm.format_sizeof(n, "B"), "") if unit == "B" else (str, f" {unit}")
    began = said = clock()
    done = start
    for item in items:
        yield item
        done += amount(item)
        now = clock()
        if now - said >= LINE_EVERY and done != total:
            shown = number(done) + ("" if total is None else f"/{number(total)}")
            print(f"{desc}: {shown}{suffix}, {now - began:.0f} s", file=sys.stderr, flush=True)
            said = now
