"""SigGate-GT mechanism tables over seeds, from the per-layer diagnostics that the graph trainer
writes into each GPS / SigGate-GT run's ``metrics.json`` (:mod:`zoo.analysis.gate_diagnostics`,
computed on the whole test set), in the layouts of the SigGate-GT paper:

* :func:`gate_table`: per-layer gate statistics (Table 15): mean, sd, share below 0.1 and above
  0.9, the range of the per-head means, and an ``avg`` row pooled over (layer, head, node, gate
  unit), the paper's pooled aggregate;
* :func:`entropy_table`: attention entropy per layer (Table 13);
* :func:`mad_depth_table`: MAD of the final node representations (the last layer's output, which the
  readout pools), the share of the shallowest depth's MAD kept, and the test metric against depth
  (Table 12; the paper's numbers, :data:`PAPER_TABLE_12`, beside ours on ZINC). Runs whose resolved
  recipes differ only in ``model.layers`` form one row, labelled by the model (:func:`variant`);
  :func:`depth_pairs` tests each row's metric against SigGate-GT's (G1) at every depth, paired by seed;
* :func:`sparsity_table`: the share of exact zeros in the global attention and the layer's q or
  alpha per head, per layer (sparse-and-gated attention, ``sparsegate_gt``);
* :func:`rank_table`: the stable rank of the per-head attention outputs before and after the gate
  (Section 5.1's definition, Tables 1-2), on the trained models.

Every value is a mean over seeds. Runs recorded before the diagnostics covered the test set
(no ``split`` in their rows) are left out.

    python tools/report.py runs/zinc_cpu --reference zinc_cpu_g1 --diagnostics
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd
import yaml

from zoo.analysis.paired_tests import holm, paired_test
from zoo.analysis.rendering import markdown_table
from zoo.analysis.runs import ReportError
from zoo.analysis.tables import PERCENT_METRICS, order_datasets


G1 = "siggate_gt output sigmoid per-head"
"""The :func:`variant` of the paper's SigGate-GT (G1: a sigmoid gate per head on the attention output)."""
PAPER_TABLE_12 = {
    "gps": {"MAD": {4: 0.72, 8: 0.58, 10: 0.49, 12: 0.44, 16: 0.37},
            "mae": {4: 0.092, 8: 0.075, 10: 0.070, 12: 0.078, 16: 0.095}},
    G1: {"MAD": {4: 0.78, 8: 0.69, 10: 0.64, 12: 0.61, 16: 0.57},
         "mae": {4: 0.079, 8: 0.063, 10: 0.059, 12: 0.061, 16: 0.068}},
}
"""The SigGate-GT paper's Table 12 (canonical ZINC): MAD and test MAE of GraphGPS and SigGate-GT by
depth, keyed by :func:`variant`. The paper's "73% of its initial MAD at 16 layers versus 51%"
(Section 8.3) is MAD at 16 over MAD at 4 layers, the share the depth table prints as kept."""
PAPER_TABLE_13 = {"gps": {1: 2.84, 5: 2.31, 10: 1.72}, G1: {1: 3.02, 5: 2.89, 10: 2.61}}
"""The paper's Table 13: attention entropy (nats) at layers 1, 5 and 10 of its 10-layer ZINC models."""
PAPER_TABLE_15 = {"1": (0.71, 0.13, 2.4, 4.1), "2": (0.66, 0.16, 5.3, 5.8), "3": (0.62, 0.18, 8.1, 7.2),
                  "4": (0.54, 0.22, 15.0, 9.4), "5": (0.51, 0.23, 17.8, 10.1), "6": (0.53, 0.22, 16.1, 9.8),
                  "7": (0.55, 0.21, 14.2, 9.6), "8": (0.58, 0.19, 12.7, 9.1), "9": (0.60, 0.18, 10.4, 8.7),
                  "10": (0.62, 0.17, 9.8, 8.9), "avg": (0.58, 0.19, 12.3, 8.7)}
