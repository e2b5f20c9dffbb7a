"""Mini-batch graph-property training (ZINC, molhiv, molpcba, peptides, user CSVs): Adam or
AdamW, optional cosine schedule with linear warm-up, model selection on the validation metric.
A model with attention indices (:class:`HasIndexParameters`, e.g. ``sparsegate_gt``'s learned q)
trains them as the node trainer does LTGA's: their own Adam (``optim.q_lr``, no weight decay, no
schedule), frozen for the first ``optim.q_warmup`` epochs, the Shannon prior ``optim.q_prior``."""
from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Callable

import dgl
import torch
from torch.nn import functional as F
from torch.utils.tensorboard import SummaryWriter

from zoo._progress import progress as show_progress
from zoo.analysis.gate_diagnostics import gate_diagnostics
from zoo.data import make_dataloaders
from zoo.engine.checkpoint import save_checkpoint, write_json
from zoo.engine.devices import resolve_device
from zoo.engine.distributed import (all_sum, is_main, main_first, shard_train_loader, sharded_predict, stop_together,
                                    world)
from zoo.engine.divergence import check_loss, nonfinite_rows
from zoo.engine.epoch_loop import CHECKPOINT_EVERY, BatchCheckpoints, finish, run_epochs
from zoo.engine.flat_optimizer import FlatAdam, FlatAdamW
from zoo.engine.graph_metrics import METRIC_MODES, graph_metric
from zoo.engine.index_training import build_index_optimizer, index_trajectory, shannon_prior, split_index_parameters
from zoo.engine.recipe import OptimConfig, Recipe
from zoo.engine.reproducibility import seed_everything, step_seed
from zoo.models import create_model
from zoo.models.capabilities import HasGPSLayers, HasPositionalEncodings
from zoo.ops import NonFiniteScores


def masked_loss(prediction: torch.Tensor, target: torch.Tensor, task: str) -> torch.Tensor:
    """L1 for regression, BCE-with-logits for classification, over non-NaN targets only."""
    labelled = ~torch.isnan(target)
    if not labelled.any():
        return prediction.sum() * 0.0
    if task == "graph_regression":
        return F.l1_loss(prediction[labelled], target[labelled])
    return F.binary_cross_entropy_with_logits(prediction[labelled], target[labelled])


def rank_loss(prediction: torch.Tensor, target: torch.Tensor, task: str) -> torch.Tensor:
    """This rank's share of the global batch's ``masked_loss``: its summed loss times the world
    size over the global count of labelled targets, so that DDP's gradient average is the mean
    over the whole batch. Equals ``masked_loss`` in a single process."""
    size = world()[1]
    if size == 1:
        return masked_loss(prediction, target, task)
    labelled = ~torch.isnan(target)
    count = all_sum(int(labelled.sum()))
    if count == 0:
        return prediction.sum() * 0.0
    loss = F.l1_loss if task == "graph_regression" else F.binary_cross_entropy_with_logits
    return loss(prediction[labelled], target[labelled], reduction="sum") * size / count


def split_scores(output: torch.Tensor, target: torch.Tensor, task: str, metrics: tuple[str, ...]) -> dict:
    """``loss`` and each of ``metrics`` over one split. If any prediction is not finite, every
    value is NaN and ``nonfinite`` counts the graphs with one (:mod:`zoo.engine.divergence`).

    >>> split_scores(torch.tensor([[1.0], [2.0]]), torch.tensor([[1.5], [2.0]]), "graph_regression", ("mae",))
    {'loss': 0.25, 'mae': 0.25}
    >>> split_scores(torch.tensor([[1.0], [float("nan")]]), torch.zeros(2, 1), "graph_regression", ("mae",))
    {'loss': nan, 'mae': nan, 'nonfinite': 1}
    """
    bad = nonfinite_rows(output)
    if bad:
        return {"loss": math.nan, **{name: math.nan for name in metrics}, "nonfinite": bad}
    return {"loss": float(masked_loss(output, target, task)), **{name: graph_metric(name, target, output)
                                                                 for name in metrics}}


