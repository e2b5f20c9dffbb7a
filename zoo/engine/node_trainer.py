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

from zoo.analysis.counterfactuals import ltga_diagnostics
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
    optimizers = _optimizers(model, recipe.optim)
    masks = {"train": data.train_mask, "val": data.val_mask, "test": data.test_mask}
    main_metric = data.card.get("metric", "accuracy")

    state = {"epoch": 0, "best_val_loss": float("inf"), "best_epoch": -1, "bad_epochs": 0,
             "best_model": None, "curves": [], "train_seconds": 0.0}
    last_path = run_dir / "last.pt"
    if last_path.exists():
        saved = load_checkpoint(last_path)
        model.load_state_dict(saved["model"])
        for optimizer, optimizer_state in zip(optimizers, saved["optimizers"]):
            optimizer.load_state_dict(optimizer_state)
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
            for optimizer in optimizers:
                optimizer.zero_grad()
            logits = model(data.graph, data.features)
            loss = F.cross_entropy(logits[masks["train"]], data.labels[masks["train"]])
            total = loss + _shannon_prior(model, recipe.optim.q_prior)
            total.backward()
            optimizers[0].step()
            if len(optimizers) > 1 and state["epoch"] >= recipe.optim.q_warmup:
                optimizers[1].step()
            state["train_seconds"] += time.perf_counter() - started

            row = {"epoch": state["epoch"], "train_loss": float(loss), **index_trajectory(model)}
            row.update(_evaluate_losses(model, data, masks, main_metric))
            state["curves"].append(row)
            if row["val_loss"] < state["best_val_loss"]:
                state.update(best_val_loss=row["val_loss"], best_epoch=state["epoch"], bad_epochs=0,
                             best_model=copy.deepcopy(model.state_dict()))
            else:
                state["bad_epochs"] += 1
            state["epoch"] += 1
            save_checkpoint({"model": model.state_dict(), "optimizers": [o.state_dict() for o in optimizers],
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
    diagnostics = _attention_diagnostics(model, data, masks["test"], main_metric, seed, run_dir)
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
        **({"diagnostics": diagnostics} if diagnostics else {}),
    }
    write_json(metrics, run_dir / "metrics.json")
    last_path.unlink()
    return metrics


def _attention_diagnostics(model, data, mask, main_metric: str, seed: int, run_dir: Path) -> dict | None:
    """LTGA diagnostics of the final model (test-split metric), also logged to TensorBoard."""
    if not callable(getattr(model, "layers", None)):
        return None
    score = lambda logits: classification_metrics(logits[mask], data.labels[mask], [main_metric])[main_metric]
    diagnostics = ltga_diagnostics(model, data, score, seed)
    with SummaryWriter(str(run_dir / "tensorboard")) as writer:
        for layer, stats in enumerate(diagnostics["layers"]):
            for key, value in stats.items():
                writer.add_scalar(f"attention/{key}/layer{layer}", value)
        for key, value in diagnostics["counterfactual"].items():
            writer.add_scalar(f"counterfactual/{key}", value)
    return diagnostics


def _optimizers(model, optim) -> list[torch.optim.Optimizer]:
    """Adam for the weights; a second Adam (no weight decay) for index parameters, if any."""
    index = list(model.index_parameters()) if hasattr(model, "index_parameters") else []
    ids = {id(p) for p in index}
    weights = [p for p in model.parameters() if id(p) not in ids]
    optimizers = [torch.optim.Adam(weights, lr=optim.lr, weight_decay=optim.weight_decay)]
    if index:
        optimizers.append(torch.optim.Adam(index, lr=optim.q_lr, weight_decay=0.0))
    return optimizers


def _shannon_prior(model, strength: float) -> torch.Tensor | float:
    """``strength * mean (q - 1)^2`` over every q the model used in its last forward."""
    if strength == 0 or not hasattr(model, "q_values"):
        return 0.0
    values = [q.flatten() for q in model.q_values()]
    return strength * torch.cat(values).sub(1).pow(2).mean() if values else 0.0


def index_trajectory(model) -> dict[str, float]:
    """q per layer and head (mean, and sd over edges for per-edge q) from the last forward."""
    if not hasattr(model, "q_values"):
        return {}
    row = {}
    for layer, q in enumerate(model.q_values()):
        q = q.detach().reshape(-1, q.shape[-1]) if q.dim() else q.detach().reshape(1, 1)
        for head, column in enumerate(q.T):
            row[f"q_mean/layer{layer}_head{head}"] = float(column.mean())
            if len(column) > 1:
                row[f"q_sd/layer{layer}_head{head}"] = float(column.std())
    return row


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
