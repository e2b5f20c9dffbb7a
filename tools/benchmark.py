"""Benchmarks of the zoo, one subcommand per floor.

    python tools/benchmark.py ops                       # edge normalisers vs edge_softmax
    python tools/benchmark.py ops --edges 1e4 1e5 --heads 8 --repeats 5
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def _ops(args: argparse.Namespace) -> None:
    from zoo.ops.benchmark import run

    run(edges=[int(float(e)) for e in args.edges], heads=args.heads, repeats=args.repeats)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    ops = commands.add_parser("ops", help="edge_qsoftmax / edge_entmax / edge_sparsemax speed and memory")
    ops.add_argument("--edges", nargs="+", default=["1e4", "1e5", "1e6"], help="graph sizes in edges")
    ops.add_argument("--heads", type=int, default=8, help="attention heads (default 8)")
    ops.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (median)")
    ops.set_defaults(func=_ops)
    args = parser.parse_args(argv)
    args.func(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
