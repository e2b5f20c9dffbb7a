"""Matplotlib drawing of the prepared figure numbers, one PNG per figure, on the Agg canvas (no
display, no pyplot state). Each function takes what the data modules of this package compute and
the output path; nothing here computes a statistic."""
from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.ticker import MaxNLocator

DPI = 120


def _figure(panels: int, columns: int = 3, size: tuple[float, float] = (4.2, 3.4), **subplots):
    """A figure with ``panels`` axes in rows of ``columns`` (unused axes hidden) and its axes list."""
    columns = max(1, min(columns, panels))
    rows = math.ceil(panels / columns)
    figure = Figure(figsize=(size[0] * columns, size[1] * rows), layout="constrained")
    FigureCanvasAgg(figure)
    axes = np.atleast_1d(figure.subplots(rows, columns, squeeze=False, **subplots)).ravel()
    for ax in axes[panels:]:
        ax.set_visible(False)
    return figure, list(axes[:panels])


def _save(figure: Figure, path: Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=DPI)
    return path


def draw_critical_difference(cd: dict, path: Path) -> Path:
    """Demsar's (2006) diagram: the rank axis (best on the right), each model's average rank, the
    CD interval, and a bar joining each group the Nemenyi test cannot separate."""
    names, ranks, k = cd["names"], np.asarray(cd["ranks"]), len(cd["names"])
    order = np.argsort(ranks, kind="stable")
    half = math.ceil(k / 2)
    figure = Figure(figsize=(7.5, 1.6 + 0.32 * half + 0.2 * len(cd["groups"])), layout="constrained")
    FigureCanvasAgg(figure)
    ax = figure.subplots()
    low, high = 1, max(k, 2)
    ax.set_xlim(high + 0.4, low - 0.4)  # best (rank 1) on the right
    ax.set_ylim(-(half + 1.2 + 0.35 * len(cd["groups"])), 1.6)
    ax.axis("off")
    ax.hlines(0, low, high, color="black")
    for tick in range(low, high + 1):
        ax.vlines(tick, 0, 0.15, color="black")
        ax.text(tick, 0.3, str(tick), ha="center", va="bottom", fontsize=9)
    ax.hlines(1.1, high, high - cd["cd"], color="black", linewidth=1.5)
    ax.text(high - cd["cd"] / 2, 1.25, f"CD = {cd['cd']:.2f} (Nemenyi, α = {cd['alpha']:g}, "
            f"{cd['datasets']} datasets)", ha="center", va="bottom", fontsize=8)
    for place, index in enumerate(order):  # best half on the right, the rest on the left
        right = place < half
        depth = -(place if right else k - 1 - place) - 1
        edge = low - 0.3 if right else high + 0.3
        ax.plot([ranks[index], ranks[index], edge], [0, depth, depth], color="black", linewidth=0.8)
        ax.text(edge, depth, f" {names[index]} ({ranks[index]:.2f}) ", ha="left" if right else "right",
                va="center", fontsize=9)
    for row, group in enumerate(cd["groups"]):
        spans = [ranks[names.index(name)] for name in group]
        y = -(half + 0.6 + 0.35 * row)
        ax.hlines(y, min(spans) - 0.03, max(spans) + 0.03, color="black", linewidth=3)
    return _save(figure, path)


def draw_reliability(panels: dict, calibration: pd.DataFrame, path: Path) -> Path:
    """(a) one reliability diagram per dataset, a line per model (``panels[dataset][model]`` is
    ``(bins, ece)``), perfect calibration dashed; (b) mean ECE / NLL / Brier per model."""
    figure, axes = _figure(len(panels) + 1)
    for ax, (dataset, models) in zip(axes, panels.items()):
        ax.plot([0, 1], [0, 1], linestyle="--", color="grey", linewidth=1)
        for model, (bins, ece) in models.items():
            full = bins[bins["count"] > 0]
            ax.plot(full.confidence, full.accuracy, marker="o", markersize=3, label=f"{model} (ECE {ece:.3f})")
        ax.set(title=f"{dataset}: test split", xlabel="confidence", ylabel="accuracy", xlim=(0, 1), ylim=(0, 1))
        ax.legend(fontsize=7, loc="upper left")
    ax = axes[-1]
    width = 0.8 / max(len(calibration.columns), 1)
    x = np.arange(len(calibration.index))
    for i, metric in enumerate(calibration.columns):
        ax.bar(x + i * width, calibration[metric], width, label=metric)
    ax.set_xticks(x + width * (len(calibration.columns) - 1) / 2, calibration.index, rotation=30, ha="right",
                  fontsize=8)
    ax.set(title="mean over datasets and seeds (test)")
    ax.legend(fontsize=7)
    return _save(figure, path)


def draw_lorenz(panels: dict, layer: int, path: Path) -> Path:
    """One panel per dataset, per model the Lorenz curve of all attention weights pooled (solid, the
    paper's) and the mean per-neighbourhood curve (dashed), with their Gini coefficients
    (``panels[dataset][model]`` is ``(p, pooled, gini, per_node, per_node_gini)``)."""
    figure, axes = _figure(len(panels))
    for ax, (dataset, models) in zip(axes, panels.items()):
        ax.plot([0, 1], [0, 1], linestyle=":", color="grey", linewidth=1)
        for index, (model, (p, pooled, gini, per_node, per_node_gini)) in enumerate(models.items()):
            color = f"C{index % 10}"
            ax.plot(p, pooled, color=color, label=f"{model} (G = {gini:.2f}; per node {per_node_gini:.2f})")
            ax.plot(p, per_node, color=color, linestyle="--", linewidth=0.8)
        ax.set(title=f"{dataset}: layer {layer} α_ij, pooled (solid) and per node (dashed)",
               xlabel="share of the weights (smallest first)", ylabel="share of the attention", xlim=(0, 1),
               ylim=(0, 1))
        ax.title.set_fontsize(9)
        ax.legend(fontsize=7, loc="upper left")
    return _save(figure, path)


