"""Every figure of the LTGA paper the runs can make, as PNGs in one folder: what
``tools/report.py RUNS --plots DIR`` writes.

=============================  ===========================================================
``fig2_critical_difference``   average ranks and Nemenyi CD of the results table (Figure 2)
``fig3_reliability``           reliability diagrams of the test split, ECE / NLL / Brier (Figure 3)
``fig4_lorenz``                Lorenz curves of first-layer attention and their Gini (Figure 4)
``fig5_q_histograms``          per-edge q_ij of LTGA-Edge runs, last layer (Figure 5)
``fig7_q_probe``               linear probe of q_ij on edge covariates (Figure 7)
``fig9_q_trajectories``        mean learned q per epoch (Figure 9)
``fig11_q_grad_norm``          norm of the gradient reaching the indices after warm-up (Figure 11)
=============================  ===========================================================

Figures 2, 9 and 11 read the run folders' metrics.json; the others rebuild each node run's model
from its ``best.pt`` and run it once on its graph (:mod:`zoo.analysis.figures.trained`), pooling
seeds. A figure that cannot be drawn, and every run a figure had to leave out, gets a note naming
the run and what is missing.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import numpy as np
import pandas as pd
import torch

from zoo.analysis.figures.calibration import expected_calibration_error, reliability_bins
from zoo.analysis.figures.critical_difference import table_critical_difference
from zoo.analysis.figures.drawing import (draw_critical_difference, draw_gradient_norms, draw_lorenz, draw_probe,
                                          draw_q_histograms, draw_q_trajectories, draw_reliability)
from zoo.analysis.figures.lorenz import attention_lorenz, lorenz_gini, pooled_lorenz
from zoo.analysis.figures.probe import binned_means, edge_covariates, linear_probe
from zoo.analysis.figures.trained import DatasetCache, load_trained, record_forward
from zoo.analysis.figures.trajectories import gradient_norms, q_trajectories
from zoo.analysis.runs import ReportError, _read_config
from zoo.analysis.tables import ResultsTable, order_datasets

FIGURES = {"critical_difference": "fig2_critical_difference.png", "reliability": "fig3_reliability.png",
           "lorenz": "fig4_lorenz.png", "q_histograms": "fig5_q_histograms.png", "q_probe": "fig7_q_probe.png",
           "q_trajectories": "fig9_q_trajectories.png", "q_grad_norm": "fig11_q_grad_norm.png"}
"""Figure name -> file name in the output folder."""

MAX_Q_VALUES = 200_000
"""Per-edge q values kept per run and layer for the histograms (a seeded sample beyond that)."""
MAX_PROBE_ROWS = 20_000
"""(edge, head) rows kept per run and layer for the probe (a seeded sample beyond that)."""


def _sample(values, limit: int, seed: int):
    if len(values) <= limit:
        return values
    index = np.random.default_rng(seed).choice(len(values), limit, replace=False)
    return values.iloc[np.sort(index)] if isinstance(values, pd.DataFrame) else values[np.sort(index)]


class _Pooled:
    """What the model-based figures keep of each run, pooled by (dataset, model)."""

    def __init__(self):
        self.predictions = defaultdict(list)  # (dataset, model) -> [(probs, labels)]
        self.lorenz = defaultdict(list)  # (dataset, model) -> [(p, pooled L, its Gini, per-node L, its Gini)]
        self.q = defaultdict(lambda: defaultdict(list))  # (dataset, model) -> layer -> [values]
        self.probe = defaultdict(list)  # (dataset, model, layer) -> [rows]
        self.runs = []  # (dataset, model) of each run read

    def add(self, run, recorded) -> None:
        key = (run.dataset, run.model)
        self.runs.append(key)
        self.predictions[key].append((recorded.probs.numpy(), recorded.labels.numpy()))
        if recorded.attention is not None:
            p, pooled, gini = pooled_lorenz(recorded.attention)
            _, by_node = attention_lorenz(recorded.graph, recorded.attention, len(p))
            self.lorenz[key].append((p, pooled, gini, by_node.numpy(), lorenz_gini(recorded.graph, recorded.attention)))
        for layer, q in enumerate(recorded.q):
            if not (torch.is_tensor(q) and q.dim() == 2):
                continue  # one q per layer or head: Figure 9 draws it
            self.q[key][layer].append(_sample(q.flatten().double().numpy(), MAX_Q_VALUES, run.seed))
            rows = edge_covariates(recorded.graph, recorded.features, recorded.embedding, recorded.scores[layer], q)
            self.probe[(*key, layer)].append(_sample(rows, MAX_PROBE_ROWS, run.seed))


def _order(keys) -> list:
    """(dataset, model, ...) keys in the paper's dataset order, then by model."""
    rank = {name: i for i, name in enumerate(order_datasets({k[0] for k in keys}))}
    return sorted(keys, key=lambda k: (rank[k[0]], *k[1:]))


