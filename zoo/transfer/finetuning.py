"""Fine-tune a pretrained zoo checkpoint on a CSV of SMILES and targets (or a loaded dataset), over seeds.

The CSV is featurized by the featurizer the checkpoint's card names (OGB's or dgllife's); a
loaded dataset must have been featurized by it. Each seed starts from the pretrained weights with a fresh head (or, ``from_scratch``, from a
freshly initialised model of the same architecture), trains with the checkpoint's recipe
(epochs, lr and batch size overridable), keeps the best validation epoch and writes
``<out>/seed<k>/`` (the trainer's files plus ``model.safetensors`` and its card ``model.json``, a zoo checkpoint);
``<out>/metrics.json`` holds every seed and the mean and sd of each metric.

>>> summary = finetune("zinc_siggate", "my.csv", target_cols=["logS"], epochs=30, seeds=[0, 1, 2])  # doctest: +SKIP
>>> summary["summary"]["test"]["rmse"]["mean"]  # doctest: +SKIP
"""
from __future__ import annotations

import copy
import os
import shutil
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from zoo.analysis import summarize_seeds
from zoo.data import DatasetError, GraphData, featurizer_from_spec, load_csv_dataset
from zoo.data.molecules import column_indices, format_report, read_csv_rows
from zoo.engine.checkpoint import write_json
from zoo.engine.environment import environment
from zoo.engine.export import model_card
from zoo.engine.graph_metrics import graph_metric
from zoo.engine.graph_trainer import train_graph_model
from zoo.engine.recipe import build_recipe, parse_seeds
from zoo.engine.reproducibility import seed_everything
from zoo.models import create_model
from zoo.models.capabilities import HasHead, HasPositionalEncodings
from zoo.models.pretrained import save_pretrained
from zoo.models.registry import data_arguments
from zoo.transfer.prediction import TransferError, card_featurizer, resolve_model

TASKS = {
    "regression": ("graph_regression", "rmse", ("rmse", "mae", "r2")),
    "classification": ("graph_classification", "roc_auc", ("roc_auc", "ap")),
}
"""task -> (graph task, model-selection metric, reported metrics)."""


