"""Mean and standard deviation of final metrics over seeds, and a plain-text table of them."""
from __future__ import annotations

import statistics


def summarize_seeds(runs: list[dict]) -> dict:
    """``{split: {metric: {"mean", "sd", "n", "values"}}}`` over the ``final`` block of each run.

    sd is the sample standard deviation (n - 1); it is 0.0 for a single seed.

    >>> summarize_seeds([{"final": {"test": {"accuracy": 0.8}}}, {"final": {"test": {"accuracy": 0.6}}}])["test"]["accuracy"]["mean"]
    0.7
    """
    if not runs:
        raise ValueError("no finished runs to summarise")
    summary: dict = {}
    for split in runs[0]["final"]:
        summary[split] = {}
        for name in runs[0]["final"][split]:
            values = [run["final"][split][name] for run in runs]
            summary[split][name] = {
                "mean": statistics.fmean(values),
                "sd": statistics.stdev(values) if len(values) > 1 else 0.0,
                "n": len(values),
                "values": values,
            }
    return summary


def format_summary(summary: dict, splits: tuple[str, ...] = ("val", "test")) -> str:
    """A table with one row per metric and a ``mean +- sd`` column per split."""
    names = list(summary[splits[0]])
    n = summary[splits[0]][names[0]]["n"]
    width = max(len(name) for name in names)
    lines = [f"{'metric':<{width}}  " + "  ".join(f"{split + f' (n={n})':>20}" for split in splits)]
    for name in names:
        cells = [f"{summary[s][name]['mean']:.4f} +- {summary[s][name]['sd']:.4f}" for s in splits]
        lines.append(f"{name:<{width}}  " + "  ".join(f"{cell:>20}" for cell in cells))
    return "\n".join(lines)