"""The paper's Table 15 as it prints it: SigGate-GT's gates per layer of its 10-layer ZINC model:
mean, sd, % below 0.1 and % above 0.9; ``avg`` pooled over (layer, head, example)."""
GATE_FORMATS = (".2f", ".2f", ".1f", ".1f")
"""Decimals of the gate table's mean, sd, % below 0.1 and % above 0.9 (ours and the paper's)."""
PAPER_DEPTH = 10
"""The depth of the paper's ZINC model, at which Tables 13 and 15 apply."""
PAPER_DATASETS = ("zinc", "zinc_smiles")
"""Datasets whose tables set the paper's numbers beside ours (ZINC-SMILES is the same task on
another 12k-molecule set, so compare directions, not values)."""


def variant(model: dict) -> str:
    """A row label naming the attention of a resolved recipe's model, without its depth.

    >>> variant({"name": "siggate_gt", "gate": "output", "gate_activation": "sigmoid", "gate_per_head": True})
    'siggate_gt output sigmoid per-head'
    >>> variant({"name": "gps", "ffn_dim": 160})
    'gps ffn_dim 160'
    """
    if model.get("name") == "siggate_gt":
        sharing = "per-head" if model.get("gate_per_head", True) else "shared"
        return f"siggate_gt {model.get('gate', 'output')} {model.get('gate_activation', 'sigmoid')} {sharing}"
    return str(model.get("name")) + (f" ffn_dim {model['ffn_dim']}" if model.get("ffn_dim") else "")


def _config(seed_dir: Path) -> dict:
    for path in (seed_dir.parent / "config.yaml", seed_dir / "config.yaml"):
        if path.exists():
            return yaml.safe_load(path.read_text())
    raise ReportError(f"no config.yaml found for the run in {seed_dir}")


def mechanism_runs(runs: pd.DataFrame) -> list[dict]:
    """One record per seed run of ``runs`` (:func:`zoo.analysis.runs.collect_runs` output) with
    test-set GPS diagnostics: model (the run's row name), model_name (the architecture), dataset,
    seed, ``layers`` (the diagnostics rows), ``depth``, ``variant``, ``family`` (the resolved recipe
    without its depth, hashed) and the test score."""
    records = []
    for run in runs.itertuples():
        seed_dir = Path(run.path)
        rows = json.loads((seed_dir / "metrics.json").read_text()).get("diagnostics")
        if not isinstance(rows, list) or not rows or "split" not in rows[0]:
            continue
        config = _config(seed_dir)
        model = dict(config.get("model", {}))
        model.pop("layers", None)  # the depth is the number of diagnostics rows
        identity = {k: v for k, v in config.items() if k not in ("name", "description", "seeds")} | {"model": model}
        records.append({"model": run.model, "model_name": model.get("name"), "dataset": run.dataset,
                        "seed": run.seed, "layers": rows, "depth": len(rows), "variant": variant(model),
                        "main_metric": run.main_metric,
                        "score": getattr(run, f"test_{run.main_metric}", np.nan),
                        "family": hashlib.sha256(json.dumps(identity, sort_keys=True, default=str).encode()).hexdigest()[:6]})
    return records


def _pooled_gate(layers: list[dict]) -> dict:
    """Gate statistics pooled over layers, weighting each by its number of gate values."""
    count = np.array([row["gate_count"] for row in layers], dtype=float)
    weight = count / count.sum()
    mean = float(weight @ [row["gate_mean"] for row in layers])
    second = float(weight @ [row["gate_sd"] ** 2 + row["gate_mean"] ** 2 for row in layers])
    return {"mean": mean, "sd": max(second - mean**2, 0.0) ** 0.5,
            "below": float(weight @ [row["gate_below_0.1"] for row in layers]),
            "above": float(weight @ [row["gate_above_0.9"] for row in layers])}


