"""Train a recipe over one or more seeds.

    python tools/train.py recipes/cora_gat.yaml --seeds 0-9
    python tools/train.py recipes/cora_gat.yaml --set model.heads=4 --epochs 50 --out runs
    torchrun --nproc_per_node 2 tools/train.py recipes/zinc_siggate.yaml   # graph tasks, data-parallel
    torchrun --nproc_per_node 2 tools/train.py recipes/cora_ltga_edge_sampled.yaml   # node tasks with train.sampler
    python tools/train.py recipes/cora_ltga_edge_sampled.yaml --dist-config parts/cora/cora.json --ip-config ip_config.txt
        # DistDGL: a graph partitioned by tools/partition.py; every server and trainer runs this command
        # (DGL's tools/launch.py sets their roles); without DGL_DIST_MODE: standalone, 1 partition

Exit codes: 0 done, 1 data error, 2 bad recipe or arguments, 3 training diverged (a non-finite loss;
the message names the batch and what to change; the seed is recorded in its diverged.json and the
other seeds still train), 130 interrupted (rerun to resume).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo._malloc import preload_jemalloc  # noqa: E402

if __name__ == "__main__":
    preload_jemalloc()  # before torch loads: the command again with jemalloc, where the system has it

from zoo.data import DatasetError  # noqa: E402
from zoo.engine import RecipeError, load_recipe, run_folder, run_recipe  # noqa: E402
from zoo.engine.allocator import keep_freed_memory  # noqa: E402
from zoo.engine.checkpoint import CheckpointError  # noqa: E402
from zoo.engine.cli import add_run_options, sigterm_as_interrupt  # noqa: E402
from zoo.engine.devices import resolve_device  # noqa: E402
from zoo.engine.dist_graph_training import open_dist_graph, train_dist_graph  # noqa: E402
from zoo.engine.divergence import TrainingDiverged  # noqa: E402
from zoo.engine.recipe import parse_seeds  # noqa: E402
from zoo.engine.run_lock import RunBusyError  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("recipe", help="a YAML recipe, e.g. recipes/cora_gat.yaml")
    parser.add_argument("--seeds", help="seeds to run, e.g. 0-9 or 0,3,5 (default: the recipe's)")
    add_run_options(parser, "override a recipe key, e.g. --set model.heads=4 (repeatable)")
    parser.add_argument("--force", action="store_true", help="retrain seeds that already finished")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")
    parser.add_argument("--dist-config", help="train on DistDGL from this partition config (tools/partition.py's "
                                              "<out>/<dataset>.json); see zoo.engine.dist_graph_training")
    parser.add_argument("--ip-config", help="DistDGL: the file of server IPs and ports, one machine a line")
    args = parser.parse_args(argv)
    keep_freed_memory()
    if args.ip_config and not args.dist_config:
        print("error: --ip-config needs --dist-config (the partition config of tools/partition.py)", file=sys.stderr)
        return 2
    try:
        recipe = load_recipe(args.recipe, args.overrides, epochs=args.epochs)
        seeds = parse_seeds(args.seeds) if args.seeds is not None else None
        resolve_device(args.device)
    except (RecipeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    try:
        with sigterm_as_interrupt():  # `kill PID` stops it as Ctrl-C does
            if args.dist_config:
                data = open_dist_graph(recipe, args.dist_config, args.ip_config)
                diverged = []
                for seed in seeds if seeds is not None else recipe.seeds:
                    try:
                        train_dist_graph(recipe, data, seed, args.out, force=args.force)
                    except TrainingDiverged as err:  # recorded in its diverged.json; the next seed goes on
                        print(f"error: {err}", file=sys.stderr)
                        diverged.append(seed)
                if diverged:
                    return 3
            else:
                summary = run_recipe(recipe, args.out, seeds=seeds, force=args.force, progress=not args.quiet,
                                     device=args.device)
                if summary.get("diverged"):
                    print(f"error: seed {', '.join(map(str, summary['diverged']))} of {recipe.name} diverged (its "
                          "diverged.json has the message; --force retrains it)", file=sys.stderr)
                    return 3
    except DatasetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except (RecipeError, CheckpointError, RunBusyError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    except TrainingDiverged as err:
        print(f"error: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"\ninterrupted: the last checkpoint in {run_folder(recipe, args.out)} is intact; "
              "rerun the same command to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
