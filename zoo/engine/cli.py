"""Command-line options shared by the training tools (train, sweep, tune)."""
from __future__ import annotations

import argparse

RESUME_HINT = ("interrupted: finished seeds are kept and the running one resumes from its last "
               "checkpoint; rerun the same command to continue")


def add_run_options(parser: argparse.ArgumentParser, set_help: str) -> None:
    """Add ``--set``, ``--epochs``, ``--out`` and ``--device`` (read by ``load_recipe`` and the runners)."""
    parser.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE", help=set_help)
    parser.add_argument("--epochs", type=int, help="cap the number of epochs (a shorter schedule)")
    parser.add_argument("--out", default="runs", help="output root (default: runs)")
    parser.add_argument("--device", default="cpu",
                        help="cpu (default), cuda, cuda:<index> or auto (CUDA when available); not part of the recipe")
