"""The SigGate-GT paper's synthetic stable-rank study (Tables 1-2), with paired tests over seeds.

    python tools/rank_study.py                       # Table 1 and Table 2 at the paper's scale, 5 seeds
    python tools/rank_study.py --seeds 0-9 --markdown rank_study.md

Needs no data and no GPU (about 10 s, mostly importing zoo). Prints Markdown: our numbers beside the
paper's. Exit codes: 0 done, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from zoo.analysis.paired_tests import paired_test  # noqa: E402
from zoo.analysis.rendering import markdown_table  # noqa: E402
from zoo.analysis.synthetic_rank import GATE_TARGET, rank_study  # noqa: E402
from zoo.engine.recipe import RecipeError, parse_seeds  # noqa: E402

PAPER_TABLE1 = {0: (3.172, 3.384), 1: (2.766, 2.973), 2: (3.267, 3.531), 3: (3.731, 3.979), 4: (2.967, 3.176)}
PAPER_MEAN = (3.181, 3.409, 7.17)
PAPER_CONCENTRATION = {0.5: 8.3, 1.0: 7.2, 1.5: 5.0, 2.0: 5.4, 3.0: 5.1}
PAPER_SPARSITY = {0.05: 7.4, 0.20: 7.2, 0.40: 6.6, 0.60: 6.2}
DEFAULT = {"concentration": 1.0, "masked": 0.2}
"""rank_trial's defaults, the paper's Table 1 setting."""


def _test_cell(study: dict) -> str:
    test = paired_test(study["gated"], study["ungated"])
    return f"{test['test']} p = {test['p_value']:.3g}"


def table1(seeds: list[int], study: dict) -> str:
    rows = []
    for seed, trial in zip(seeds, study["trials"]):
        paper = PAPER_TABLE1.get(seed)
        ours = f"{trial['ungated']:.3f} / {trial['gated']:.3f} ({100 * (trial['gated'] / trial['ungated'] - 1):+.2f}%)"
        theirs = f"{paper[0]:.3f} / {paper[1]:.3f} ({100 * (paper[1] / paper[0] - 1):+.2f}%)" if paper else "-"
        rows.append([str(seed), ours, theirs])
    mean = lambda xs: sum(xs) / len(xs)  # noqa: E731
    rows.append(["mean", f"{mean(study['ungated']):.3f} / {mean(study['gated']):.3f} ({study['gain']:+.2f}%)",
                 f"{PAPER_MEAN[0]:.3f} / {PAPER_MEAN[1]:.3f} ({PAPER_MEAN[2]:+.2f}%)"])
    header = (f"Table 1: stable rank without / with the gate (n = 64, d = 256, 8 heads, 20% masked), "
              f"{len(seeds)} seeds. Gate calibrated to mean {GATE_TARGET[0]}, sd {GATE_TARGET[1]}; attained "
              f"{study['gate_mean']:.3f}, {study['gate_sd']:.3f} (paper: 0.604, 0.193). Gated vs ungated over "
              f"seeds: {_test_cell(study)}; gated higher in {sum(g > u for g, u in zip(study['gated'], study['ungated']))}"
              f" of {len(seeds)} seeds. The paper's seeds are its own draws: compare the means.")
    return header + "\n\n" + "\n".join(markdown_table(["seed", "ours", "paper"], rows))


def table2(seeds: list[int], default: dict) -> str:
    """The sweeps; ``default`` is the Table 1 study, the sweeps' c = 1 / rho = 0.2 setting."""
    rows = []
    for name, key, paper in (("c", "concentration", PAPER_CONCENTRATION), ("rho", "masked", PAPER_SPARSITY)):
        for value, theirs in paper.items():
            study = default if value == DEFAULT[key] else rank_study(seeds, **{key: value})
            rows.append([f"{name} = {value:g}", f"{study['gain']:+.1f}%", f"{theirs:+.1f}%", _test_cell(study)])
    header = (f"Table 2: gain in mean stable rank from the gate, sweeping the attention concentration c "
              f"(at 20% masked) and the masked fraction rho (at c = 1), {len(seeds)} seeds each.")
    return header + "\n\n" + "\n".join(markdown_table(["setting", "ours", "paper", "paired test (ours)"], rows))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--seeds", default="0-4", help="seeds (default 0-4, the paper's 5)")
    parser.add_argument("--markdown", help="also write the tables to this file")
    args = parser.parse_args(argv)
    try:
        seeds = parse_seeds(args.seeds)
    except RecipeError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    if len(seeds) < 2:
        print(f"error: --seeds {args.seeds!r} gives one seed; the paired test needs 2 or more, e.g. 0-4",
              file=sys.stderr)
        return 2
    default = rank_study(seeds)
    text = table1(seeds, default) + "\n\n" + table2(seeds, default) + "\n"
    print(text)
    if args.markdown:
        Path(args.markdown).write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
