"""Tune a grid of recipes per dataset on validation over a few seeds, then run the pick on all seeds.

    python tools/tune.py recipes/cora_qfrozen_*.yaml --tune-seeds 0-2 --seeds 0-9 --out runs/ltga
    python tools/report.py runs/ltga --tuned qfrozen=qfrozen_* --tune-seeds 0-2

Recipes of several datasets may be given at once; each dataset gets its own pick. The report's
--tune-seeds must match, so that its tuned row shows the same pick. Exit codes: 0 done, 1 a
dataset could not run, 2 bad arguments, 130 interrupted (rerun the same command to resume).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo._malloc import preload_jemalloc  # noqa: E402

if __name__ == "__main__":
    preload_jemalloc()  # before torch loads: the command again with jemalloc, where the system has it

from zoo.engine import RecipeError, load_recipe  # noqa: E402
from zoo.engine.allocator import keep_freed_memory  # noqa: E402
from zoo.engine.cli import RESUME_HINT, add_run_options, sigterm_as_interrupt  # noqa: E402
from zoo.engine.devices import resolve_device  # noqa: E402
from zoo.engine.recipe import parse_seeds  # noqa: E402
from zoo.engine.run_lock import RunBusyError  # noqa: E402
from zoo.engine.tuning import tune_and_run  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipes", nargs="+", help="YAML recipes: the candidates (one grid per dataset)")
    parser.add_argument("--tune-seeds", default="0-2", help="seeds the pick is made on (default: 0-2)")
    parser.add_argument("--seeds", default="0-9", help="seeds the pick then runs on (default: 0-9)")
    add_run_options(parser, "override a key in every recipe (repeatable)")
    parser.add_argument("--progress", action="store_true",
                        help="show a progress bar per seed (where standard error is a file, as in a background "
                             "job's log: one line an epoch)")
    args = parser.parse_args(argv)
    keep_freed_memory()
    try:
        recipes = [load_recipe(path, args.overrides, epochs=args.epochs) for path in args.recipes]
        resolve_device(args.device)
        with sigterm_as_interrupt():  # `kill PID` stops it as Ctrl-C does
            picks = tune_and_run(recipes, args.out, tune_seeds=parse_seeds(args.tune_seeds),
                                 seeds=parse_seeds(args.seeds), progress=args.progress, device=args.device)
    except (RecipeError, ValueError, RunBusyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"\n{RESUME_HINT}", file=sys.stderr)
        return 130
    print("\npicks (validation only):")
    for dataset, record in picks.items():
        if "error" in record:
            print(f"  {dataset}: {record['error']}")
        else:
            pick = record["pick"]
            print(f"  {dataset}: {pick} (val {record['main_metric']} {record['validation'][pick]:.4f})")
    return 1 if any("error" in record for record in picks.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