def predict(model, loader, device: str | torch.device = "cpu",
            progress: str | None = None) -> tuple[torch.Tensor, torch.Tensor]:
    """Model outputs and targets over a whole loader, in loader order (eval mode, no grad), on the
    CPU; the batches run on ``device`` (the model's), through :func:`outputs_or_nan`. With a
    ``progress`` label, the batches done are shown under it (:mod:`zoo._progress`)."""
    model.eval()
    outputs, targets = [], []
    with torch.no_grad():
        for graphs, target in show_progress(loader, progress or "", enabled=progress is not None, unit="batches",
                                            bar_every=BAR_EVERY):
            outputs.append(outputs_or_nan(model, graphs.to(device), target.shape[1]))
            targets.append(target)
    return torch.cat(outputs), torch.cat(targets)


def outputs_or_nan(model, graphs, width: int) -> torch.Tensor:
    """``model(graphs)`` on the CPU, for a batch of graphs. A graph whose attention scores overflow
    (``zoo.ops`` refuses them for the whole batch) gets ``width`` NaN outputs, as it would with
    softmax attention, and the batch's other graphs their own outputs, each run on its own."""
    try:
        return model(graphs).cpu()
    except NonFiniteScores:
        rows = []
        for graph in dgl.unbatch(graphs):
            try:
                rows.append(model(graph).cpu())
            except NonFiniteScores:
                rows.append(torch.full((1, width), math.nan))
        return torch.cat(rows)


def build_graph_model(recipe: Recipe, num_outputs: int, **inputs):
    """The recipe's registered model with ``num_outputs`` targets and the input arguments the data's
    featurizer implies (``GraphData.model_inputs``, e.g. dgllife's ``atom_features``)."""
    return create_model(recipe.model["name"], **recipe.model_args(inputs, num_outputs=num_outputs))


FLAT_OPTIMIZERS = (FlatAdam, FlatAdamW)
BAR_EVERY = 5.0
"""Seconds between redraws of the batch bar on a terminal (a molhiv or Peptides-func epoch of the
paper's models takes 10-25 minutes on a CPU; a log gets a line a minute, :mod:`zoo._progress`)."""


def build_optimizer(model: torch.nn.Module, optim: OptimConfig, flat: bool = True) -> torch.optim.Optimizer:
    """The recipe's Adam or AdamW over the trainable parameters but the index parameters (those
    :func:`build_index_optimizer` trains).

    ``flat`` (one process): the weights live in one flat buffer and the update is a few kernels
    over it (:mod:`zoo.engine.flat_optimizer`), with the per-parameter state dict of the plain
    optimizer. Otherwise (under DDP, which owns the gradients) the plain optimizer with
    ``foreach``: one multi-tensor kernel per update instead of a Python loop over the parameter
    tensors. Same update either way.

    >>> type(build_optimizer(torch.nn.Linear(2, 1), OptimConfig(optimizer="adamw"))).__name__
    'FlatAdamW'
    """
    weights = split_index_parameters(model)[0]
    adamw = optim.optimizer == "adamw"
    if flat:
        return (FlatAdamW if adamw else FlatAdam)(weights, lr=optim.lr, weight_decay=optim.weight_decay)
    kind = torch.optim.AdamW if adamw else torch.optim.Adam
    return kind(weights, lr=optim.lr, weight_decay=optim.weight_decay, foreach=True)


def update(model: torch.nn.Module, optimizer: torch.optim.Optimizer, optim: OptimConfig) -> None:
    """One update from the gradients in ``model``: clip their global norm (weights and indices)
    to the recipe's ``clip_grad_norm`` (when > 0), then step ``optimizer``."""
    if optim.clip_grad_norm > 0:
        if isinstance(optimizer, FLAT_OPTIMIZERS):
            clipped = optimizer.flat_parameters() + split_index_parameters(model)[1]
        else:
            clipped = list(model.parameters())
        torch.nn.utils.clip_grad_norm_(clipped, optim.clip_grad_norm, foreach=True)
    optimizer.step()


