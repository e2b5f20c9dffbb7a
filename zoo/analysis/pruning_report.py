"""Pruning validity in the layout of the LTGA paper's Table 5, from the diagnostics LTGA runs record.

Per (model, dataset), mean ± sd over seeds of:

* ``sparsity``: the share of attention weights that are exactly 0, averaged over layers (every
  layer has the same edges and heads), in percent;
* ``learned``, ``all edges``, ``random``: the trained score, counterfactual A (q = 1 at inference,
  which restores every pruned edge) and counterfactual B (q = 1, then as many random zeros per
  neighbourhood and head as learned), in points of the main metric;
* ``agree pruned`` / ``agree kept``: the paper's label agreement (Section 5.2) of the edges pruned
  by every head and of those kept by at least one, training labels only, pooled over layers
  (each edge counts once per layer), in percent; '-' where no seed has such an edge, or for runs
  recorded before this definition was (they hold only the (edge, head) pairs count).

    python tools/report.py runs/ltga16/minesweeper_ltga_edge --pruning   # records in git
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from zoo.analysis.counterfactuals import LABEL_AGREEMENTS
from zoo.analysis.rendering import markdown_table
from zoo.analysis.runs import ReportError, per_seed_rows
from zoo.analysis.tables import PERCENT_METRICS, in_run_order

COLUMNS = ("sparsity", "learned", "all_edges", "random", "agree_pruned", "agree_kept")


def _pooled(layers: list[dict], part: str) -> float:
    """Label agreement of ``part`` (pruned / kept) over all layers' edges, NaN when there are none."""
    n = sum(layer[part]["n"] for layer in layers)
    if n == 0:
        return np.nan
    return 100.0 * sum(layer[part]["agreement"] * layer[part]["n"] for layer in layers if layer[part]["n"]) / n


def _seed_row(path: Path) -> dict | None:
    metrics = json.loads((path / "metrics.json").read_text())
    diagnostics = metrics.get("diagnostics")
    if not isinstance(diagnostics, dict) or "A_softmax" not in diagnostics.get("counterfactual", {}):
        return None  # not an LTGA q-softmax run
    scale = 100.0 if metrics.get("main_metric") in PERCENT_METRICS else 1.0
    cf = diagnostics["counterfactual"]
    layers = diagnostics.get(LABEL_AGREEMENTS["every_head"], [])
    return {"sparsity": 100.0 * float(np.mean([layer["exact_zero"] for layer in diagnostics["layers"]])),
            "learned": scale * cf["trained"], "all_edges": scale * cf["A_softmax"],
            "random": scale * cf.get("B_random_prune", np.nan),  # absent where undefined (underflow)
            "agree_pruned": _pooled(layers, "pruned"), "agree_kept": _pooled(layers, "kept")}


def pruning_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean and sd over seeds (columns ``<name>`` and ``<name>_sd`` for each of :data:`COLUMNS`)
    and ``n`` seeds, one row per (model, dataset) with q-softmax counterfactuals.

    Minesweeper's LTGA-Edge (test ROC-AUC: as trained, with every edge kept, with as many random
    edges pruned; the mean share of exact zeros, in %):

    >>> from zoo.analysis import collect_runs
    >>> table = pruning_table(collect_runs("runs/ltga16/minesweeper_ltga_edge"))  # records in git
    >>> table.loc[("ltga_edge", "minesweeper"), ["sparsity", "learned", "all_edges", "random", "n"]].round(2).to_dict()
    {'sparsity': 4.21, 'learned': 79.45, 'all_edges': 75.6, 'random': 74.57, 'n': 10.0}
    """
    rows = per_seed_rows(runs, _seed_row)
    if not rows:
        raise ReportError("no run has the pruning counterfactuals (metrics.json 'diagnostics' of a q-softmax LTGA run)")
    frame = pd.DataFrame(rows).drop(columns="seed")
    groups = frame.groupby(["model", "dataset"])
    table = groups.mean().join(groups.std().add_suffix("_sd"))
    table["n"] = groups.size()
    return in_run_order(table, runs)


def render_pruning(table: pd.DataFrame) -> str:
    """The pruning table as Markdown, mean ± sd to one decimal ('-' for none)."""

    def cell(row, name):
        mean, sd = row[name], row[f"{name}_sd"]
        return "-" if pd.isna(mean) else f"{mean:.1f}" + ("" if pd.isna(sd) else f" ± {sd:.1f}")

    header = ["model", "dataset", "n", "sparsity %", "learned", "all edges (A)", "random (B)", "agree pruned %",
              "agree kept %"]
    lines = [[model, dataset, str(int(row.n)), *(cell(row, name) for name in COLUMNS)]
             for (model, dataset), row in table.iterrows()]
    return "\n".join(markdown_table(header, lines) + [
        "", "The paper's Table 5 layout; mean ± sd over seeds. sparsity: attention weights exactly 0, mean over "
            "layers. learned / all edges / random: the trained score, with q = 1 at inference (every pruned edge "
            "restored), and with q = 1 and as many random zeros per neighbourhood and head as learned, in points of "
            "the main metric. agree: share of the edges (between training nodes) pruned by every head / kept by at "
            "least one whose ends share a label, pooled over layers (the paper's definition, Section 5.2)."]) + "\n"