def draw_q_histograms(panels: dict, path: Path) -> Path:
    """One panel per (dataset, model): the last layer's per-edge q histogram, the first layer's mean
    dotted, q = 1 dashed, q >= 2 (hard zeros) shaded (``panels[(dataset, model)]`` is
    ``{layer: q values}``)."""
    figure, axes = _figure(len(panels))
    for ax, ((dataset, model), layers) in zip(axes, panels.items()):
        last = max(layers)
        values = np.asarray(layers[last])
        high = max(2.1, float(values.max()) + 0.05)
        ax.axvspan(2.0, high, color="grey", alpha=0.15, label="q ≥ 2: hard zeros")
        ax.hist(values, bins=50, color="tab:blue", label=f"layer {last + 1} q_ij")
        ax.axvline(1.0, linestyle="--", color="black", linewidth=1, label="q = 1 (softmax)")
        ax.axvline(float(np.mean(layers[min(layers)])), linestyle=":", color="tab:red",
                   label=f"layer {min(layers) + 1} mean")
        ax.set(title=f"{dataset}: {model}", xlabel="q_ij", ylabel="(edge, head) pairs", xlim=(0, high))
        ax.legend(fontsize=7, loc="upper left")
    return _save(figure, path)


def _per_seed_lines(ax, frame: pd.DataFrame, column: str) -> None:
    for index, (model, runs) in enumerate(frame.groupby("model", sort=True)):
        color = f"C{index % 10}"
        for _, seed in runs.groupby("seed"):
            ax.plot(seed.epoch, seed[column], color=color, alpha=0.25, linewidth=0.8)
        mean = runs.groupby("epoch")[column].mean()
        ax.plot(mean.index, mean.to_numpy(), color=color, linewidth=2, label=model)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(fontsize=7, loc="upper right")


def draw_q_trajectories(frame: pd.DataFrame, path: Path) -> Path:
    """One panel per dataset: mean learned q per epoch, seeds light, their mean bold, q = 1 dashed."""
    datasets = list(dict.fromkeys(frame.dataset))
    figure, axes = _figure(len(datasets))
    for ax, dataset in zip(axes, datasets):
        ax.axhline(1.0, linestyle="--", color="grey", linewidth=1)
        _per_seed_lines(ax, frame[frame.dataset == dataset], "q")
        ax.set(title=dataset, xlabel="epoch", ylabel="mean learned q")
    return _save(figure, path)


def draw_gradient_norms(frame: pd.DataFrame, path: Path) -> Path:
    """One panel per dataset: ||dL/d alpha|| per epoch after the warm-up, log scale."""
    datasets = list(dict.fromkeys(frame.dataset))
    figure, axes = _figure(len(datasets))
    for ax, dataset in zip(axes, datasets):
        _per_seed_lines(ax, frame[frame.dataset == dataset], "grad_norm")
        ax.set_yscale("log")
        ax.set(title=dataset, xlabel="epoch (after the warm-up)", ylabel="||dL/dα|| (index parameters)")
    return _save(figure, path)


def draw_probe(panels: dict, path: Path) -> Path:
    """One row per (dataset, model, layer): binned mean q_ij against each covariate with Spearman's
    rho, then the probe's permutation importances and R^2 (``panels[key]`` is ``{"bins":
    {covariate: binned frame}, "probe": linear_probe result}``)."""
    columns = max(len(p["bins"]) for p in panels.values()) + 1
    figure = Figure(figsize=(2.6 * columns, 2.5 * len(panels)))
    FigureCanvasAgg(figure)
    grid = np.atleast_2d(figure.subplots(len(panels), columns, squeeze=False))
    # fixed margins: the constrained layout of this many axes costs seconds per figure
    figure.subplots_adjust(left=0.06, right=0.93, bottom=0.12 / len(panels) ** 0.5, top=1 - 0.1 / len(panels) ** 0.5,
                           wspace=0.45, hspace=0.6)
    for axes, ((dataset, model, layer), panel) in zip(grid, panels.items()):
        covariates = panel["probe"]["covariates"]
        for ax, (name, binned) in zip(axes, panel["bins"].items()):
            ax.plot(binned.x, binned.y, marker="o", markersize=3)
            ax.set_title(f"ρ = {covariates.spearman[name]:.2f}", fontsize=8)
            ax.set_xlabel(name, fontsize=8)
        axes[0].set_ylabel(f"{dataset} {model}\nlayer {layer + 1}: mean q_ij", fontsize=8)
        for ax in axes[len(panel["bins"]):-1]:
            ax.set_visible(False)
        ax = axes[-1]
        ax.barh(covariates.index, covariates.importance, xerr=covariates.importance_sd, color="tab:green")
        ax.yaxis.tick_right()  # the covariate names clear of the panel on the left
        ax.tick_params(labelsize=7)
        ax.set_title(f"permutation importance (R² = {panel['probe']['r2']:.2f})", fontsize=8)
    return _save(figure, path)
