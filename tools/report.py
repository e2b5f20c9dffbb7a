"""Turn run folders into the results table (mean +- sd over seeds) with paired and rank tests.

    python tools/report.py runs/
    python tools/report.py runs/ runs2/ --models gat,gatv2,ltga_head --reference ltga_edge \
        --tuned qfrozen=qfrozen_*,entmax=entmax_* --markdown table1.md --csv table1.csv
    python tools/report.py runs/ --tuned qfrozen=qfrozen_* --tune-seeds 0-2   # pick on seeds 0-2 only
    python tools/report.py runs/ --reference ltga_edge --holm table   # Holm across every cell (the paper's Table 2)
    python tools/report.py runs/ltga --diagnostics    # also the LTGA attention diagnostics table
    python tools/report.py runs/ltga --diagnostics --agreement every_head   # label agreement as the paper counts it
    python tools/report.py runs/zinc_cpu --reference zinc_cpu_g1 --diagnostics   # + SigGate-GT mechanism tables
    python tools/report.py runs/ltga --pruning        # also pruning validity (the paper's Table 5 layout)
    python tools/report.py runs/ltga --timing         # also seconds per training epoch, as each run recorded
    python tools/report.py runs/cpu_4c --timing --by-allocator   # the time and peak memory per malloc setting
    python tools/report.py runs/zinc_cpu --per-seed   # also every cell seed by seed
    python tools/report.py runs/ltga --reference ltga_edge --plots figures/   # also the paper's figures as PNGs
    python tools/report.py runs/ltga --reference ltga_edge --paper ltga \
        --tuned qfrozen=qfrozen_*,entmax=entmax_* --oracle qfrozen=qfrozen_*   # the LTGA paper's numbers beside ours

--paper ltga writes each cell the LTGA paper reports as "ours [paper]" (its table named per row in the
notes), and gives avg, avg rank and the Friedman / Nemenyi tests twice: over the paper's datasets in the
runs (accuracy), and over all datasets (Tolokers and Minesweeper add ROC-AUC). The paper's own Avg. is
set beside ours only when the runs have all eight of its datasets. Rows match the paper by name: call
the tuned rows qfrozen and entmax as above. --oracle NAME=GLOB adds the row "NAME (test oracle; not a
baseline)": per dataset, the model with the best mean test score (the paper's Table 9 oracle), shown
but never ranked or tested.

--plots DIR writes the LTGA paper's Figures 2, 3, 4, 5, 7, 9 and 11 (zoo.analysis.figures.plots)
and names on stderr each file written and each figure or run left out, with what is missing. With
--paper, Figure 2 ranks over the paper's datasets only. It needs matplotlib (pip install -e '.[plots]').
--diagnostics, --pruning, --timing and --plots draw on the table's rows, in its order: --models, then
--reference.

Seeds whose training diverged (their diverged.json) have no result; a section after the table names
them with their message.

Prints Markdown to stdout. Exit codes: 0 done, 2 bad arguments or no usable runs.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.analysis.counterfactuals import LABEL_AGREEMENTS  # noqa: E402
from zoo.analysis.diagnostics_report import diagnostics_table, render_diagnostics  # noqa: E402
from zoo.analysis.mechanism_report import mechanism_runs, render_mechanism  # noqa: E402
from zoo.analysis.per_seed_report import render_per_seed  # noqa: E402
from zoo.analysis.pruning_report import pruning_table, render_pruning  # noqa: E402
from zoo.analysis.report import PAPERS, figure_table, render_report, report_table  # noqa: E402
from zoo.analysis.runs import ReportError, collect_runs, diverged_runs  # noqa: E402
from zoo.analysis.table_statistics import HOLM_FAMILIES  # noqa: E402
from zoo.analysis.tables import parse_tuned  # noqa: E402
from zoo.analysis.timing_report import render_timing, timing_table  # noqa: E402
from zoo.engine.recipe import RecipeError, parse_seeds  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("paths", nargs="+", help="run folders: roots such as runs/, or recipe / config folders")
    parser.add_argument("--models", help="rows in order, comma-separated (default: every model not in a --tuned row)")
    parser.add_argument("--reference", help="model compared against every other row by paired tests")
    parser.add_argument("--metric", default="main", help="main (each dataset's main metric) or a metric name")
    parser.add_argument("--split", default="test", choices=["test", "val"], help="split reported (default: test)")
    parser.add_argument("--tuned", action="append",
                        help="NAME=GLOB,...: one row per NAME picking, per dataset, the matching model with the best "
                             "mean validation main metric (may be repeated)")
    parser.add_argument("--oracle", action="append",
                        help="NAME=GLOB,...: one row 'NAME (test oracle; not a baseline)' per NAME picking, per "
                             "dataset, the matching model with the best mean TEST main metric; shown, never ranked or "
                             "tested (may be repeated)")
    parser.add_argument("--paper", choices=sorted(PAPERS),
                        help="set that paper's numbers beside ours (cited by table) and average / rank the "
                             "paper's datasets apart from the others")
    parser.add_argument("--tune-seeds", help="seeds (e.g. 0-2) whose mean validation score a --tuned row picks on "
                                             "(default: every seed of each candidate)")
    parser.add_argument("--diagnostics", action="store_true",
                        help="append the LTGA attention diagnostics (q range, zeros, counterfactuals) per model and dataset, "
                             "and for GPS / SigGate-GT runs the mechanism tables (gate statistics, attention entropy, "
                             "MAD at depth, stable rank)")
    parser.add_argument("--agreement", default="pairs", choices=list(LABEL_AGREEMENTS),
                        help="label agreement in --diagnostics: pairs ((edge, head) pairs, default) or every_head "
                             "(edges pruned by every head, the paper's)")
    parser.add_argument("--pruning", action="store_true",
                        help="append pruning validity in the paper's Table 5 layout (every-head label agreement)")
    parser.add_argument("--timing", action="store_true",
                        help="append seconds per training epoch, minutes per seed and the selected (best) epoch, "
                             "counting seeds still improving at their last epoch, from each run's metrics.json")
    parser.add_argument("--by-allocator", action="store_true",
                        help="with --timing: a row per malloc setting the seeds ran under (it changes time and memory)")
    parser.add_argument("--per-seed", action="store_true",
                        help="append each cell's score seed by seed (the numbers behind its mean, sd and paired tests)")
    parser.add_argument("--alpha", type=float, default=0.05, help="significance level (default: 0.05)")
    parser.add_argument("--holm", default="dataset", choices=list(HOLM_FAMILIES),
                        help="Holm family of the paired tests: dataset (within each dataset, default) or table "
                             "(every comparison of the table at once, as the paper's Table 2)")
    parser.add_argument("--markdown", type=Path, help="also write the report to this Markdown file")
    parser.add_argument("--csv", type=Path, help="also write the table (numbers, table units) to this CSV file")
    parser.add_argument("--plots", type=Path, metavar="DIR",
                        help="also write the paper's figures as PNGs into DIR (critical difference, reliability, "
                             "Lorenz curves, q_ij histograms and probe, q trajectories, gradient norm reaching q)")
    args = parser.parse_args(argv)
    try:
        models = [m.strip() for m in args.models.split(",") if m.strip()] if args.models else None
        tuned = parse_tuned(",".join(args.tuned)) if args.tuned else None
        tune_seeds = parse_seeds(args.tune_seeds) if args.tune_seeds else None
        oracle = parse_tuned(",".join(args.oracle), "--oracle") if args.oracle else None
        if args.by_allocator and not args.timing:
            raise ReportError("--by-allocator splits the --timing table; add --timing")
        if not 0 < args.alpha < 1:
            raise ReportError(f"alpha must lie in (0, 1), got {args.alpha}")
        table = report_table(args.paths, models, args.reference, args.metric, args.split, tuned, tune_seeds, oracle)
        markdown, frame = render_report(table, args.reference, args.alpha, args.holm, args.paper)
        if args.per_seed:
            markdown += "\n## Per seed\n\n" + render_per_seed(table)
        diverged = [row for row in diverged_runs(args.paths) if not models or row["model"] in {*models, args.reference}]
        if diverged:
            markdown += ("\n## Diverged seeds\n\nThese seeds have no result (their `diverged.json`), so the table's "
                         "means and paired tests leave them out:\n\n"
                         + "".join(f"* {row['recipe']} seed {row['seed']}: {row['message']}\n" for row in diverged))
        if args.diagnostics or args.pruning or args.timing or args.plots:
            every_run = collect_runs(args.paths)
            runs = _table_rows(every_run, models, args.reference)
        gps_diagnostics = args.diagnostics and bool(mechanism_runs(runs))
        if args.diagnostics and (not gps_diagnostics or _has_ltga_diagnostics(runs, args.agreement)):
            markdown += "\n## Attention diagnostics\n\n" + render_diagnostics(diagnostics_table(runs, args.agreement))
        if gps_diagnostics:
            markdown += "\n## SigGate-GT mechanism\n\n" + render_mechanism(runs)
        if args.pruning:
            markdown += "\n## Pruning validity\n\n" + render_pruning(pruning_table(runs))
        if args.timing:
            markdown += "\n## Training time\n\n" + render_timing(timing_table(runs, args.by_allocator))
        if args.plots:
            _write_figures(runs, figure_table(table, args.paper), args.plots, args.alpha)
    except (ReportError, RecipeError) as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    print(markdown, end="")
    if args.markdown:
        args.markdown.write_text(markdown)
    if args.csv:
        frame.to_csv(args.csv)
    return 0


def _write_figures(runs, table, folder: Path, alpha: float) -> None:
    """The figures into ``folder``; what was written and what was left out on stderr."""
    try:
        from zoo.analysis.figures import write_figures
    except ImportError as err:
        raise ReportError(f"--plots needs matplotlib ({err}); install it with pip install -e '.[plots]'") from None
    written, notes = write_figures(runs, table, folder, alpha)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    for path in written.values():
        print(f"wrote {path}", file=sys.stderr)


def _table_rows(every_run, models: list[str] | None, reference: str | None):
    """The runs of the results table's rows, in its order: --models, then --reference (every run
    without --models)."""
    if not models:
        return every_run
    order = list(dict.fromkeys([*models, *([reference] if reference else [])]))
    chosen = every_run[every_run.model.isin(order)]
    return chosen.iloc[chosen.model.map(order.index).to_numpy().argsort(kind="stable")]


def _has_ltga_diagnostics(runs, agreement: str) -> bool:
    try:
        diagnostics_table(runs, agreement)
    except ReportError:
        return False
    return True


if __name__ == "__main__":
    sys.exit(main())