def _by_dataset(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame``'s rows with the datasets in the paper's order (its panels' order)."""
    rank = {name: i for i, name in enumerate(order_datasets(frame.dataset))}
    return frame.sort_values("dataset", key=lambda names: names.map(rank), kind="stable")


def _nested(pooled: dict, value) -> dict:
    """``{dataset: {model: value(items)}}`` from ``{(dataset, model): items}``."""
    panels = {}
    for dataset, model in _order(pooled):
        panels.setdefault(dataset, {})[model] = value(pooled[dataset, model])
    return panels


def _read_runs(runs: pd.DataFrame, notes: list[str]) -> _Pooled:
    pooled, datasets, graph_runs = _Pooled(), DatasetCache(), []
    for run in runs.itertuples():
        seed_dir = Path(run.path)
        if _read_config(seed_dir.parent, seed_dir).get("task", "node_classification") != "node_classification":
            graph_runs.append(run.recipe)
            continue
        try:
            model, data = load_trained(seed_dir, datasets)
        except ReportError as err:
            notes.append(f"figures 3, 4, 5, 7 leave out a run: {err}")
            continue
        pooled.add(run, record_forward(model, data))
    if graph_runs:
        notes.append(f"figures 3, 4, 5, 7 read node-classification runs; left out {len(graph_runs)} graph-task run(s) "
                     f"of {', '.join(sorted(set(graph_runs)))}")
    return pooled


def _reliability(pooled: _Pooled, runs: pd.DataFrame, path: Path) -> Path:
    def bins(parts):
        table = reliability_bins(np.concatenate([p for p, _ in parts]), np.concatenate([y for _, y in parts]))
        return table, expected_calibration_error(table)

    used = runs[[(d, m) in set(pooled.runs) for d, m in zip(runs.dataset, runs.model)]]
    columns = [c for c in ("test_ece", "test_nll", "test_brier") if c in used]
    calibration = used.groupby("model")[columns].mean().rename(columns=lambda c: c[5:])
    return draw_reliability(_nested(pooled.predictions, bins), calibration, path)


def _lorenz(pooled: _Pooled, path: Path) -> Path:
    def mean(parts):
        return (parts[0][0], *(np.mean([part[i] for part in parts], axis=0) for i in range(1, 5)))

    return draw_lorenz(_nested(pooled.lorenz, mean), 1, path)


def _probe(pooled: _Pooled, notes: list[str], path: Path) -> Path | None:
    panels = {}
    for key in _order(pooled.probe):
        rows = pd.concat(pooled.probe[key], ignore_index=True)
        try:
            probe = linear_probe(rows)
        except ValueError as err:
            notes.append(f"figure 7: no probe of {key[1]} on {key[0]}, layer {key[2] + 1}: {err}")
            continue
        panels[key] = {"bins": {name: binned_means(rows[name], rows.q) for name in rows.columns if name != "q"},
                       "probe": probe}
    if not panels:
        notes.append("figure 7 not drawn: no LTGA-Edge layer whose q_ij varies")
        return None
    return draw_probe(panels, path)


def write_figures(runs: pd.DataFrame, table: ResultsTable | None, out: str | Path,
                  alpha: float = 0.05) -> tuple[dict[str, Path], list[str]]:
    """Write every figure (module docstring) that ``runs`` (:func:`zoo.analysis.runs.collect_runs`
    output) and ``table`` (their results table, for Figure 2) allow into ``out``.

    Returns ``({figure name: path written}, notes)``.

    >>> from zoo.analysis import collect_runs, results_table
    >>> runs = collect_runs([f"runs/ltga16/texas_{m}" for m in ("gat", "gatv2", "ltga_edge")])  # records in git
    >>> written, notes = write_figures(runs, results_table(runs), "figures")
    >>> sorted(written)  # from metrics.json; figures 3, 4, 5 and 7 need each run's best.pt
    ['critical_difference', 'q_grad_norm', 'q_trajectories']
    >>> print(notes[0])
    figures 3, 4, 5, 7 leave out a run: .../texas_gat/.../seed0 has no best.pt (the trained weights); retrain it with tools/train.py --force
    """
    out, written, notes = Path(out), {}, []
    if table is not None:
        try:
            cd = table_critical_difference(table, alpha)
        except ReportError as err:
            notes.append(f"figure 2 not drawn: {err}")
        else:
            written["critical_difference"] = draw_critical_difference(cd, out / FIGURES["critical_difference"])
    trajectories = _by_dataset(q_trajectories(runs))
    if trajectories.empty:
        notes.append("figures 9 and 11 not drawn: no run logged a learned q per epoch (metrics.json curves 'q_mean/...')")
    else:
        written["q_trajectories"] = draw_q_trajectories(trajectories, out / FIGURES["q_trajectories"])
        norms, missing = gradient_norms(runs)
        norms = _by_dataset(norms)
        notes += missing
        if norms.empty:
            notes.append("figure 11 not drawn: no run recorded q_grad_norm after its warm-up")
        else:
            written["q_grad_norm"] = draw_gradient_norms(norms, out / FIGURES["q_grad_norm"])
    pooled = _read_runs(runs, notes)
    if pooled.predictions:
        written["reliability"] = _reliability(pooled, runs, out / FIGURES["reliability"])
    else:
        notes.append("figure 3 not drawn: no node-classification run could be rebuilt")
    without = sorted({m for d, m in pooled.runs if (d, m) not in pooled.lorenz})
    if without:
        notes.append(f"figure 4 leaves out {', '.join(without)}: no attention layer to read")
    if pooled.lorenz:
        written["lorenz"] = _lorenz(pooled, out / FIGURES["lorenz"])
    if pooled.q:
        panels = {key: {layer: np.concatenate(parts) for layer, parts in pooled.q[key].items()}
                  for key in _order(pooled.q)}
        written["q_histograms"] = draw_q_histograms(panels, out / FIGURES["q_histograms"])
    else:
        notes.append("figures 5 and 7 not drawn: no run has per-edge q (LTGA-Edge, model.q_mode: edge)")
    if pooled.q and (path := _probe(pooled, notes, out / FIGURES["q_probe"])) is not None:
        written["q_probe"] = path
    return written, notes