def train_graph_model(recipe: Recipe, data, seed: int, run_dir: str | Path, *, progress: bool = True,
                      on_epoch_end: Callable[[int, dict], None] | None = None, model=None,
                      extra_metrics: tuple[str, ...] = (), device: str | torch.device = "cpu",
                      checkpoint_every: float = CHECKPOINT_EVERY) -> dict:
    """Train ``recipe``'s model on ``data`` (a :class:`zoo.data.GraphData`) for one seed.

    ``model``: start from this module (e.g. pretrained weights with a new head) instead of a
    fresh one built from the recipe; parameters with ``requires_grad=False`` stay frozen.
    ``extra_metrics``: more :func:`zoo.engine.graph_metrics.graph_metric` names reported per
    split in ``final`` (model selection still uses the card's metric). ``device``: where the model
    and the batches live (:func:`zoo.engine.devices.resolve_device`); metrics, checkpoints and
    the gate diagnostics are computed on the CPU.

    The epoch with the best validation metric (the card's: MAE down, ROC-AUC / AP up) gives the
    final metrics; ``optim.patience`` epochs without improvement stop early. Writes ``best.pt``,
    TensorBoard events and ``metrics.json`` into ``run_dir``; a killed run resumes from ``last.pt``,
    written every ``checkpoint_every`` seconds (:func:`zoo.engine.epoch_loop.run_epochs`). Under
    torchrun the batches are shared out across ranks (see :mod:`zoo.engine.distributed`).
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    seed_everything(seed)
    device = resolve_device(device)
    if device.type != "cpu" and world()[1] > 1:
        raise ValueError(f"device {device} under torchrun: scale-out runs CPU ranks (gloo) only; use --device cpu")
    if model is None:
        model = build_graph_model(recipe, data.num_tasks, **data.model_inputs)
    if isinstance(model, HasPositionalEncodings):
        with main_first():  # rank 0 fills the PE cache, the others read it
            data.add_positional_encodings(model.pe_spec(), progress=progress and is_main())
    loaders = make_dataloaders(data, recipe.optim.batch_size, seed=seed)
    train_loader = shard_train_loader(loaders["train"])  # this rank's part of each batch
    model = model.to(device)
    # static_graph: the same parameters go unused at every step (the last GatedGCN layer's edge
    # update, whose output nothing reads); DDP's default stops at the second step on them
    trained = model if world()[1] == 1 else torch.nn.parallel.DistributedDataParallel(model, static_graph=True)
    optim = recipe.optim
    optimizer = build_optimizer(model, optim, flat=world()[1] == 1)
    index_optimizer = build_index_optimizer(model, optim)
    if index_optimizer is not None and optim.q_warmup >= optim.epochs:
        raise ValueError(f"optim.q_warmup={optim.q_warmup} >= optim.epochs={optim.epochs}: the model's learned "
                         "attention indices would never train; lower the warm-up, e.g. --set optim.q_warmup=N "
                         "with N < epochs")
    schedulers = [torch.optim.lr_scheduler.LambdaLR(optimizer, _cosine_with_warmup(optim))] \
        if optim.scheduler == "cosine" else []
    metric = data.metric

    def train_epoch(epoch: int, checkpoints: BatchCheckpoints) -> dict:
        trained.train()
        train_loader.generator.manual_seed(seed * 1_000_003 + epoch)  # same order after a resume
        total, count = checkpoints.carry.get("total", 0.0), checkpoints.carry.get("count", 0)
        batches = show_progress(checkpoints.remaining(train_loader), f"{recipe.name} seed {seed}, epoch {epoch}",
                                len(train_loader), start=checkpoints.start, enabled=progress and is_main(),
                                unit="batches", bar_every=BAR_EVERY)
        for step, (graphs, target) in enumerate(batches, start=checkpoints.start + 1):
            if world()[1] > 1:  # this rank's dropout, the same after a resume (last.pt has rank 0's generator)
                torch.manual_seed(step_seed(seed, epoch, world()[0], step))
            optimizer.zero_grad()
            graphs, target = graphs.to(device), target.to(device)
            loss = rank_loss(stop_together(lambda: trained(graphs)), target, data.task)
            mean_loss = check_loss(all_sum(float(loss)) / world()[1],
                                   f"epoch {epoch}, batch {step} of {recipe.name} seed {seed}")
            if index_optimizer is None:
                loss.backward()
            else:
                index_optimizer.zero_grad()
                (loss + shannon_prior(model, optim.q_prior)).backward()
            update(model, optimizer, optim)
            if index_optimizer is not None and epoch >= optim.q_warmup:
                index_optimizer.step()
            size = all_sum(len(target))  # graphs in the global batch
            total, count = total + mean_loss * size, count + size
            checkpoints.done(step, {"total": total, "count": count})
        return {"train_loss": total / count, "lr": optimizer.param_groups[0]["lr"], **index_trajectory(model)}

    def shown(stage: str) -> str | None:  # the progress label of an evaluation stage, None when quiet
        return f"{recipe.name} seed {seed}, {stage}" if progress and is_main() else None

    def evaluate() -> dict:
        row = {}
        for split in ("val", "test"):
            output, target = sharded_predict(partial(predict, device=device, progress=shown(f"{split} evaluation")),
                                             model, loaders[split])
            scores = split_scores(output, target, data.task, (metric,))
            row.update({f"{split}_{key}": value for key, value in scores.items()})  # run_epochs says so if NaN
        return row

    optimizers = [optimizer] if index_optimizer is None else [optimizer, index_optimizer]
    monitor = f"val_{metric}"
    state = run_epochs(model=model, optimizers=optimizers, schedulers=schedulers, run_dir=run_dir,
                       epochs=optim.epochs, patience=optim.patience, train_epoch=train_epoch, evaluate=evaluate,
                       monitor=monitor, mode=METRIC_MODES[metric], desc=f"{recipe.name} seed {seed}",
                       progress=progress, on_epoch_end=on_epoch_end, checkpoint_every=checkpoint_every,
                       batch_checkpoints=True)
    model.load_state_dict(state["best_model"])
    final = {}
    for split, loader in loaders.items():
        shown_as = shown(f"best epoch's {split} scores")
        output, target = sharded_predict(partial(predict, device=device, progress=shown_as), model, loader)
        final[split] = split_scores(output, target, data.task, tuple(dict.fromkeys((metric, *extra_metrics))))
    if not is_main():
        return {}
    save_checkpoint({"model": state["best_model"], "recipe": recipe.to_dict(), "epoch": state["best_epoch"]},
                    run_dir / "best.pt")
    diagnostics = _gate_diagnostics(model.cpu(), loaders, "test", run_dir, progress=shown("gate diagnostics"))
    metrics = {
        "seed": seed, "split": 0, "dataset": recipe.dataset, "main_metric": metric, "monitor": monitor,
        "split_source": data.split_source, "split_sizes": data.sizes,
        "best_epoch": state["best_epoch"], "epochs_run": state["epoch"],
        "stopped_early": state["stopped_early"], "num_parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": state["train_seconds"], "train_cpu_seconds": state["train_cpu_seconds"],
        "peak_rss_bytes": state["peak_rss_bytes"], "final": final,
        "curves": state["curves"],
        **({"diagnostics": diagnostics} if diagnostics else {}),
    }
    write_json(metrics, run_dir / "metrics.json")
    finish(run_dir)
    return metrics


def _gate_diagnostics(model, loaders: dict, split: str, run_dir: Path,
                      progress: str | None = None) -> list[dict] | None:
    """GPS / SigGate-GT mechanism diagnostics (gate statistics, attention entropy, MAD, stable rank
    per layer: :func:`zoo.analysis.gate_diagnostics.gate_diagnostics`) of the selected model on every
    graph of ``loaders[split]`` (each row names the split), also to TensorBoard; the graphs done are
    shown under the ``progress`` label, if given."""
    if not isinstance(model, HasGPSLayers):
        return None
    try:
        label = progress and f"{progress}, {split} split"
        report = [{**row, "split": split} for row in gate_diagnostics(model, loaders[split], progress=label)]
    except NonFiniteScores as err:  # the selected model overflows on a graph of the split (its metrics say so)
        print(f"no gate diagnostics: the selected model's attention {err}, on the {split} split")
        return None
    with SummaryWriter(str(run_dir / "tensorboard")) as writer:
        for row in report:
            for key, value in row.items():
                if isinstance(value, float):
                    writer.add_scalar(f"gate/{key}/layer{row['layer']}", value)
    return report


def _cosine_with_warmup(optim) -> Callable[[int], float]:
    """Learning-rate factor per epoch: linear warm-up, then cosine decay to 0 at the last epoch."""
    def factor(epoch: int) -> float:
        if epoch < optim.warmup_epochs:
            return (epoch + 1) / (optim.warmup_epochs + 1)
        progress = (epoch - optim.warmup_epochs) / max(1, optim.epochs - optim.warmup_epochs)
        return 0.5 * (1 + math.cos(math.pi * min(progress, 1.0)))
    return factor
