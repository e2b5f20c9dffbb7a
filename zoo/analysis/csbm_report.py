"""The contextual-SBM sweep of the LTGA paper (Section 6): test accuracy per cell and model, and how
far any heavy-tailed setting (frozen q < 1) gets ahead of softmax (frozen q = 1).

Reads runs on the cards of :func:`zoo.data.synthetic.contextual_sbm_card`
(``csbm_h<homophily>_d<mean degree>_snr<snr>``), as ``tools/csbm_sweep.py`` writes them. The paper
reports, over degree {5, 20} and SNR in [0.1, 2] at h = 0.5 with five seeds, a largest q < 1 advantage
of +1.7 points against across-seed standard deviations of 1.2-5.9.

    python tools/csbm_sweep.py --out runs/csbm
"""
from __future__ import annotations

import re

import numpy as np
import pandas as pd

from zoo.analysis.rendering import markdown_table
from zoo.analysis.runs import ReportError

CSBM_CARD = re.compile(r"^csbm_h(?P<homophily>[0-9.]+)_d(?P<degree>[0-9.]+)_snr(?P<snr>[0-9.]+)$")
FROZEN = re.compile(r"^qfrozen_(?P<q>[0-9.]+)$")


def csbm_table(runs: pd.DataFrame) -> pd.DataFrame:
    """Test accuracy (percent) per (homophily, degree, snr) cell and model of the cSBM runs in
    ``runs`` (:func:`zoo.analysis.runs.collect_runs` output): columns ``mean``, ``sd`` (over seeds)
    and ``n``, cells in ascending order.

    >>> from zoo.analysis import collect_runs
    >>> runs = collect_runs([f"runs/csbm/csbm_h0.5_d20_snr0.1_{m}" for m in ("gatv2", "qfrozen_0.5", "qfrozen_1.0")])
    >>> csbm_table(runs).round(1)  # records in git: the cell where q < 1 gains most
                                      mean   sd  n
    homophily degree snr model
    0.5       20.0   0.1 gatv2        76.6  3.5  5
                         qfrozen_0.5  78.2  1.0  5
                         qfrozen_1.0  75.9  3.2  5
    """
    cells = runs.dataset.str.extract(CSBM_CARD).astype(float)
    runs = runs.assign(**cells)[cells.homophily.notna()]
    if runs.empty:
        raise ReportError("no run on a contextual-SBM card (csbm_h<homophily>_d<degree>_snr<snr>); "
                          "run tools/csbm_sweep.py first")
    runs = runs.assign(score=100.0 * runs.test_accuracy)
    groups = runs.groupby(["homophily", "degree", "snr", "model"]).score
    return pd.DataFrame({"mean": groups.mean(), "sd": groups.std(ddof=1), "n": groups.size()}).sort_index()


def q_below_one_advantage(table: pd.DataFrame) -> pd.Series:
    """Per cell: the best mean of any frozen q < 1 model minus the mean of frozen q = 1, in points
    (NaN where either is missing)."""
    models = table.index.get_level_values("model")
    q = models.str.extract(FROZEN, expand=False).astype(float)
    means = table["mean"]
    below = means[np.asarray(q < 1)].groupby(level=["homophily", "degree", "snr"]).max()
    softmax = means[np.asarray(q == 1)].droplevel("model")
    return (below - softmax).rename("advantage")


def render_csbm(table: pd.DataFrame) -> str:
    """:func:`csbm_table` as Markdown: one row per cell, ``mean ± sd`` per model, the q < 1
    advantage, and a closing line comparing the largest advantage with the across-seed sds."""
    models = list(dict.fromkeys(table.index.get_level_values("model")))
    advantage = q_below_one_advantage(table)
    header = ["h", "degree", "SNR", *models, "best q<1 − q=1"]
    rows = []
    for cell, block in table.groupby(level=["homophily", "degree", "snr"]):
        by_model = block.droplevel(["homophily", "degree", "snr"])
        cells = [f"{cell[0]:g}", f"{cell[1]:g}", f"{cell[2]:g}"]
        for model in models:
            if model not in by_model.index:
                cells.append("-")
                continue
            row = by_model.loc[model]
            cells.append(f"{row['mean']:.1f}" + ("" if pd.isna(row.sd) else f" ± {row.sd:.1f}"))
        gap = advantage.get(cell, np.nan)
        cells.append("-" if pd.isna(gap) else f"{gap:+.1f}")
        rows.append(cells)
    notes = ["Test accuracy (%), mean ± sd over seeds; the last column: the best frozen q < 1 model's mean minus "
             "frozen q = 1's, in points."]
    if advantage.notna().any():
        frozen = table[table.index.get_level_values("model").str.match(FROZEN.pattern)].sd.dropna()
        spread = f"{frozen.min():.1f}-{frozen.max():.1f}" if len(frozen) else "-"
        notes.append(f"Largest q < 1 advantage over q = 1: {advantage.max():+.1f} points; across-seed sds of the "
                     f"frozen-q models: {spread} (the LTGA paper, Section 6: +1.7 against 1.2-5.9).")
    return "\n".join(markdown_table(header, rows) + [""] + notes) + "\n"