def gate_table(records: list[dict]) -> pd.DataFrame:
    """Index (model, dataset, layer), layer 1.. and ``avg``; columns mean, sd, below, above (shares),
    head_min / head_max (smallest and largest per-head mean gate), n (seeds). Gated runs only."""
    rows = []
    for record in records:
        layers = record["layers"]
        if "gate_mean" not in layers[0]:
            continue
        for row in layers:
            heads = row["gate_mean_per_head"]
            rows.append({"model": record["model"], "dataset": record["dataset"], "layer": str(row["layer"] + 1),
                         "mean": row["gate_mean"], "sd": row["gate_sd"], "below": row["gate_below_0.1"],
                         "above": row["gate_above_0.9"], "head_min": min(heads), "head_max": max(heads)})
        heads = [m for row in layers for m in row["gate_mean_per_head"]]
        rows.append({"model": record["model"], "dataset": record["dataset"], "layer": "avg", **_pooled_gate(layers),
                     "head_min": min(heads), "head_max": max(heads)})
    if not rows:
        return pd.DataFrame()
    frame = pd.DataFrame(rows)
    groups = frame.groupby(["model", "dataset", "layer"], sort=False)
    return groups.mean().assign(n=groups.size())


def entropy_table(records: list[dict]) -> pd.DataFrame:
    """Index (model, dataset, layer) from 1; columns entropy (mean over query nodes and heads, nats),
    head_sd (sd over heads of the per-head mean entropy), n (seeds)."""
    rows = [{"model": r["model"], "dataset": r["dataset"], "layer": row["layer"] + 1,
             "entropy": row["attention_entropy"], "head_sd": float(np.std(row["attention_entropy_per_head"]))}
            for r in records for row in r["layers"]]
    frame = pd.DataFrame(rows)
    groups = frame.groupby(["model", "dataset", "layer"], sort=False)
    return groups.mean().assign(n=groups.size())


def mad_depth_table(records: list[dict]) -> pd.DataFrame:
    """Index (dataset, variant, family, depth); columns mad (the last layer's output), mad_sd (over
    seeds), kept (mad over the mad of the row's shallowest depth, as the paper's Section 8.3),
    score (the test main metric), score_sd, main_metric, models (the recipe names), n (seeds)."""
    rows = [{"dataset": r["dataset"], "variant": r["variant"], "family": r["family"], "depth": r["depth"],
             "mad": r["layers"][-1]["mad"], "score": r["score"], "main_metric": r["main_metric"],
             "model": r["model"]} for r in records]
    groups = pd.DataFrame(rows).groupby(["dataset", "variant", "family", "depth"])
    table = groups[["mad", "score"]].mean()
    table["kept"] = table.mad / table.mad.groupby(level=["dataset", "variant", "family"]).transform("first")
    table["mad_sd"], table["score_sd"] = groups.mad.std(), groups.score.std()
    table["main_metric"] = groups.main_metric.first()
    table["models"] = groups.model.agg(lambda names: ", ".join(sorted(set(names))))
    table["n"] = groups.size()
    return table