def finetune(pretrained, data, smiles_col: str = "smiles", target_cols: Sequence[str] | str | None = None, *,
             task: str = "regression", split: str = "random", epochs: int = 50, seeds=(0,),
             freeze_encoder: bool = False, from_scratch: bool = False, lr: float | None = None,
             batch_size: int | None = None, out: str | Path = "runs/finetune", strict: bool = False,
             progress: bool = True) -> dict:
    """Fine-tune ``pretrained`` (name, path, or a loaded model with ``.card``) on ``data``: the path
    of a CSV, featurized with the checkpoint's featurizer, or a :class:`~zoo.data.GraphData` (e.g.
    ``load_graph_dataset("bbbp", featurizer=...)``) featurized alike, whose split every seed uses
    (``smiles_col`` and ``split`` then do not apply; ``target_cols`` defaults to its card's).

    ``task``: ``"regression"`` (selects on RMSE; reports RMSE, MAE, R2) or ``"classification"``
    (0/1 labels; selects on ROC-AUC; reports ROC-AUC, AP). Empty target cells are missing labels,
    ignored by the loss. ``split``: ``"random"`` (seeded per seed) or ``"scaffold"``.
    ``freeze_encoder``: train the head only (the encoder's weights, BatchNorm statistics and
    dropout stay frozen). Invalid SMILES are skipped and reported once (``strict=True``: an
    error). Existing ``<out>/seed<k>/`` folders are replaced. Returns what ``<out>/metrics.json``
    holds.

    >>> summary = finetune("zinc_siggate", "my_solubility.csv", "smiles", ["logS"], epochs=30,  # doctest: +SKIP
    ...                    seeds=range(5), split="scaffold", out="runs/finetune/logS")
    >>> summary["per_seed"]["0"]["test"]["rmse"]  # doctest: +SKIP
    """
    if task not in TASKS:
        raise TransferError(f"task must be one of {list(TASKS)}, got {task!r}")
    graph_task, metric, reported = TASKS[task]
    if isinstance(data, GraphData) and not target_cols:
        target_cols = data.card.get("source", {}).get("target_columns") or [str(t) for t in range(data.num_tasks)]
    if not target_cols:
        raise TransferError("target_cols is missing: name the CSV column(s) to predict, e.g. target_cols=['pIC50']")
    target_cols = [target_cols] if isinstance(target_cols, str) else list(target_cols)
    if len(set(target_cols)) < len(target_cols):
        twice = sorted({c for c in target_cols if target_cols.count(c) > 1})
        raise TransferError(f"target_cols names {twice} more than once; list each target column once")
    if isinstance(epochs, bool) or not isinstance(epochs, int) or epochs < 1:
        raise TransferError(f"epochs must be an int >= 1, got {epochs!r}")
    if lr is not None and not lr > 0:
        raise TransferError(f"lr must be > 0, got {lr!r}")
    if from_scratch and freeze_encoder:
        raise TransferError("from_scratch=True with freeze_encoder=True would train a head on a random, frozen "
                            "encoder; drop one of them")
    if split not in ("random", "scaffold"):
        raise TransferError(f"split must be 'random' or 'scaffold', got {split!r}")
    seeds = list(dict.fromkeys(parse_seeds(seeds if isinstance(seeds, (int, str)) else list(seeds))))
    path = None if isinstance(data, GraphData) else Path(data)
    where = data.name if path is None else str(path)  # what the data is called in records
    if path is None:  # a loaded dataset brings its own split and featurized molecules
        smiles_col, split = None, "given"
    if path is not None:
        _check_columns(path, smiles_col, target_cols)
    parent = resolve_model(pretrained)
    featurizer = card_featurizer(parent.card)
    if path is None:
        _check_dataset(data, featurizer, graph_task, target_cols)
    if not isinstance(parent, HasHead):
        raise TransferError(f"architecture {parent.card.get('architecture')!r} has no replaceable head (HasHead); "
                            "fine-tuning needs a graph model with one, such as siggate_gt or gps")
    pe = parent.pe_spec() if isinstance(parent, HasPositionalEncodings) else None
    origin = "from scratch" if from_scratch else _parent_record(pretrained, parent.card)
    recipe = _recipe(parent.card, data.name if path is None else path.stem, where, featurizer.name, graph_task,
                     epochs, seeds, lr, batch_size)
    options = {"smiles_col": smiles_col, "target_cols": target_cols, "task": task, "split": split, "epochs": epochs,
               "seeds": seeds, "freeze_encoder": freeze_encoder, "from_scratch": from_scratch, "lr": lr,
               "batch_size": batch_size, "out": os.fspath(out), "strict": strict}
    source = os.fspath(pretrained) if isinstance(pretrained, (str, os.PathLike)) else "<loaded model>"
    command = (f"zoo.transfer.finetune({source!r}, {where!r}, "
               + ", ".join(f"{key}={value!r}" for key, value in options.items()) + ")")
    out = Path(out)
    datasets = dict.fromkeys(seeds, data) if path is None else {seed: load_csv_dataset(
        path, smiles_col, target_cols, task=graph_task, metric=metric, split=split, seed=seed, strict=strict,
        pe=pe, progress=progress, featurizer=featurizer) for seed in seeds}
    for dataset in [data] if path is None else datasets.values():  # every split, before any training
        _check_labelled(dataset, target_cols, where)
        if graph_task == "graph_classification":
            _check_binary(dataset, target_cols)
        _check_split(dataset, reported, split)
    first = datasets[seeds[0]]
    if first.report:
        print(f"{where}: skipped {len(first.report)} row(s) with invalid SMILES:\n{format_report(first.report)}")
    runs, trained_with = [], environment()
    for seed, dataset in datasets.items():
        model = _start_model(parent, len(target_cols), seed, from_scratch, freeze_encoder)
        seed_dir = out / f"seed{seed}"
        if seed_dir.exists():
            shutil.rmtree(seed_dir)
        metrics = train_graph_model(recipe, dataset, seed, seed_dir, progress=progress, model=model,
                                    extra_metrics=reported)
        card = model_card(f"{recipe.name}_seed{seed}", model, recipe, metrics, trained_with,
                          num_outputs=len(target_cols), target_columns=target_cols, command=command,
                          split={"kind": split, "seed": seed, "sizes": dataset.sizes,
                                 "source": dataset.split_source},
                          dataset=_dataset_record(dataset), featurizer=dataset.featurizer, parent=origin,
                          freeze_encoder=freeze_encoder)
        save_pretrained(model, card, seed_dir / "model.safetensors")
        if progress:
            print(f"seed {seed}: best epoch {metrics['best_epoch']}, val {metric} "
                  f"{metrics['final']['val'][metric]:.4f}, test {metric} {metrics['final']['test'][metric]:.4f}")
        runs.append(metrics)
    summary = {
        "pretrained": origin, "data": where, "smiles_column": smiles_col, "target_columns": target_cols,
        "task": task, "metric": metric, "metrics": list(reported), "split": split, "epochs": epochs,
        "freeze_encoder": freeze_encoder, "from_scratch": from_scratch, "seeds": seeds,
        "per_seed": {str(seed): {"best_epoch": run["best_epoch"], "val": run["final"]["val"],
                                 "test": run["final"]["test"]} for seed, run in zip(seeds, runs)},
        "summary": summarize_seeds(runs),
    }
    write_json(summary, out / "metrics.json")
    return summary


