"""Run a list of recipes over seeds, one after another (a recipe whose data is missing is
skipped and reported; the others still run). Exit code 1 if a recipe failed or was skipped, else
3 if a seed diverged (recorded in its diverged.json and left out of the summaries), else 0.

    python tools/sweep.py recipes/cora_*.yaml recipes/texas_ltga_*.yaml --seeds 0-9 --out runs/ltga
    python tools/sweep.py recipes/zinc_cpu_*.yaml --order seed --out runs/zinc_cpu   # seed 0 of all, then seed 1, ...
    python tools/sweep.py recipes/zinc_cpu_*.yaml --out runs/zinc_cpu --status     # what is done, under way, left
    python tools/sweep.py recipes/zinc_cpu_*.yaml --order seed --share --out runs/zinc_cpu   # twice: 2 jobs share it
    python tools/report.py runs/ltga
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo._malloc import preload_jemalloc  # noqa: E402

if __name__ == "__main__":
    preload_jemalloc()  # before torch loads: the command again with jemalloc, where the system has it

from zoo.engine import RecipeError, load_recipe, run_sweep  # noqa: E402
from zoo.engine.allocator import keep_freed_memory  # noqa: E402
from zoo.engine.checkpoint import CheckpointError  # noqa: E402
from zoo.engine.cli import RESUME_HINT, add_run_options, sigterm_as_interrupt  # noqa: E402
from zoo.engine.devices import resolve_device  # noqa: E402
from zoo.engine.experiment import SWEEP_ORDERS  # noqa: E402
from zoo.engine.recipe import parse_seeds  # noqa: E402
from zoo.engine.run_lock import RunBusyError  # noqa: E402
from zoo.engine.sweep_status import format_status, sweep_status  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipes", nargs="+", help="YAML recipes")
    parser.add_argument("--seeds", help="seeds, e.g. 0-9 (default: each recipe's)")
    add_run_options(parser, "override a key in every recipe (repeatable)")
    parser.add_argument("--order", choices=SWEEP_ORDERS, default="recipe",
                        help="recipe: every seed of a recipe, then the next recipe (default); seed: seed k of "
                             "every recipe before seed k+1, so a sweep stopped early leaves paired seeds")
    parser.add_argument("--force", action="store_true", help="retrain seeds that already finished")
    parser.add_argument("--progress", action="store_true",
                        help="show a progress bar per seed (where standard error is a file, as in a background "
                             "job's log: one line an epoch)")
    parser.add_argument("--share", action="store_true",
                        help="leave a seed that another job is training to it and go on, so the same sweep started "
                             "N times runs as N jobs dividing the seeds (without it, such a seed stops the sweep)")
    parser.add_argument("--status", action="store_true",
                        help="train nothing: list each recipe's seeds that are finished, under way (at which "
                             "epoch) or still to run, and the training time left (wall clock, and hours of one "
                             "core where runs recorded their CPU time)")
    args = parser.parse_args(argv)
    try:
        recipes = [load_recipe(path, args.overrides, epochs=args.epochs) for path in args.recipes]
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        resolve_device(args.device)
    except (RecipeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if args.status:
        try:
            print(format_status(sweep_status(recipes, args.out, seeds)))
        except CheckpointError as err:
            print(f"error: {err}", file=sys.stderr)
            return 2
        return 0
    keep_freed_memory()
    try:
        with sigterm_as_interrupt():  # `kill PID` stops it as Ctrl-C does
            results = run_sweep(recipes, args.out, seeds=seeds, force=args.force, progress=args.progress,
                                device=args.device, order=args.order, share=args.share)
    except (CheckpointError, RunBusyError, ValueError) as err:  # ValueError: run_sweep's own arguments
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{RESUME_HINT}", file=sys.stderr)
        return 130
    if any(isinstance(result, str) for result in results.values()):
        return 1
    return 3 if any(result.get("diverged") for result in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
