"""The depth sweep with over-smoothing diagnostics, in the LTGA paper's Table 19 layout (Appendix N).

Reads the runs of recipes named ``<dataset>_depth<L>_<model>`` (``recipes/*_depth{2,4,8}_*.yaml``)
and, per (dataset, model) and depth L: the test main metric (mean +- sd over seeds, in percent
where it is one) and the means of the last hidden layer's directional Dirichlet energy and MAD
that the node trainer writes into ``metrics.json`` (``oversmoothing``; see
:func:`zoo.analysis.oversmoothing.oversmoothing_diagnostics`). Higher energy and MAD: less collapse.

    python tools/report.py runs/depth --diagnostics
"""
from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pandas as pd

from zoo.analysis.rendering import markdown_table
from zoo.analysis.runs import grouped_seed_means
from zoo.analysis.tables import PERCENT_METRICS, order_datasets

DEPTH_RUN = re.compile(r"^depth(?P<layers>\d+)_(?P<model>.+)$")
"""A depth-sweep run's model column (its recipe name without the dataset): ``depth<L>_<model>``."""

PAPER_TABLE19 = {
    ("cora", "gat"): {2: (80.6, 0.5, 0.127, 0.717), 4: (70.8, 6.7, 0.039, 0.636), 8: (28.5, 9.6, 0.006, 0.188)},
    ("cora", "gatv2"): {2: (81.0, 0.5, 0.108, 0.668), 4: (65.3, 6.1, 0.023, 0.422), 8: (17.1, 7.9, 0.003, 0.092)},
    ("cora", "gcn"): {2: (80.9, 0.5, 0.155, 0.790), 4: (59.4, 11.1, 0.034, 0.487), 8: (44.5, 18.2, 0.030, 0.342)},
    ("cora", "ltga_head"): {2: (81.0, 0.4, 0.099, 0.667), 4: (64.0, 8.3, 0.031, 0.525), 8: (22.8, 12.4, 0.007, 0.204)},
}
"""The LTGA paper's Table 19 on Cora, per model and depth: accuracy mean and sd, E_dir, MAD (its
Roman-Empire rows are not shown: Minesweeper stands in for a dataset not available offline)."""


def _seed_row(path: Path) -> dict:
    metrics = json.loads((path / "metrics.json").read_text())
    main = metrics["main_metric"]
    scale = 100.0 if main in PERCENT_METRICS else 1.0
    oversmoothing = metrics.get("oversmoothing") or {}
    return {"metric": main, "score": scale * metrics["final"]["test"][main],
            "dirichlet_energy": oversmoothing.get("dirichlet_energy", np.nan), "mad": oversmoothing.get("mad", np.nan)}


def depth_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, model, layers) of the depth-sweep runs in ``runs``
    (:func:`zoo.analysis.runs.collect_runs` output): ``metric``, ``score`` and ``score_sd`` (over
    seeds), the mean ``dirichlet_energy`` and ``mad`` (NaN for runs that recorded none), and ``n``.
    Empty when ``runs`` holds no depth-sweep run.

    >>> from zoo.analysis import collect_runs
    >>> runs = collect_runs([f"runs/ltga16/cora_depth{layers}_gcn" for layers in (2, 4, 8)])  # in git
    >>> depth_table(runs)[["score", "dirichlet_energy", "mad", "n"]].round(3)
                          score  dirichlet_energy    mad  n
    dataset model layers
    cora    gcn   2       81.42             0.110  0.524  5
                  4       79.12             0.052  0.744  5
                  8       74.96             0.056  0.810  5
    """
    columns = ["metric", "score", "score_sd", "dirichlet_energy", "mad", "n"]
    table = grouped_seed_means(runs, DEPTH_RUN, ["model", "layers"], _seed_row, ["score", "dirichlet_energy", "mad"],
                               {"layers": int})
    if table is None:
        empty = pd.MultiIndex.from_tuples([], names=["dataset", "model", "layers"])
        return pd.DataFrame(columns=columns, index=empty)
    order = {name: i for i, name in enumerate(order_datasets(table.index.get_level_values("dataset")))}
    return table[columns].sort_index(key=lambda index: index.map(order) if index.name == "dataset" else index)


def render_depth(table: pd.DataFrame) -> str:
    """:func:`depth_table` as Markdown: one row per (dataset, model), score / E_dir / MAD per depth."""
    depths = sorted(set(table.index.get_level_values("layers")))
    header = ["dataset", "model", "metric",
              *(f"{name} L={depth}" for depth in depths for name in ("score", "E_dir", "MAD"))]
    rows = []
    for (dataset, model), block in table.groupby(level=["dataset", "model"], sort=False):
        by_depth = block.droplevel(["dataset", "model"])
        cells = [dataset, model, by_depth.metric.iloc[0]]
        for depth in depths:
            if depth not in by_depth.index:
                cells += ["-", "-", "-"]
                continue
            row = by_depth.loc[depth]
            spread = "" if pd.isna(row.score_sd) else f" ± {row.score_sd:.1f}"
            paper = PAPER_TABLE19.get((dataset, model), {}).get(depth)
            cited = ("", "", "") if paper is None else (
                f" [{paper[0]:.1f} ± {paper[1]:.1f}]", f" [{paper[2]:.3f}]", f" [{paper[3]:.3f}]")
            cells += [f"{row.score:.1f}{spread} (n={int(row.n)}){cited[0]}", _fmt(row.dirichlet_energy) + cited[1],
                      _fmt(row.mad) + cited[2]]
        rows.append(cells)
    note = ("Test main metric, mean ± sd over seeds (n); E_dir: Dirichlet energy of the row-normalised last hidden "
            "layer, mean over edges; MAD: 1 - mean cosine over node pairs; both means over seeds, higher is less "
            "collapse (the LTGA paper's Table 19 layout). [In brackets: the paper's Table 19, Cora only.]")
    return "\n".join(markdown_table(header, rows) + ["", note]) + "\n"


def _fmt(value: float) -> str:
    return "-" if pd.isna(value) else f"{value:.3f}"