def depth_pairs(records: list[dict]) -> pd.DataFrame:
    """Index (dataset, variant, family, depth) of each row of :func:`mad_depth_table` but its
    dataset's reference (the G1 row, the first of them if several; else the first row), at every
    depth where the two share at least 2 seeds; columns diff (the reference's test main metric
    minus this row's, mean over the shared seeds, as in the results table's paired tests), p
    (:func:`zoo.analysis.paired_tests.paired_test`), holm (p Holm-corrected over the row's depths),
    test (``t`` or ``wilcoxon``), n (shared seeds), reference (its variant)."""
    frame = pd.DataFrame([{"dataset": r["dataset"], "variant": r["variant"], "family": r["family"],
                           "depth": r["depth"], "seed": r["seed"], "score": r["score"]} for r in records])
    rows = []
    for dataset, runs in frame.groupby("dataset"):
        # recipes alike but for their name give one run a seed: their mean
        scores = runs.groupby(["variant", "family", "depth", "seed"]).score.mean()
        labels = sorted(set(zip(runs.variant, runs.family)))
        reference = next((label for label in labels if label[0] == G1), labels[0])
        ours = scores.xs(reference, level=["variant", "family"])
        for label in [label for label in labels if label != reference]:
            theirs = scores.xs(label, level=["variant", "family"])
            tested = []
            depths = set(ours.index.get_level_values("depth")) & set(theirs.index.get_level_values("depth"))
            for depth in sorted(depths):
                a, b = ours.xs(depth, level="depth"), theirs.xs(depth, level="depth")
                shared = a.index.intersection(b.index)
                if len(shared) >= 2:
                    result = paired_test(a[shared].to_numpy(), b[shared].to_numpy())
                    tested.append({"dataset": dataset, "variant": label[0], "family": label[1], "depth": depth,
                                   "diff": result["mean_diff"], "p": result["p_value"], "test": result["test"],
                                   "n": len(shared), "reference": reference[0]})
            rows += [{**row, "holm": value} for row, value in zip(tested, holm([row["p"] for row in tested]))]
    if not rows:
        return pd.DataFrame()
    return pd.DataFrame(rows).set_index(["dataset", "variant", "family", "depth"])


def rank_table(records: list[dict]) -> pd.DataFrame:
    """Index (model, dataset); columns ungated / gated (per-head stable rank averaged over graphs,
    heads and layers, mean over seeds), gain (% change of the means, as the paper's Table 1),
    up (seeds whose gated mean exceeds the ungated one), n (seeds)."""
    rows = []
    for r in records:
        ungated = float(np.nanmean([row["stable_rank_ungated"] for row in r["layers"]]))
        gated = float(np.nanmean([row["stable_rank"] for row in r["layers"]]))
        rows.append({"model": r["model"], "dataset": r["dataset"], "ungated": ungated, "gated": gated,
                     "up": float(gated > ungated)})
    groups = pd.DataFrame(rows).groupby(["model", "dataset"], sort=False)
    table = groups[["ungated", "gated"]].mean()
    table["gain"] = 100 * (table.gated / table.ungated - 1)
    table["up"], table["n"] = groups.up.sum().astype(int), groups.size()
    return table


def sparsity_table(records: list[dict]) -> pd.DataFrame:
    """Index (model, dataset, layer) from 1; columns zeros (share of exact-zero weights over real
    query-key pairs), zeros_head_min / zeros_head_max (per-head shares), index (``q``, ``alpha`` or
    ``-`` for softmax and sparsemax), index_mean / index_min / index_max (over heads), n (seeds);
    means over seeds. Runs recorded before the zeros were counted are left out."""
    rows = []
    for r in records:
        for row in r["layers"]:
            if "attention_zeros" not in row:
                continue
            name = "q" if "q" in row else "alpha" if "alpha" in row else "-"
            values = row.get(name, [np.nan])
            rows.append({"model": r["model"], "dataset": r["dataset"], "layer": row["layer"] + 1,
                         "zeros": row["attention_zeros"], "zeros_head_min": min(row["attention_zeros_per_head"]),
                         "zeros_head_max": max(row["attention_zeros_per_head"]), "index": name,
                         "index_mean": float(np.mean(values)), "index_min": min(values), "index_max": max(values)})
    if not rows:
        return pd.DataFrame()
    groups = pd.DataFrame(rows).groupby(["model", "dataset", "layer"], sort=False)
    table = groups.mean(numeric_only=True)
    table["index"], table["n"] = groups["index"].first(), groups.size()
    return table


def _pm(mean: float, sd: float, spec: str) -> str:
    if pd.isna(mean):
        return "-"
    return format(mean, spec) + ("" if pd.isna(sd) else f" ± {format(sd, spec)}")


