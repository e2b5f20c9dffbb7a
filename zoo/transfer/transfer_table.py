"""The transfer benchmark: a pretrained checkpoint fine-tuned on small MoleculeNet sets, against
the same architecture trained from scratch for the same epochs and a Morgan-fingerprint random
forest, on identical seeded random splits; test RMSE mean +- sd over seeds.

>>> rows = transfer_table("zinc_siggate", ["esol", "freesolv"], seeds=range(5), epochs=30)  # doctest: +SKIP
>>> print(format_transfer_table(rows))  # doctest: +SKIP
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Sequence

from zoo.analysis import paired_test
from zoo.baselines import fit_predict_forest
from zoo.data import csv_card_file, load_card, load_csv_dataset
from zoo.engine.checkpoint import write_json
from zoo.engine.graph_metrics import graph_metric
from zoo.models.pretrained import load_pretrained
from zoo.transfer.finetuning import finetune
from zoo.transfer.prediction import TransferError

METHODS = ("finetuned", "scratch", "morgan_rf")


def forest_rmse(path: Path, smiles_col: str, target_cols: list[str], seed: int, n_estimators: int = 500) -> float:
    """Test RMSE of the Morgan random forest on the split ``finetune(split="random")`` uses for ``seed``."""
    data = load_csv_dataset(path, smiles_col, target_cols, split="random", seed=seed, progress=False)
    train, test = data.split["train"].tolist(), data.split["test"].tolist()
    pred = fit_predict_forest([data.smiles[i] for i in train], data.targets[train].numpy(),
                              [data.smiles[i] for i in test], seed=seed, n_estimators=n_estimators)
    return graph_metric("rmse", data.targets[test].numpy(), pred)


def transfer_table(pretrained: str, datasets: Sequence[str], *, seeds=range(5), epochs: int = 30,
                   out: str | Path = "runs/transfer", progress: bool = True) -> list[dict]:
    """One row per dataset card: per-seed test RMSE of each method, and a paired test fine-tuned vs scratch.

    >>> rows = transfer_table("zinc_siggate", ["esol", "freesolv"], seeds=range(5))  # hours on a CPU  # doctest: +SKIP
    >>> rows[0]["finetuned_vs_scratch"]["p_value"]  # doctest: +SKIP
    """
    out, seeds = Path(out), list(dict.fromkeys(seeds))
    if len(seeds) < 2:
        raise TransferError(f"the table needs at least 2 distinct seeds for its sd and paired test, got {seeds}")
    rows = []
    for name in datasets:
        card = load_card(name)
        path, smiles_col = csv_card_file(name), card["source"]["smiles_column"]
        targets = list(card["source"]["target_columns"])
        rmse = {}
        for method, scratch in (("finetuned", False), ("scratch", True)):
            summary = _finished(out / name / method / "metrics.json", pretrained, path, seeds, epochs, scratch)
            if summary is None:
                summary = finetune(pretrained, path, smiles_col, targets, task="regression", split="random",
                                   epochs=epochs, seeds=seeds, from_scratch=scratch, out=out / name / method,
                                   progress=progress)
            rmse[method] = [summary["per_seed"][str(s)]["test"]["rmse"] for s in seeds]
        rmse["morgan_rf"] = [forest_rmse(path, smiles_col, targets, s) for s in seeds]
        rows.append({"dataset": name, "target": targets, "pretrained": pretrained, "epochs": epochs, "seeds": seeds,
                     "test_rmse": rmse, "finetuned_vs_scratch": paired_test(rmse["finetuned"], rmse["scratch"])})
        write_json(rows, out / "transfer_table.json")
    return rows


def _finished(summary_path: Path, pretrained: str, data: Path, seeds: list, epochs: int, scratch: bool) -> dict | None:
    """The summary of an earlier identical ``finetune`` call in this folder (same weights, data, seeds,
    epochs), so a rerun after an interruption skips what already finished; else None."""
    if not summary_path.is_file():
        return None
    summary = json.loads(summary_path.read_text())
    same = (summary.get("data"), summary.get("seeds"), summary.get("epochs"), summary.get("from_scratch")) == \
        (str(data), seeds, epochs, scratch)
    if same and not scratch:
        same = summary["pretrained"].get("weights_sha256") == load_pretrained(pretrained).card["weights_sha256"]
    if same:
        print(f"reusing the finished runs in {summary_path.parent}")
    return summary if same else None


def format_transfer_table(rows: list[dict]) -> str:
    """Markdown: test RMSE mean +- sd per dataset and method (lowest mean in bold), then the paired test."""
    lines = ["| dataset | fine-tuned | from scratch | Morgan RF | fine-tuned vs scratch |", "|---|---|---|---|---|"]
    for row in rows:
        means = {m: statistics.fmean(row["test_rmse"][m]) for m in METHODS}
        cells = []
        for m in METHODS:
            values = row["test_rmse"][m]
            sd = statistics.stdev(values) if len(values) > 1 else 0.0
            cell = f"{means[m]:.3f} ± {sd:.3f}"
            cells.append(f"**{cell}**" if means[m] == min(means.values()) else cell)
        test = row["finetuned_vs_scratch"]
        cells.append(f"{test['mean_diff']:+.3f} ({test['test']}, p = {test['p_value']:.3g})")
        lines.append(f"| {row['dataset']} | " + " | ".join(cells) + " |")
    n = len(rows[0]["seeds"]) if rows else 0
    lines.append(f"\nTest RMSE over {n} seeds (seeded random 80/10/10 splits, the same for all three methods); "
                 f"networks trained {rows[0]['epochs'] if rows else '-'} epochs, best validation RMSE epoch.")
    return "\n".join(lines)
