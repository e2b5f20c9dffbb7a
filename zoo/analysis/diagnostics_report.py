"""LTGA attention diagnostics over seeds: does q leave 1, does attention prune, does it matter?

Reads the ``diagnostics`` block and the per-epoch q means that ``tools/train.py`` writes into each
LTGA run's ``metrics.json`` and summarises them per (model, dataset), averaging over seeds:

* ``q_min`` / ``q_max``: the smallest and largest per-head mean q at the selected (best) epoch,
  over layers and heads, averaged over seeds (1.0 and 1.0: q never left 1);
* ``zeros_l<k>``: the share of attention weights that are exactly 0 in layer k;
* ``gini``: the Gini coefficient of each neighbourhood's weights (0: uniform), mean over nodes,
  heads and layers. Near 0, q barely matters: for logit gaps x, q changes the log weights by
  about -(q - 1) x^2 / 2, second order in x;
* ``cf_a`` / ``cf_c``: counterfactual A (q forced to 1) and C (q clamped to >= 1) minus the
  trained score, in points of the run's main metric;
* ``agree_pruned`` / ``agree_kept``: label agreement of pruned and kept edges (training labels
  only), averaged over the seeds and layers where such edges exist; ``agreement`` picks the
  definition (:data:`zoo.analysis.counterfactuals.LABEL_AGREEMENTS`): ``pairs`` ((edge, head)
  pairs, the default) or ``every_head`` (edges pruned by every head, the paper's).

Runs of the paper's depth sweep and ablation recipes add their own tables below it (rendered into
the table's ``attrs["sections"]``): Table 19's score / Dirichlet energy / MAD per depth
(:mod:`zoo.analysis.depth_report`) and Tables 13-18's value -> score, mean q, ECE
(:mod:`zoo.analysis.ablation_report`).

    python tools/report.py runs/ltga --diagnostics
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from zoo.analysis.ablation_report import ablation_table, render_ablation
from zoo.analysis.counterfactuals import LABEL_AGREEMENTS
from zoo.analysis.depth_report import depth_table, render_depth
from zoo.analysis.rendering import markdown_table
from zoo.analysis.runs import ReportError, per_seed_rows
from zoo.analysis.tables import PERCENT_METRICS, in_run_order

AGREEMENT_NOTES = {
    "pairs": "share of pruned / kept edges (between training nodes) whose ends share a label.",
    "every_head": "share of the edges (between training nodes) pruned by every head / kept by at least one "
                  "whose ends share a label (the paper's definition, Section 5.2).",
}
"""The footnote of each label-agreement definition (``pairs``: as every report has said)."""


def _seed_row(path: Path, agreement: str = "pairs") -> dict | None:
    metrics = json.loads((path / "metrics.json").read_text())
    diagnostics = metrics.get("diagnostics")
    if not isinstance(diagnostics, dict) or "counterfactual" not in diagnostics:
        return None  # not an LTGA run (or a SigGate-GT one, whose diagnostics are per gate)
    best = next((row for row in metrics.get("curves", []) if row.get("epoch") == metrics.get("best_epoch")), {})
    q = [value for key, value in best.items() if key.startswith("q_mean/")]
    scale = 100.0 if metrics.get("main_metric") in PERCENT_METRICS else 1.0
    cf = diagnostics["counterfactual"]
    row = {"q_min": min(q) if q else np.nan, "q_max": max(q) if q else np.nan}
    for name, key in (("cf_a", "A_softmax"), ("cf_c", "C_clamp_q")):
        row[name] = scale * (cf[key] - cf["trained"]) if key in cf else np.nan
    for k, layer in enumerate(diagnostics.get("layers", []), 1):
        row[f"zeros_l{k}"] = layer["exact_zero"]
    gini = [layer["gini"] for layer in diagnostics.get("layers", []) if "gini" in layer]
    row["gini"] = float(np.mean(gini)) if gini else np.nan
    for part in ("pruned", "kept"):
        values = [layer[part]["agreement"] for layer in diagnostics.get(LABEL_AGREEMENTS[agreement], [])
                  if layer[part]["agreement"] is not None]
        row[f"agree_{part}"] = float(np.mean(values)) if values else np.nan
    return row


def diagnostics_table(runs: pd.DataFrame, agreement: str = "pairs") -> pd.DataFrame:
    """Mean over seeds of each diagnostic, one row per (model, dataset) that has LTGA diagnostics.

    ``runs`` is :func:`zoo.analysis.runs.collect_runs` output (its ``path`` column is read);
    ``agreement`` the label-agreement definition (runs recorded before ``every_head`` existed show
    none). The definition is kept in ``table.attrs["agreement"]``, and the Markdown of the depth-sweep
    and ablation tables of ``runs`` (:func:`~zoo.analysis.depth_report.depth_table`,
    :func:`~zoo.analysis.ablation_report.ablation_table`) in ``table.attrs["sections"]``; the
    table itself is empty when only those runs are present.

    >>> from zoo.analysis import collect_runs
    >>> runs = collect_runs(["runs/ltga16/cora_ltga_edge", "runs/ltga16/cora_ltga_head"])  # records in git
    >>> diagnostics_table(runs)[["q_min", "q_max", "zeros_l2", "agree_kept"]].round(3)
                       q_min  q_max  zeros_l2  agree_kept
    model     dataset
    ltga_edge cora     0.908  1.411     0.007       0.809
    ltga_head cora     0.979  1.132     0.000       0.810
    """
    if agreement not in LABEL_AGREEMENTS:
        raise ReportError(f"label agreement {agreement!r} is not one of {', '.join(LABEL_AGREEMENTS)}")
    rows = per_seed_rows(runs, lambda path: _seed_row(path, agreement))
    depth, ablation = depth_table(runs), ablation_table(runs)
    if not rows and depth.empty and ablation.empty:
        raise ReportError("no run has LTGA attention diagnostics (metrics.json 'diagnostics' with counterfactuals), "
                          "and none is of a depth-sweep (<dataset>_depth<L>_<model>) or ablation "
                          "(<dataset>_ablate_<parameter>_<value>) recipe")
    table = pd.DataFrame()
    if rows:
        frame = pd.DataFrame(rows)
        table = frame.drop(columns="seed").groupby(["model", "dataset"]).mean()
        table["n"] = frame.groupby(["model", "dataset"]).size()
        table = in_run_order(table, runs)
    # rendered here: pandas copies attrs into every derived frame, and compares them on concat
    sections = [("Depth and over-smoothing (the LTGA paper's Table 19)", depth, render_depth),
                ("Ablations (the LTGA paper's Tables 13-18)", ablation, render_ablation)]
    table.attrs.update(agreement=agreement, sections=[f"### {title}\n\n{render(frame)}"
                                                      for title, frame, render in sections if not frame.empty])
    return table


def render_diagnostics(table: pd.DataFrame) -> str:
    """The diagnostics table as Markdown (NaN shown as '-'), then the depth-sweep and ablation
    sections of its ``attrs``, each under its own heading."""
    parts = [_render_attention(table)] if len(table) else []
    return "\n".join(parts + table.attrs.get("sections", []))


def _render_attention(table: pd.DataFrame) -> str:
    zeros = sorted((c for c in table.columns if c.startswith("zeros_l")), key=lambda c: int(c[7:]))
    header = ["model", "dataset", "n", "q min", "q max", *(f"zeros L{c[7:]} %" for c in zeros), "Gini",
              "A: q=1", "C: q>=1", "agree pruned", "agree kept"]
    rows = []

    def fmt(value, spec):
        return "-" if pd.isna(value) else format(value, spec)

    for (model, dataset), row in table.iterrows():
        cells = [model, dataset, str(int(row.n)), fmt(row.q_min, ".2f"), fmt(row.q_max, ".2f"),
                 *(fmt(100 * row[c], ".1f") for c in zeros), fmt(row.gini, ".3f"), fmt(row.cf_a, "+.2f"),
                 fmt(row.cf_c, "+.2f"), fmt(row.agree_pruned, ".2f"), fmt(row.agree_kept, ".2f")]
        rows.append(cells)
    agree = AGREEMENT_NOTES[table.attrs.get("agreement", "pairs")]
    return "\n".join(markdown_table(header, rows) + ["", "Means over seeds. q min / max: per-head mean q at the selected epoch; "
                                  "Gini: of each neighbourhood's weights, mean over nodes, heads and layers (0: uniform); "
                                  "A and C: counterfactual minus trained score, in points of the main metric; "
                                  f"agree: {agree}"]) + "\n"