def _render_gates(table: pd.DataFrame, records: list[dict]) -> list[str]:
    if table.empty:
        return ["No gated run."]
    lines = []
    for (model, dataset), block in table.groupby(level=["model", "dataset"], sort=False):
        block = block.droplevel(["model", "dataset"])
        paper = PAPER_TABLE_15 if _paper_model(records, model, dataset) == G1 else {}
        n = int(block.n.iloc[0])
        lines += ["", f"**{model}** on {dataset} ({n} seed{'s' * (n != 1)})", ""]
        rows = []
        for layer, row in block.iterrows():
            ours = (row["mean"], row.sd, 100 * row.below, 100 * row.above)
            cells = [format(value, spec) for value, spec in zip(ours, GATE_FORMATS)]
            if layer in paper:
                cells = [f"{cell} [{their:{spec}}]" for cell, their, spec in zip(cells, paper[layer], GATE_FORMATS)]
            rows.append([("**avg**" if layer == "avg" else layer), *cells, f"{row.head_min:.2f}-{row.head_max:.2f}"])
        lines += markdown_table(["layer", "mean", "sd", "% < 0.1", "% > 0.9", "head means"], rows)
    return lines[1:]


def _paper_model(records: list[dict], model: str, dataset: str) -> str | None:
    """``model``'s :func:`variant` if the paper's Tables 13 and 15 describe it (its depth, on ZINC)."""
    record = next(r for r in records if r["model"] == model and r["dataset"] == dataset)
    return record["variant"] if dataset in PAPER_DATASETS and record["depth"] == PAPER_DEPTH else None


def _render_entropy(table: pd.DataFrame, records: list[dict]) -> list[str]:
    depth = int(table.index.get_level_values("layer").max())
    rows = []
    for (model, dataset), block in table.groupby(level=["model", "dataset"], sort=False):
        block = block.droplevel(["model", "dataset"])
        paper = PAPER_TABLE_13.get(_paper_model(records, model, dataset), {})
        cells = [_pm(block.entropy.get(k, np.nan), block.head_sd.get(k, np.nan), ".2f") for k in range(1, depth + 1)]
        rows.append([model, dataset, str(int(block.n.max()))] + [
            f"{cell} [{paper[k]:.2f}]" if k in paper else cell for k, cell in enumerate(cells, start=1)])
    return markdown_table(["model", "dataset", "n", *(f"layer {k}" for k in range(1, depth + 1))], rows)


def _render_depth(table: pd.DataFrame, pairs: pd.DataFrame) -> list[str]:
    lines = []
    for dataset in order_datasets(table.index.get_level_values("dataset")):
        block = table.xs(dataset, level="dataset")
        depths = sorted(set(block.index.get_level_values("depth")))
        metric = block.main_metric.iloc[0]
        scale = 100.0 if metric in PERCENT_METRICS else 1.0
        digits = ".2f" if scale == 100.0 else ".4f"
        labels = block.index.droplevel("depth").unique()
        names = _row_names(block, labels)
        rows = []
        kept = f"MAD % of {depths[0]} layers"
        for quantity in ("MAD", kept, metric):
            for label, family in labels:
                cells = block.xs((label, family), level=["variant", "family"])
                name = names[label, family]
                paper = PAPER_TABLE_12.get(label, {}) if dataset in PAPER_DATASETS else {}

                def cell(d):
                    if d not in cells.index:
                        return "-"
                    row = cells.loc[d]
                    if quantity == "MAD":
                        ours = _pm(row.mad, row.mad_sd, ".3f")
                        theirs = _printed(paper.get("MAD", {}).get(d), ".2f")
                    elif quantity == kept:
                        ours = f"{100 * row.kept:.0f}"
                        mads = paper.get("MAD", {})
                        theirs = f"{100 * mads[d] / mads[depths[0]]:.0f}" if d in mads and depths[0] in mads else None
                    else:
                        ours = _pm(scale * row.score, scale * row.score_sd, digits)
                        theirs = _printed(paper.get(metric, {}).get(d), ".3f")
                    return ours if theirs is None else f"{ours} [{theirs}]"
                rows.append([name, quantity] + [cell(d) for d in depths])
        for label, family in labels:
            if pairs.empty or (dataset, label, family) not in pairs.index.droplevel("depth"):
                continue
            tested = pairs.xs((dataset, label, family), level=["dataset", "variant", "family"])
            name = names[label, family]
            reference = "G1" if tested.reference.iloc[0] == G1 else tested.reference.iloc[0]
            rows.append([name, f"{reference} − this row, {metric}, paired (test p, Holm)"] + [
                f"{scale * tested.loc[d, 'diff']:+{digits}} ({tested.loc[d, 'test']} {tested.loc[d, 'p']:.3f}, "
                f"{tested.loc[d, 'holm']:.3f}), n {tested.loc[d, 'n']}" if d in tested.index else "-" for d in depths])
        lines += ["", f"{dataset} (recipes: {'; '.join(sorted(set(block.models)))})", ""]
        lines += markdown_table(["model", "", *(f"{d} layers" for d in depths)], rows)
    return lines[1:]


