"""Per-epoch index logs of the runs (the LTGA paper's Figures 9 and 11), from the ``curves`` the
trainers write into metrics.json (:func:`zoo.engine.index_training.index_trajectory`):

* :func:`q_trajectories`: the mean learned q per epoch, averaged over every ``q_mean/layer*_head*``
  entry (each a mean over edges for per-edge q);
* :func:`gradient_norms`: ``q_grad_norm``, the norm of the gradient reaching the index parameters,
  from the end of the warm-up (``optim.q_warmup`` of the run's recipe) on, as the paper plots it.

Runs that log no q (models without learned indices) are not index runs and are left out; index
runs recorded before ``q_grad_norm`` existed are named in the notes.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from zoo.analysis.runs import _read_config


def _curves(path: str) -> list[dict]:
    return json.loads((Path(path) / "metrics.json").read_text()).get("curves") or []


def q_trajectories(runs: pd.DataFrame) -> pd.DataFrame:
    """Columns model, dataset, seed, epoch, q (mean over layers and heads), one row per epoch of every
    run of ``runs`` (:func:`zoo.analysis.runs.collect_runs` output) that logged q."""
    rows = []
    for run in runs.itertuples():
        for row in _curves(run.path):
            q = [value for key, value in row.items() if key.startswith("q_mean/")]
            if q:
                rows.append({"model": run.model, "dataset": run.dataset, "seed": run.seed, "epoch": row["epoch"],
                             "q": float(np.mean(q))})
    return pd.DataFrame(rows, columns=["model", "dataset", "seed", "epoch", "q"])


def gradient_norms(runs: pd.DataFrame) -> tuple[pd.DataFrame, list[str]]:
    """``(frame, notes)``: columns model, dataset, seed, epoch, grad_norm for the epochs from each
    index run's warm-up end on; a note for every index run without ``q_grad_norm``."""
    rows, notes = [], []
    for run in runs.itertuples():
        curves = _curves(run.path)
        if not any(key.startswith("q_mean/") for row in curves for key in row):
            continue
        if not any("q_grad_norm" in row for row in curves):
            notes.append(f"{run.path}: metrics.json curves have no q_grad_norm (recorded since the gradient-norm "
                         "log was added); retrain the run (tools/train.py --force) to draw its gradient norm")
            continue
        warmup = _read_config(Path(run.path).parent, Path(run.path)).get("optim", {}).get("q_warmup", 0)
        rows += [{"model": run.model, "dataset": run.dataset, "seed": run.seed, "epoch": row["epoch"],
                  "grad_norm": row["q_grad_norm"]} for row in curves
                 if row.get("epoch", -1) >= warmup and "q_grad_norm" in row]
    return pd.DataFrame(rows, columns=["model", "dataset", "seed", "epoch", "grad_norm"]), notes
