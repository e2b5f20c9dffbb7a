"""Benchmarks of the zoo, one subcommand per floor.

    python tools/benchmark.py ops                       # edge normalisers vs edge_softmax
    python tools/benchmark.py ops --edges 1e4 1e5 --heads 8 --repeats 5
    python tools/benchmark.py layers                    # LTGA-Head / LTGA-Edge step vs GATv2 step
    python tools/benchmark.py layers --nodes 3327 --edges 9104 --features 3703 --density 0.0085  # CiteSeer-like,
                                                        # plus LTGA-Head with sparse_features
    python tools/benchmark.py gps                       # SigGate-GT step vs ungated GPS step
    python tools/benchmark.py gps --recipe recipes/zinc_siggate.yaml --models siggate_gt   # the paper's ZINC model, updated as the trainer does
    python tools/benchmark.py gps --recipe recipes/zinc_siggate.yaml --models siggate_gt --profile  # top operators
    python tools/benchmark.py gps --batch-size 128 --peer pyg   # against PyG's GPSConv (pip install -e ".[bench]")
    python tools/benchmark.py gps --recipe recipes/zinc_siggate.yaml --models siggate_gt --normaliser qsoftmax
                                                        # learned q-softmax global attention vs SigGate-GT (issue 18)
    python tools/benchmark.py gps --recipe recipes/peptides_func_cpu_siggate.yaml --models siggate_gt --batch-size 64 \
        --atoms 40-400 --one-block --repeats 3       # global attention in size groups vs one padded block
    python tools/benchmark.py gps --recipe recipes/molhiv_cpu_siggate.yaml --models siggate_gt --batch-size 256 \
        --dataset molhiv --repeats 5                 # real molhiv training batches (ZOO_DATA for the offline copy)
    OMP_NUM_THREADS=1 python tools/benchmark.py gps --recipe recipes/molhiv_cpu_siggate.yaml --models siggate_gt \
        --batch-size 256 --dataset molhiv --min-width 64 --clock cpu --repeats 9   # size groups from 32 vs 64 nodes
    OMP_NUM_THREADS=1 python tools/benchmark.py gps --recipe recipes/molhiv_cpu_siggate.yaml --batch-size 256 \
        --dataset molhiv --pure-ops --clock cpu --repeats 9   # fused GatedGCN kernels vs the pure-torch path
    python tools/benchmark.py aggregate                 # edge_weighted_sum vs DGL update_all (Tolokers-sized)
    python tools/benchmark.py logits                    # edge_gatv2_logits (fused, pure torch) vs the materialised
                                                        # [E, H, F] logits
    python tools/benchmark.py logits --without-materialised   # fused vs pure torch only (no 9 GB peak)
    python tools/benchmark.py scale                     # LTGA-Edge seeds/s and peak RSS: full batch vs mini-batch
                                                        # vs 2 torchrun ranks, synthetic graphs of 1e5 and 1e6 nodes
    python tools/benchmark.py scale --nodes 2000 --batches 2   # a tiny run (seconds)
    python tools/benchmark.py allocator                 # the ZINC step with glibc's malloc defaults vs
                                                        # zoo.engine.allocator.keep_freed_memory (what training uses)
    python tools/benchmark.py allocator --recipe recipes/molhiv_cpu_siggate.yaml --batch-size 256 --atoms 10-60 \
        --batches 8 --steps 40 --pairs 3 --jemalloc /tmp/jemalloc/usr/lib/x86_64-linux-gnu/libjemalloc.so.2
                                                        # + peak memory over batches of varying size, and jemalloc
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tools.benchmarks.allocator import run as benchmark_allocator  # noqa: E402
from tools.benchmarks.models import CLOCKS, benchmark_aggregate, benchmark_gps  # noqa: E402
from tools.benchmarks.models import benchmark_layers, benchmark_logits  # noqa: E402
from tools.benchmarks.ops import run as benchmark_ops  # noqa: E402
from tools.benchmarks.scale import MODES as SCALE_MODES  # noqa: E402
from tools.benchmarks.scale import run as benchmark_scale  # noqa: E402
from zoo.data import DatasetError  # noqa: E402
from zoo.engine.allocator import keep_freed_memory  # noqa: E402
from zoo.engine.recipe import RecipeError  # noqa: E402


def _ops(args: argparse.Namespace) -> None:
    benchmark_ops(edges=[int(float(e)) for e in args.edges], heads=args.heads, repeats=args.repeats)


def _layers(args: argparse.Namespace) -> None:
    benchmark_layers(nodes=args.nodes, edges=int(float(args.edges)), feats=args.features, repeats=args.repeats,
                     density=args.density)


def _gps(args: argparse.Namespace) -> None:
    keep_freed_memory()  # as tools/train.py does: the step as the trainer runs it
    benchmark_gps(batch_size=args.batch_size, repeats=args.repeats, recipe=args.recipe, models=tuple(args.models),
                  profile=args.profile if args.profile is not None else 0, top=args.top, peer=args.peer,
                  normaliser=args.normaliser, atoms=_atoms(args.atoms), one_block=args.one_block,
                  dataset=args.dataset, min_widths=tuple(map(_width, args.min_width)), clock=args.clock,
                  pure_ops=args.pure_ops)


class UsageError(ValueError):
    """A command-line value the benchmarks cannot use."""


def _atoms(text: str) -> int | tuple[int, int]:
    """``23`` or ``40-400`` (each molecule's size drawn from the range)."""
    low, _, high = text.partition("-")
    if not (low.isdigit() and int(low) > 0 and (not high or high.isdigit() and int(high) >= int(low))):
        raise UsageError(f"--atoms {text!r} is not a molecule size; give N or LOW-HIGH, such as 23 or 40-400")
    return (int(low), int(high)) if high else int(low)


def _width(text: str) -> int:
    """A size-group width in nodes, at least 1."""
    if not text.isdigit() or int(text) < 1:
        raise UsageError(f"--min-width {text!r} is not a width in nodes; give a whole number such as 64")
    return int(text)


def _aggregate(args: argparse.Namespace) -> None:
    benchmark_aggregate(nodes=args.nodes, edges=int(float(args.edges)), heads=args.heads, feats=args.features,
                        repeats=args.repeats)


def _logits(args: argparse.Namespace) -> None:
    benchmark_logits(nodes=args.nodes, edges=int(float(args.edges)), heads=args.heads, feats=args.features,
                     repeats=args.repeats, chunk_powers=tuple(args.chunk_powers),
                     materialised=not args.without_materialised)


def _scale(args: argparse.Namespace) -> None:
    benchmark_scale(sizes=[int(float(n)) for n in args.nodes], modes=args.modes, recipe=args.recipe,
                    batches=args.batches, repeats=args.repeats, timeout=args.timeout)


def _allocator(args: argparse.Namespace) -> None:
    if args.jemalloc is not None and not Path(args.jemalloc).is_file():
        raise UsageError(f"--jemalloc {args.jemalloc}: no such file; give the path of libjemalloc.so.2 (README "
                         "'Training': apt-get download libjemalloc2 && dpkg -x libjemalloc2_*.deb /tmp/jemalloc)")
    if args.batches < 1:
        raise UsageError(f"--batches {args.batches}: give at least 1 batch")
    benchmark_allocator(recipe=args.recipe, pairs=args.pairs, steps=args.steps, batch_size=args.batch_size,
                        atoms=_atoms(args.atoms), batches=args.batches, jemalloc=args.jemalloc)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    commands = parser.add_subparsers(dest="command", required=True)
    ops = commands.add_parser("ops", help="edge_qsoftmax / edge_entmax / edge_sparsemax speed and memory")
    ops.add_argument("--edges", nargs="+", default=["1e4", "1e5", "1e6"], help="graph sizes in edges")
    ops.add_argument("--heads", type=int, default=8, help="attention heads (default 8)")
    ops.add_argument("--repeats", type=int, default=5, help="timed runs per measurement (median)")
    ops.set_defaults(func=_ops)
    layers = commands.add_parser("layers", help="training step of LTGA-Head and LTGA-Edge against GATv2")
    layers.add_argument("--nodes", type=int, default=2708, help="nodes of the random graph (default: Cora's)")
    layers.add_argument("--edges", default="10556", help="edges before self-loops (default: Cora's)")
    layers.add_argument("--features", type=int, default=1433, help="input features (default: Cora's)")
    layers.add_argument("--repeats", type=int, default=20, help="timed steps per model (median)")
    layers.add_argument("--density", type=float, help="0/1 bag-of-words features at this density, and a "
                                                       "row for LTGA-Head with sparse_features")
    layers.set_defaults(func=_layers)
    gps = commands.add_parser("gps", help="training step of SigGate-GT against the ungated GPS model")
    gps.add_argument("--batch-size", type=int, default=32, help="molecules per batch (default 32, ZINC's)")
    gps.add_argument("--repeats", type=int, default=20, help="timed steps per model (median)")
    gps.add_argument("--recipe", help="build the models from this SigGate-GT recipe's model section, e.g. "
                                      "recipes/zinc_siggate.yaml (GatedGCN, LapPE 16 + RWSE 16, GELU FFN); "
                                      "gps is the same model without the gate")
    gps.add_argument("--models", nargs="+", choices=("gps", "siggate_gt"), default=["gps", "siggate_gt"],
                     help="models to time (ratios are to the first)")
    gps.add_argument("--profile", type=int, nargs="?", const=5, metavar="STEPS",
                     help="profile STEPS (default 5) training steps of the last of --models with torch.profiler "
                          "and print the top operators by self CPU time, instead of timing")
    gps.add_argument("--top", type=int, default=25, help="operators to print with --profile")
    gps.add_argument("--peer", choices=("pyg",), help="also time PyG's GPSConv layers in the same model (equal "
                                                      "parameter count; needs torch-geometric==2.6.1, the bench extra)")
    gps.add_argument("--normaliser", choices=("qsoftmax", "entmax", "sparsemax", "softmax"),
                     help="also time sparsegate_gt: the siggate_gt model whose global attention normalises with "
                          "this (qsoftmax: learned q per head; entmax: learned alpha per head), timed last")
    gps.add_argument("--atoms", default="23", help="atoms per random molecule: N, or LOW-HIGH to draw each size "
                                                   "from that range (default 23, ZINC's; 40-400 is Peptides-like)")
    gps.add_argument("--one-block", action="store_true",
                     help="also time each model with its global attention over one block padded to the batch's "
                          "largest graph, as before the size groups of zoo.nn.gated_attention")
    gps.add_argument("--min-width", nargs="+", default=[], metavar="W",
                     help="also time each model with its attention's size groups starting at W nodes instead of "
                          "the checkout's zoo.nn.gated_attention.GROUP_MIN_WIDTH, one row per W")
    gps.add_argument("--pure-ops", action="store_true",
                     help="also time each model with the fused CPU kernels off (ZOO_FUSED_OPS=0's pure-torch paths: "
                          "GatedGCN's message passing by index_select / index_add_), step by step in the same run")
    gps.add_argument("--clock", choices=tuple(CLOCKS), default="wall",
                     help="wall: elapsed time (default); cpu: the process's CPU time, steadier beside other jobs")
    gps.add_argument("--dataset", help="time on this dataset card's training batches (e.g. molhiv, peptides_func; "
                                       "loaded as the trainer loads it, offline with ZOO_DATA) instead of random "
                                       "molecules; --atoms is then unused")
    gps.set_defaults(func=_gps)
    for name, run, repeats, what in (("aggregate", _aggregate, 5, "attention aggregation against DGL's update_all"),
                                      ("logits", _logits, 3, "GATv2 attention logits against the materialised "
                                                              "computation")):
        op = commands.add_parser(name, help=what)
        op.add_argument("--nodes", type=int, default=11758, help="nodes (default: Tolokers')")
        op.add_argument("--edges", default="1038000", help="edges before self-loops (default: Tolokers', both directions)")
        op.add_argument("--heads", type=int, default=8, help="heads (default 8)")
        op.add_argument("--features", type=int, default=64, help="features per head (default 64)")
        op.add_argument("--repeats", type=int, default=repeats, help="timed runs per op (median)")
        if name == "logits":
            op.add_argument("--chunk-powers", type=int, nargs="+", default=[], metavar="K",
                            help="also time edge_gatv2_logits' pure-torch path with chunks of 2^K elements "
                                 "(e.g. 14 16 18 20 24)")
            op.add_argument("--without-materialised", action="store_true",
                            help="leave out the materialised logits (about 9 GB at the defaults); ratios are then "
                                 "to the pure-torch path")
        op.set_defaults(func=run)
    scale = commands.add_parser("scale", help="seeds/s and peak RSS: full batch, mini-batch, 2 ranks (issue 17)")
    scale.add_argument("--nodes", nargs="+", default=["1e5", "1e6"], help="synthetic graph sizes in nodes "
                                                                          "(10 edges a node; default 1e5 1e6)")
    scale.add_argument("--modes", nargs="+", choices=SCALE_MODES, default=list(SCALE_MODES),
                       help="full batch, mini-batch on one process, mini-batch on 2 torchrun ranks")
    scale.add_argument("--recipe", default="recipes/cora_ltga_edge_sampled.yaml",
                       help="the node recipe whose model and train.sampler run (default: LTGA-Edge, fanouts [10, 10])")
    scale.add_argument("--batches", type=int, default=20, help="timed mini-batches per run (default 20)")
    scale.add_argument("--repeats", type=int, default=1, help="timed full-batch steps per run (default 1)")
    scale.add_argument("--timeout", type=float, default=3600, help="seconds before a run is stopped")
    scale.set_defaults(func=_scale)
    allocator = commands.add_parser("allocator", help="a training step with glibc's malloc defaults against "
                                                      "zoo.engine.allocator.keep_freed_memory")
    allocator.add_argument("--recipe", default="recipes/zinc_siggate.yaml",
                           help="the SigGate-GT recipe whose model steps (default: the paper's ZINC model)")
    allocator.add_argument("--pairs", type=int, default=5,
                           help="rounds of fresh worker processes, one per setting (default 5)")
    allocator.add_argument("--steps", type=int, default=20, help="timed steps per worker (median; default 20)")
    allocator.add_argument("--batch-size", type=int, default=32, help="molecules per batch (default 32, ZINC's)")
    allocator.add_argument("--atoms", default="23", help="atoms per random molecule: N or LOW-HIGH (default 23)")
    allocator.add_argument("--batches", type=int, default=1,
                           help="distinct random batches, cycled (default 1; several with --atoms LOW-HIGH vary "
                                "in size, as real batches do, which is what fragments a heap)")
    allocator.add_argument("--jemalloc", metavar="PATH",
                           help="also measure jemalloc without purging, and purging freed pages "
                                "after about a second, preloading this libjemalloc.so.2")
    allocator.set_defaults(func=_allocator)
    args = parser.parse_args(argv)
    try:
        args.func(args)
    except (DatasetError, RecipeError, UsageError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