def _row_names(block: pd.DataFrame, labels: pd.Index) -> dict[tuple[str, str], str]:
    """Each (variant, family) row's name: the variant, and where two rows share it, the report rows
    (``models``) its runs came from, then the family hash if even those coincide."""
    shared = {v for v, _ in labels if sum(1 for w, _ in labels if w == v) > 1}
    models = {(v, f): ", ".join(sorted({m for cell in block.xs((v, f), level=["variant", "family"]).models
                                         for m in cell.split(", ")})) for v, f in labels}
    names = {(v, f): f"{v} ({models[v, f]})" if v in shared else v for v, f in labels}
    return {key: f"{name} [{key[1]}]" if list(names.values()).count(name) > 1 else name for key, name in names.items()}


def _printed(value: float | None, spec: str) -> str | None:
    """A paper's number as it prints it (``spec``: its decimals), or None where it has none."""
    return None if value is None else format(value, spec)


def _render_ranks(table: pd.DataFrame) -> list[str]:
    return markdown_table(["model", "dataset", "n", "srank(Y)", "srank(Y ⊙ g)", "Δ %", "seeds up"], [
        [model, dataset, str(int(row.n)), f"{row.ungated:.3f}", f"{row.gated:.3f}", f"{row.gain:+.2f}",
         f"{int(row.up)}/{int(row.n)}"] for (model, dataset), row in table.iterrows()])


def _render_sparsity(table: pd.DataFrame, softmax_only: bool) -> list[str]:
    if table.empty:
        return ["No run recorded exact zeros (runs before they were counted must be retrained)."]
    if softmax_only:  # zeros only by underflow: one line, not a table of layers at 0.0
        (model, dataset, layer), row = max(table.iterrows(), key=lambda item: item[1].zeros)
        return [f"Every model here normalises its global attention with softmax, whose weights are exactly zero "
                f"only by underflow: at most {100 * row.zeros:.1f}% of a layer's ({model} on {dataset}, layer "
                f"{layer}). The table per layer is printed when a run's attention is sparse (sparsegate_gt)."]
    rows = []
    for (model, dataset, layer), row in table.iterrows():
        index = "-" if row["index"] == "-" else \
            f"{row['index']} {row.index_mean:.3f} ({row.index_min:.3f}-{row.index_max:.3f})"
        rows.append([model, dataset, str(layer), str(int(row.n)), f"{100 * row.zeros:.1f}",
                     f"{100 * row.zeros_head_min:.1f}-{100 * row.zeros_head_max:.1f}", index])
    return markdown_table(["model", "dataset", "layer", "n", "% zeros", "% zeros per head", "index: mean (heads)"], rows)