def _check_columns(path: Path, smiles_col: str, target_cols: list[str]) -> None:
    """A missing column is a :class:`TransferError` listing the file's columns (before featurizing)."""
    header, _ = read_csv_rows(path, 0)
    try:
        column_indices(path, header, [smiles_col, *target_cols])
    except DatasetError as err:
        raise TransferError(str(err)) from None


def _check_dataset(data: GraphData, featurizer, graph_task: str, target_cols: list[str]) -> None:
    """A loaded dataset must be featurized as the checkpoint was, fit its task and name its targets."""
    try:
        made_by = featurizer_from_spec(data.featurizer)
    except DatasetError as err:
        raise TransferError(f"dataset {data.name!r}: {err}") from None
    if type(made_by) is not type(featurizer):
        raise TransferError(f"dataset {data.name!r} was featurized with {made_by.name!r} but the checkpoint reads "
                            f"{featurizer.name!r} features; load it with featurizer={featurizer.name!r} "
                            "(load_graph_dataset / load_csv_dataset), or pass the CSV's path")
    if data.task != graph_task:
        raise TransferError(f"dataset {data.name!r} is a {data.task} dataset; pass the matching task=")
    if len(target_cols) != data.num_tasks:
        raise TransferError(f"target_cols {target_cols} names {len(target_cols)} column(s) but dataset "
                            f"{data.name!r} has {data.num_tasks} target(s)")


def _check_labelled(dataset, target_cols: list[str], where: str) -> None:
    """Every target column needs a label somewhere (empty and nan cells are missing labels)."""
    counts = (~torch.isnan(dataset.targets)).sum(0).tolist()
    empty = [column for column, count in zip(target_cols, counts) if count == 0]
    if empty:
        raise TransferError(f"target column {empty[0]!r} of {where} holds no number in its {len(dataset)} usable "
                            "row(s) (every cell is empty or nan, a missing label); fill in the labels or leave it out")


def _check_binary(dataset, target_cols: list[str]) -> None:
    """Classification labels must be 0, 1 or missing; name the first column and value that is not."""
    targets = dataset.targets.numpy()
    for t, column in enumerate(target_cols):
        values = targets[:, t]
        bad = values[~np.isnan(values) & ~np.isin(values, (0.0, 1.0))]
        if len(bad):
            raise TransferError(
                f"classification needs 0/1 labels (empty = missing), but column {column!r} holds {bad[0]:g} "
                f"({len(bad)} such value(s)); use task='regression' for continuous targets, or recode the labels."
            )


