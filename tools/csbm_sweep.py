"""The LTGA paper's contextual-SBM sweep (Section 6): does a heavy-tailed q < 1 help where pooling
should beat pruning? Trains each model's Cora recipe (recipes/cora_<model>.yaml, its protocol and
hyperparameters) on seeded contextual-SBM cards (zoo.data.contextual_sbm_card: 1,000 nodes, 5 classes,
32 features, no degree correction) over homophily x mean degree x feature SNR, then prints the table.

    python tools/csbm_sweep.py --out runs/csbm      # the paper's grid: h 0.5, degree 5 and 20, SNR 0.1-2, 5 seeds
    python tools/csbm_sweep.py --out runs/csbm_h --homophily 0.1,0.3,0.5,0.7,0.9 --degrees 5 --snr 0.5
    python tools/report.py runs/csbm                # the same runs as the ordinary results table

Each cell's graph is drawn once (generator seed 0, or --graph-seed); the seeds vary initialisation and
dropout. Finished seeds are skipped, so a rerun only reports (or resumes). The cards are written to
<out>/cards (read through $ZOO_CARDS). Exit codes: 0 done, 1 a run failed on its data, 2 bad arguments, 130 interrupted (rerun to resume).
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from zoo._malloc import preload_jemalloc  # noqa: E402

if __name__ == "__main__":
    preload_jemalloc()  # before torch loads: the command again with jemalloc, where the system has it

from zoo.analysis.csbm_report import csbm_table, render_csbm  # noqa: E402
from zoo.analysis.runs import ReportError, collect_runs  # noqa: E402
from zoo.data.synthetic import contextual_sbm_card  # noqa: E402
from zoo.engine import RecipeError, load_recipe, run_sweep  # noqa: E402
from zoo.engine.allocator import keep_freed_memory  # noqa: E402
from zoo.engine.cli import RESUME_HINT, sigterm_as_interrupt  # noqa: E402
from zoo.engine.recipe import parse_seeds  # noqa: E402

MODELS = "gatv2,ltga_head,ltga_edge,qfrozen_0.5,qfrozen_0.8,qfrozen_1.0"
"""GATv2 and LTGA-Head / -Edge, and the frozen-q grid's q < 1 points beside q = 1 (the paper's comparison)."""


def _floats(text: str) -> list[float]:
    try:
        return [float(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a comma-separated list of numbers, e.g. 0.1,0.5,1,2")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default="runs/csbm", help="output root (default: runs/csbm)")
    parser.add_argument("--homophily", type=_floats, default=[0.5], help="edge homophily values (default: 0.5)")
    parser.add_argument("--degrees", type=_floats, default=[5.0, 20.0], help="mean degrees (default: 5,20)")
    parser.add_argument("--snr", type=_floats, default=[0.1, 0.5, 1.0, 2.0],
                        help="feature SNR, the class means' norm against unit noise (default: 0.1,0.5,1,2)")
    parser.add_argument("--models", default=MODELS, help=f"models with a recipes/cora_<model>.yaml (default: {MODELS})")
    parser.add_argument("--seeds", default="0-4", help="seeds (default: 0-4, as the paper)")
    parser.add_argument("--nodes", type=int, default=1000, help="nodes per graph (default: 1000)")
    parser.add_argument("--graph-seed", type=int, default=0, help="the generator's seed of every cell (default: 0)")
    parser.add_argument("--epochs", type=int, help="cap the number of epochs (a shorter schedule)")
    parser.add_argument("--markdown", type=Path, help="also write the table to this Markdown file")
    args = parser.parse_args(argv)
    keep_freed_memory()
    out = Path(args.out)
    try:
        seeds = parse_seeds(args.seeds)
        cards = [contextual_sbm_card(h, degree, snr, num_nodes=args.nodes, seed=args.graph_seed)
                 for h in args.homophily for degree in args.degrees for snr in args.snr]
        models = [m.strip() for m in args.models.split(",") if m.strip()]
        missing = [m for m in models if not (ROOT / "recipes" / f"cora_{m}.yaml").is_file()]
        if missing:
            raise RecipeError(f"no recipes/cora_<model>.yaml for {', '.join(missing)}; models are named as the "
                              "Cora recipes, e.g. gatv2, ltga_head, qfrozen_0.5")
        recipes = [load_recipe(ROOT / "recipes" / f"cora_{model}.yaml",
                               [f"dataset={card['name']}", f"name={card['name']}_{model}",
                                f"description={model} on the contextual SBM {card['name']} (LTGA paper, Section 6)"],
                               epochs=args.epochs)
                   for card in cards for model in models]
    except (RecipeError, ValueError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    folder = out / "cards"
    folder.mkdir(parents=True, exist_ok=True)
    for card in cards:
        (folder / f"{card['name']}.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
    os.environ["ZOO_CARDS"] = os.pathsep.join(filter(None, [str(folder), os.environ.get("ZOO_CARDS")]))
    try:
        with sigterm_as_interrupt():  # `kill PID` stops it as Ctrl-C does
            results = run_sweep(recipes, out, seeds=seeds)
    except KeyboardInterrupt:
        print(f"\n{RESUME_HINT}", file=sys.stderr)
        return 130
    try:
        names = {card["name"] for card in cards}
        runs = collect_runs([out])
        markdown = render_csbm(csbm_table(runs[runs.dataset.isin(names)]))
    except ReportError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    print("\n" + markdown, end="")
    if args.markdown:
        args.markdown.write_text(markdown)
    return 1 if any(isinstance(result, str) for result in results.values()) else 0


if __name__ == "__main__":
    sys.exit(main())