def render_mechanism(runs: pd.DataFrame) -> str:
    """The five mechanism tables as Markdown, from :func:`zoo.analysis.runs.collect_runs` output.

    >>> from zoo.analysis import collect_runs
    >>> markdown = render_mechanism(collect_runs("runs/zinc_cpu/zinc_cpu_g1"))  # records in git
    >>> print("\\n".join(line for line in markdown.splitlines() if line.startswith("###")))
    ### Gate statistics per layer (the paper's Table 15)
    ### Attention entropy per layer (the paper's Table 13)
    ### MAD of the final node representations at depth (the paper's Table 12)
    ### Exact zeros and the learned index of the global attention per layer
    ### Stable rank of the attention output with and without the gate (Section 5.1, Tables 1-2)
    >>> print(next(line for line in markdown.splitlines() if line.startswith("| **avg**")))  # gate, [paper]
    | **avg** | 0.55 [0.58] | 0.27 [0.19] | 6.8 [12.3] | 9.1 [8.7] | 0.24-0.62 |
    """
    records = mechanism_runs(runs)
    if not records:
        raise ReportError("no run has test-set GPS / SigGate-GT diagnostics (metrics.json 'diagnostics' rows with "
                          "'split'; runs recorded before they existed must be retrained)")
    sections = [
        ("Gate statistics per layer (the paper's Table 15)", _render_gates(gate_table(records), records),
         "Means over seeds of statistics over every test node, head and gate unit; avg pools them over the "
         "layers (the paper's pooled aggregate); head means: the smallest and largest per-head mean gate. "
         f"[bracketed], for a {PAPER_DEPTH}-layer SigGate-GT (G1) on ZINC or ZINC-SMILES: the paper's Table 15."),
        ("Attention entropy per layer (the paper's Table 13)", _render_entropy(entropy_table(records), records),
         "-sum_j a_ij log a_ij (nats) of each test node's attention row over its graph, averaged over nodes and "
         "heads, mean over seeds ± the sd over heads of the per-head means (mean over seeds). [bracketed], for "
         f"{PAPER_DEPTH}-layer GraphGPS and SigGate-GT models on ZINC or ZINC-SMILES: the paper's Table 13."),
        ("MAD of the final node representations at depth (the paper's Table 12)",
         _render_depth(mad_depth_table(records), depth_pairs(records)),
         "MAD (Chen et al. 2020, cosine, pairs within a graph) of the last layer's output on the test set, "
         "mean ± sd over seeds; MAD % of the shallowest depth: that depth's MAD kept, as the paper's Section 8.3 "
         "(its 73% and 51% are 16 over 4 layers); the metric is the test main metric (mean ± sd). Runs whose "
         "recipes differ only in model.layers share a row, named by its architecture, and by its report rows (in "
         "parentheses) where two rows share an architecture; paired: SigGate-GT's test metric (G1; else the first "
         "row's) minus the row's, on the seeds both have at that depth, mean, with the paired test (t; wilcoxon "
         "where Shapiro rejects normality), its p, and that p Holm-corrected over the row's depths. "
         "[bracketed], on ZINC and ZINC-SMILES: the SigGate-GT paper's Table 12 (canonical ZINC, 2000 epochs; "
         "its MAD ratios for the kept share)."),
        ("Exact zeros and the learned index of the global attention per layer",
         _render_sparsity(sparsity_table(records), softmax_only=not any(r["model_name"] == "sparsegate_gt"
                                                                         for r in records)),
         "Share of exact-zero attention weights over every real (query, key) pair of the test graphs (padding "
         "excluded), mean over seeds, and the range over heads; index: the layer's q (q-softmax) or alpha (entmax) "
         "per head, mean over seeds and heads (smallest-largest head); '-' for softmax and sparsemax."),
        ("Stable rank of the attention output with and without the gate (Section 5.1, Tables 1-2)",
         _render_ranks(rank_table(records)),
         "Stable rank ||Y||_F^2 / ||Y||_2^2 of each head's output on each test graph, averaged over graphs, heads and layers; "
         "Y before the gate, Y ⊙ g after it (output gates only: for G2, G3 and ungated models the two coincide); "
         "Δ: change of the seed means; seeds up: seeds whose gated mean is larger."),
    ]
    out = []
    for title, lines, note in sections:
        out += [f"### {title}", "", *lines, "", note, ""]
    return "\n".join(out)
