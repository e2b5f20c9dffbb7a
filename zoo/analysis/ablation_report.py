"""The LTGA hyperparameter ablations in the paper's Tables 13-18 layout: value -> score, mean q, ECE.

Reads the runs of recipes named ``<dataset>_ablate_<parameter>_<value>``
(``recipes/*_ablate_*.yaml``): ``lambda`` (Shannon prior lambda_attn, ``optim.q_prior``),
``warmup`` (T_w, ``optim.q_warmup``), ``kappa`` (``optim.lr / optim.q_lr``), ``delta`` (the reach of
q) and ``granularity`` (``model.q_mode``). Per (dataset, parameter, value), over seeds: the test main
metric (mean +- sd, in percent where it is one), the mean converged q (the mean over layers and heads
of the per-head mean q at the selected epoch) and the test ECE (15 bins).

For LTGA-Edge the q column is the mean of its per-edge q (marked ``*``), not the paper's gate
output-weight magnitude (Table 18 footnote); both say that the edge model has no scalar q.

    python tools/report.py runs/ablations --diagnostics
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

PARAMETERS = {"lambda": "λ_attn", "warmup": "T_w", "kappa": "κ", "delta": "δ", "granularity": "granularity"}
"""Each ablated parameter's recipe-name word and its symbol in the paper's tables."""
GRANULARITIES = ("edge", "global", "head", "layer")
"""Table 18's row order."""
PAPER_TABLE13 = {
    "cora": ((81.1, 0.8), {("warmup", "0"): 1.014}),
    "wisconsin": ((47.1, 5.5), {("warmup", "0"): 1.001}),
}
"""The LTGA paper's Table 13 on Cora and Wisconsin: every lambda / T_w / kappa value gives the same
accuracy (mean, sd) and a converged q of 1.000, except the values listed (its Amazon-Ratings and
Roman-Empire rows are not shown: Tolokers and Minesweeper stand in for them)."""
ABLATION_RUN = re.compile(rf"^ablate_(?P<parameter>{'|'.join(PARAMETERS)})_(?P<value>.+)$")


def _seed_row(path: Path) -> dict:
    metrics = json.loads((path / "metrics.json").read_text())
    main = metrics["main_metric"]
    scale = 100.0 if main in PERCENT_METRICS else 1.0
    best = next((row for row in metrics.get("curves", []) if row.get("epoch") == metrics.get("best_epoch")), {})
    q = [value for key, value in best.items() if key.startswith("q_mean/")]
    test = metrics["final"]["test"]
    return {"metric": main, "score": scale * test[main], "q": float(np.mean(q)) if q else np.nan,
            "ece": test.get("ece", np.nan)}


def ablation_table(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per (dataset, parameter, value) of the ablation runs in ``runs``
    (:func:`zoo.analysis.runs.collect_runs` output): ``metric``, ``score`` and ``score_sd`` (over
    seeds), mean ``q`` and ``ece``, and ``n``; values in the paper's order (numbers ascending,
    granularities as Table 18). Empty when ``runs`` holds no ablation run.

    >>> from zoo.analysis import collect_runs
    >>> runs = collect_runs([f"runs/ltga16/minesweeper_ablate_kappa_{k}" for k in (1, 5, 10, 50)])  # in git
    >>> ablation_table(runs)[["score", "q", "n"]].round(3)
                                score      q  n
    dataset     parameter value
    minesweeper kappa     1      80.235  1.427  5
                          5      79.778  1.125  5
                          10     79.651  1.064  5
                          50     79.153  1.013  5
    """
    columns = ["metric", "score", "score_sd", "q", "ece", "n"]
    table = grouped_seed_means(runs, ABLATION_RUN, ["parameter", "value"], _seed_row, ["score", "q", "ece"])
    if table is None:
        empty = pd.MultiIndex.from_tuples([], names=["dataset", "parameter", "value"])
        return pd.DataFrame(columns=columns, index=empty)
    datasets = {name: i for i, name in enumerate(order_datasets(table.index.get_level_values("dataset")))}
    parameters = {name: i for i, name in enumerate(PARAMETERS)}
    order = sorted(table.index, key=lambda key: (datasets[key[0]], parameters[key[1]], _value_order(key[2])))
    return table.loc[order, columns]


def _value_order(value: str) -> tuple:
    """Numbers ascending, then the granularities in Table 18's order, then anything else."""
    try:
        return (0, float(value), "")
    except ValueError:
        return (1, GRANULARITIES.index(value) if value in GRANULARITIES else len(GRANULARITIES), value)


def _paper_cells(dataset: str, parameter: str, value: str) -> list[str]:
    """The paper's Table 13 score and q of one ablation cell, or dashes where it reports none."""
    if dataset not in PAPER_TABLE13 or parameter not in ("lambda", "warmup", "kappa"):
        return ["-", "-"]
    (mean, sd), moved = PAPER_TABLE13[dataset]
    return [f"{mean:.1f} ± {sd:.1f}", f"{moved.get((parameter, value), 1.0):.3f}"]


def render_ablation(table: pd.DataFrame) -> str:
    """:func:`ablation_table` as Markdown, one row per ablated value (the paper's Tables 13-18)."""
    rows = []
    for (dataset, parameter, value), row in table.iterrows():
        spread = "" if pd.isna(row.score_sd) else f" ± {row.score_sd:.1f}"
        edge = parameter == "granularity" and value == "edge"
        q = "-" if pd.isna(row.q) else f"{row.q:.3f}" + ("*" if edge else "")
        paper = _paper_cells(dataset, parameter, value)
        rows.append([dataset, PARAMETERS[parameter], value, row.metric, f"{row.score:.1f}{spread}", q,
                     "-" if pd.isna(row.ece) else f"{row.ece:.3f}", str(int(row.n)), *paper])
    header = ["dataset", "parameter", "value", "metric", "score", "mean q", "ECE", "n", "paper score", "paper q"]
    note = ("Test main metric, mean ± sd over seeds; mean q: per-head mean q at the selected epoch, averaged over "
            "layers, heads and seeds; ECE: test expected calibration error (15 bins), mean over seeds. "
            "κ = lr / q_lr. *: LTGA-Edge has no scalar q; its entry is the mean per-edge q (the paper's Table 18 "
            "reports the gate's output-weight magnitude there). Paper: its Table 13 (Cora and Wisconsin only).")
    return "\n".join(markdown_table(header, rows) + ["", note]) + "\n"
