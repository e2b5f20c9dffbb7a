"""Full-batch node classification: Adam, early stopping on validation loss, resumable.

Every epoch the trainer writes ``last.pt`` atomically (model, optimiser, early-stopping state,
curves and RNG states), so a killed run continues from its last finished epoch with the same
result it would have reached uninterrupted. The best epoch (lowest validation loss) is kept in
``best.pt`` and is the model the final metrics are computed on.
"""
from __future__ import annotations

import copy
import random
import time
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from torch.nn import functional as F
from torch.utils.tensorboard import SummaryWriter
from tqdm.auto import tqdm

from zoo.engine.checkpoint import load_checkpoint, save_checkpoint, write_json
from zoo.engine.metrics import classification_metrics
from zoo.engine.recipe import Recipe
from zoo.models import create_model

SPLITS = ("train", "val", "test")


def seed_everything(seed: int) -> None:
    """Seed Python, NumPy and torch (DGL's CPU kernels draw from torch's generator)."""
    random.seed(seed)
    np.random.seed(seed)
    torch.manual_seed(seed)


def _rng_state() -> dict:
    return {"python": random.getstate(), "numpy": np.random.get_state(), "torch": torch.get_rng_state()}


def _set_rng_state(state: dict) -> None:
    random.setstate(state["python"])
    np.random.set_state(state["numpy"])
    torch.set_rng_state(state["torch"])


def train_node_classifier(
    recipe: Recipe,
    data,
    seed: int,
    run_dir: str | Path,
    *,
    progress: bool = True,
    on_epoch_end: Callable[[int, dict], None] | None = None,
) -> dict:
    """Train ``recipe``'s model on ``data`` (a :class:`zoo.data.NodeData`) for one seed.

    Writes ``last.pt`` (every epoch), ``best.pt``, TensorBoard events and ``metrics.json`` into
    ``run_dir`` and returns the metrics. If ``run_dir/last.pt`` exists the run resumes from it.
    ``on_epoch_end(epoch, row)`` is called after each epoch's checkpoint is safely written.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    seed_everything(seed)
    options = {k: v for k, v in recipe.model.items() if k != "name"}
    model = create_model(recipe.model["name"], in_feats=data.features.shape[1], num_classes=data.num_classes, **options)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.optim.lr, weight_decay=recipe.optim.weight_decay)
    masks = {"train": data.train_mask, "val": data.val_mask, "test": data.test_mask}
    main_metric = data.card.get("metric", "accuracy")

    state = {"epoch": 0, "best_val_loss": float("inf"), "best_epoch": -1, "bad_epochs": 0,
             "best_model": None, "curves": [], "train_seconds": 0.0}
    last_path = run_dir / "last.pt"
    if last_path.exists():
        saved = load_checkpoint(last_path)
        model.load_state_dict(saved["model"])
        optimizer.load_state_dict(saved["optimizer"])
        _set_rng_state(saved["rng"])
        state = saved["state"]
        print(f"resuming {run_dir} from epoch {state['epoch']}")

    writer = SummaryWriter(str(run_dir / "tensorboard"), purge_step=state["epoch"])
    bar = tqdm(total=recipe.optim.epochs, initial=state["epoch"], desc=f"{recipe.name} seed {seed}",
               disable=not progress, leave=False, dynamic_ncols=True)
    try:
        while state["epoch"] < recipe.optim.epochs and state["bad_epochs"] < recipe.optim.patience:
            started = time.perf_counter()
            model.train()
            optimizer.zero_grad()
            logits = model(data.graph, data.features)
            loss = F.cross_entropy(logits[masks["train"]], data.labels[masks["train"]])
            loss.backward()
            optimizer.step()
            state["train_seconds"] += time.perf_counter() - started

            row = {"epoch": state["epoch"], "train_loss": float(loss)}
            row.update(_evaluate_losses(model, data, masks, main_metric))
            state["curves"].append(row)
            if row["val_loss"] < state["best_val_loss"]:
                state.update(best_val_loss=row["val_loss"], best_epoch=state["epoch"], bad_epochs=0,
                             best_model=copy.deepcopy(model.state_dict()))
            else:
                state["bad_epochs"] += 1
            state["epoch"] += 1
            save_checkpoint({"model": model.state_dict(), "optimizer": optimizer.state_dict(),
                             "rng": _rng_state(), "state": state}, last_path)
            for key, value in row.items():
                if key != "epoch":
                    writer.add_scalar(key.replace("_", "/", 1), value, row["epoch"])
            bar.update(1)
            bar.set_postfix(loss=f"{row['train_loss']:.3f}", val_loss=f"{row['val_loss']:.3f}",
                            **{f"val_{main_metric}": f"{row[f'val_{main_metric}']:.3f}"})
            if on_epoch_end is not None:
                on_epoch_end(row["epoch"], row)
    finally:
        bar.close()
        writer.close()

    model.load_state_dict(state["best_model"])
    save_checkpoint({"model": state["best_model"], "recipe": recipe.to_dict(), "epoch": state["best_epoch"]},
                    run_dir / "best.pt")
    model.eval()
    with torch.no_grad():
        logits = model(data.graph, data.features)
    final = {split: classification_metrics(logits[mask], data.labels[mask]) for split, mask in masks.items()}
    metrics = {
        "seed": seed,
        "split": data.split,
        "dataset": recipe.dataset,
        "main_metric": main_metric,
        "best_epoch": state["best_epoch"],
        "epochs_run": state["epoch"],
        "stopped_early": state["bad_epochs"] >= recipe.optim.patience,
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": state["train_seconds"],
        "final": final,
        "curves": state["curves"],
    }
    write_json(metrics, run_dir / "metrics.json")
    last_path.unlink()
    return metrics


def _evaluate_losses(model, data, masks, main_metric: str) -> dict:
    """Per-epoch curve values: loss on every split, the card's main metric on val and test."""
    model.eval()
    with torch.no_grad():
        logits = model(data.graph, data.features)
    row = {}
    for split, mask in masks.items():
        row[f"{split}_loss" if split != "train" else "train_eval_loss"] = float(
            F.cross_entropy(logits[mask], data.labels[mask]))
    for split in ("val", "test"):
        row[f"{split}_{main_metric}"] = classification_metrics(
            logits[masks[split]], data.labels[masks[split]], [main_metric])[main_metric]
    return row