def _check_split(dataset, reported: tuple[str, ...], split: str) -> None:
    """Every reported metric must be computable on each split, or training would fail at its end."""
    for part in ("train", "val", "test"):
        targets = dataset.targets[dataset.split[part]]
        for name in reported:
            try:
                graph_metric(name, targets, torch.zeros_like(targets))
            except ValueError as err:
                hint = " or split='random'" if split == "scaffold" else ""
                raise DatasetError(
                    f"the {part} split has {len(targets)} of {len(dataset)} usable molecule(s) "
                    f"(sizes {dataset.sizes}) and cannot give {name}: {err}. Use a larger CSV{hint}."
                ) from None


def _start_model(parent, num_outputs: int, seed: int, from_scratch: bool, freeze_encoder: bool):
    """A copy of ``parent`` with a fresh seeded head, or a fresh seeded model of its architecture."""
    seed_everything(seed)
    if from_scratch:
        card = parent.card
        model = create_model(card["architecture"], **{**card["model_args"], "num_outputs": num_outputs})
    else:
        model = copy.deepcopy(parent)
        model.reset_head(num_outputs)
    if freeze_encoder:
        _freeze_encoder(model)
    return model


def _freeze_encoder(model) -> None:
    """Only ``model.head`` trains; every other submodule has frozen parameters and stays in eval mode."""
    for name, param in model.named_parameters():
        param.requires_grad = name.startswith("head.")
    encoder = [child for child in model.children() if child is not model.head]
    module_train = type(model).train

    def train(mode: bool = True):
        module_train(model, mode)
        for child in encoder:
            child.train(False)
        return model

    model.train = train


def _recipe(card: dict, name: str, where, featurizer: str, graph_task: str, epochs: int, seeds: list[int], lr,
            batch_size):
    """The checkpoint's recipe retargeted to the data ``name`` (read from ``where``, featurized by
    ``featurizer``): epochs (warm-up scaled), patience = epochs; the model arguments the data fills
    are left out."""
    raw = copy.deepcopy(card.get("recipe") or {})
    filled = data_arguments(card["architecture"])
    raw.update(dataset=f"csv:{name}", task=graph_task, seeds=seeds, name=f"finetune_{name}", featurizer=featurizer,
               description=f"fine-tuned on {where}",
               model={"name": card["architecture"], **{k: v for k, v in card["model_args"].items() if k not in filled}})
    optim = raw.setdefault("optim", {})
    full = optim.get("epochs", epochs)
    optim["warmup_epochs"] = min(round(optim.get("warmup_epochs", 0) * min(1.0, epochs / full)), epochs - 1)
    optim.update(epochs=epochs, patience=epochs)
    if lr is not None:
        optim["lr"] = lr
    if batch_size is not None:
        optim["batch_size"] = batch_size
    return build_recipe(raw)


def _parent_record(pretrained, card: dict) -> dict:
    """Name, path and weights hash of the checkpoint a fine-tuned model starts from."""
    path = os.fspath(pretrained) if isinstance(pretrained, (str, os.PathLike)) else None
    return {"name": card.get("name") or path or card["architecture"], "path": path,
            "weights_sha256": card.get("weights_sha256")}


def _dataset_record(dataset) -> dict:
    """The CSV (or the loaded dataset) a model was fine-tuned on, as its card records it."""
    source = dataset.card["source"]
    if "path" not in source:
        return {"name": dataset.name, "source": dataset.source, "molecules": len(dataset),
                "skipped_rows": len(dataset.report)}
    return {"name": dataset.name, "path": str(Path(source["path"]).resolve()), "sha256": source["sha256"],
            "smiles_column": source["smiles_column"], "molecules": len(dataset), "skipped_rows": len(dataset.report)}

