"""Command-line options shared by the training tools (train, sweep, tune), and their handling
of ``kill``."""
from __future__ import annotations

import argparse
import contextlib
import signal
import threading

RESUME_HINT = ("interrupted: finished seeds are kept and the running one resumes from its last "
               "checkpoint; rerun the same command to continue")


def add_run_options(parser: argparse.ArgumentParser, set_help: str) -> None:
    """Add ``--set``, ``--epochs``, ``--out`` and ``--device`` (read by ``load_recipe`` and the runners)."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=set_help)
    parser.add_argument("--epochs", type=int, help="cap the number of epochs (a shorter schedule)")
    parser.add_argument("--out", default="runs", help="output root (default: runs)")
    parser.add_argument("--device", default="cpu",
                        help="cpu (default), cuda, cuda:<index> or auto (CUDA when available); not part of the recipe")


def _interrupt(signum, frame):
    raise KeyboardInterrupt


@contextlib.contextmanager
def sigterm_as_interrupt():
    """Within the block, SIGTERM (``kill PID``) raises ``KeyboardInterrupt`` as Ctrl-C does, so a
    tool stops the same way: its resume hint and exit code 130. A job started in the background
    (``nohup ... &``) ignores SIGINT, which leaves ``kill`` as the way to stop it. The previous
    handler is restored on leaving; outside the main thread (where Python cannot set handlers)
    nothing changes.

    >>> with sigterm_as_interrupt():
    ...     pass  # run_recipe(...) here
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = signal.signal(signal.SIGTERM, _interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
