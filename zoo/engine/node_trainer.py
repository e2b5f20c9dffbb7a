"""Node classification: Adam, early stopping on validation loss, resumable; full batch, or
mini-batches of sampled neighbourhoods when the recipe has ``train.sampler``, data-parallel
under torchrun (``torchrun --nproc_per_node N tools/train.py RECIPE``, gloo on the CPU).

Under torchrun every rank holds the graph and draws the same shuffled batches of
``train.sampler.batch_size`` training nodes; DGL's DDP-aware DataLoader gives each rank its
``batch_size / N`` of every batch, DistributedDataParallel averages the gradients (the
single-process mean over the batch, as the parts are equal), layer-wise evaluation splits the
nodes over the ranks and gathers them, and only rank 0 writes. Differs from one process: dropout
masks come from each rank's generator, the Shannon prior on per-edge q is averaged per rank, the
curves' q statistics are of rank 0's part of the last batch, and an epoch leaves out
``len(train nodes) % N`` nodes of its order."""
from __future__ import annotations

from pathlib import Path
from typing import Callable

import torch
from torch.nn import functional as F
from torch.utils.tensorboard import SummaryWriter

from zoo.analysis.counterfactuals import ltga_diagnostics
from zoo.analysis.oversmoothing import oversmoothing_diagnostics
from zoo.engine.checkpoint import save_checkpoint, write_json
from zoo.engine.devices import resolve_device
from zoo.engine.distributed import all_sum, is_main, stop_together, world
from zoo.engine.divergence import check_loss
from zoo.engine.epoch_loop import CHECKPOINT_EVERY, BatchCheckpoints, finish, run_epochs
from zoo.engine.index_training import build_index_optimizer, index_trajectory, shannon_prior, split_index_parameters
from zoo.engine.metrics import classification_metrics
from zoo.engine.node_sampling import LayerwiseInference, layerwise_forward, sampled_forward, shuffled_batches
from zoo.engine.recipe import Recipe
from zoo.engine.reproducibility import epoch_seed, seed_everything, step_seed
from zoo.models import create_model
from zoo.models.capabilities import HasLTGALayers

MONITOR = "val_loss"
"""Node runs select the epoch of the lowest validation loss (recorded in ``metrics.json``)."""


def train_node_classifier(
    recipe: Recipe,
    data,
    seed: int,
    run_dir: str | Path,
    *,
    progress: bool = True,
    on_epoch_end: Callable[[int, dict], None] | None = None,
    device: str | torch.device = "cpu",
    checkpoint_every: float = CHECKPOINT_EVERY,
) -> dict:
    """Train ``recipe``'s model on ``data`` (a :class:`zoo.data.NodeData`) for one seed.

    Early stopping on validation loss; the best epoch's weights give the final metrics and, in a
    full-batch run, ``metrics.json``'s ``oversmoothing``: the directional Dirichlet energy and MAD
    of the last hidden layer over the whole graph (the LTGA paper's Table 19, see
    :func:`zoo.analysis.oversmoothing.oversmoothing_diagnostics`). Writes
    ``best.pt``, TensorBoard events and ``metrics.json`` into ``run_dir`` and resumes from
    ``last.pt`` if a killed run left one; ``last.pt`` is written every ``checkpoint_every``
    seconds of training (see :func:`zoo.engine.epoch_loop.run_epochs`), between mini-batches too
    in a sampled run on one process.
    ``on_epoch_end(epoch, row)`` is called after each epoch (and its checkpoint, if one was written).
    ``device`` (see :func:`zoo.engine.devices.resolve_device`) holds the model and the graph.

    With ``recipe.train.sampler`` each epoch steps through mini-batches of training nodes with
    their sampled neighbourhoods (:mod:`zoo.engine.node_sampling`), and every evaluation, the
    final metrics and the LTGA diagnostics run layer-wise over all nodes in chunks. Each epoch's
    order, DGL's sampling seed and torch's generator (dropout) are seeded from ``seed`` and the
    epoch (and the rank, for dropout), so a resumed run, on any number of ranks, continues exactly.
    Under torchrun the epochs run data-parallel (module docstring); other ranks return ``{}``.
    """
    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    seed_everything(seed)
    device = resolve_device(device)
    model = create_model(recipe.model["name"], in_feats=data.features.shape[1], num_classes=data.num_classes,
                         **recipe.model_args())
    if device.type != "cpu":
        model, data = model.to(device), data.to(device)
    optimizers = _optimizers(model, recipe.optim)
    masks = {"train": data.train_mask, "val": data.val_mask, "test": data.test_mask}
    main_metric = data.card.get("metric", "accuracy")
    sampler = recipe.train.sampler
    rank, world_size = world()
    if world_size > 1 and (sampler is None or device.type != "cpu"):
        raise ValueError(f"{recipe.name} under torchrun: node training scales out with train.sampler on CPU ranks "
                         "(gloo); add train.sampler and use --device cpu, or run one process")
    trained = model if world_size == 1 else torch.nn.parallel.DistributedDataParallel(model)

    def step(loss: torch.Tensor, epoch: int) -> None:
        (loss + shannon_prior(model, recipe.optim.q_prior)).backward()
        optimizers[0].step()
        if len(optimizers) > 1 and epoch >= recipe.optim.q_warmup:
            optimizers[1].step()

    if sampler is None:
        def train_epoch(epoch: int) -> dict:
            model.train()
            for optimizer in optimizers:
                optimizer.zero_grad()
            logits = model(data.graph, data.features)
            loss = F.cross_entropy(logits[masks["train"]], data.labels[masks["train"]])
            value = check_loss(float(loss), f"epoch {epoch} of {recipe.name} seed {seed}")
            step(loss, epoch)
            return {"train_loss": value, **index_trajectory(model)}

        def predict() -> torch.Tensor:
            return model(data.graph, data.features)
    else:
        train_nodes = masks["train"].nonzero().squeeze(1)

        def train_epoch(epoch: int, checkpoints: BatchCheckpoints) -> dict:
            trained.train()
            start, carry = checkpoints.start, checkpoints.carry
            if world_size == 1 and not start:  # inside an epoch, last.pt restored the generator as it was there
                torch.manual_seed(epoch_seed(seed, epoch, rank))  # dropout
            order = torch.Generator().manual_seed(epoch_seed(seed, epoch))  # the same on every rank
            total, count = carry.get("total", 0.0), carry.get("count", 0)
            batches = shuffled_batches(data.graph, train_nodes, sampler.fanouts, sampler.batch_size, order, rank,
                                       world_size)
            batches = checkpoints.remaining(batches)
            for done, (input_nodes, output_nodes, blocks) in enumerate(batches, start=start + 1):
                if world_size > 1:  # this rank's dropout, the same after a resume (last.pt has rank 0's generator)
                    torch.manual_seed(step_seed(seed, epoch, rank, done))
                for optimizer in optimizers:
                    optimizer.zero_grad()
                logits = stop_together(lambda: sampled_forward(trained, data.graph, blocks,
                                                               data.features[input_nodes]))
                loss = F.cross_entropy(logits, data.labels[output_nodes])
                # sums over the ranks: rank 0's last.pt carries them into a resumed epoch
                summed = check_loss(all_sum(float(loss) * len(output_nodes)),
                                    f"epoch {epoch}, batch {done} of {recipe.name} seed {seed}")
                step(loss, epoch)
                total = total + summed
                count = count + all_sum(len(output_nodes))
                checkpoints.done(done, {"total": total, "count": count})
            return {"train_loss": total / count, **index_trajectory(model)}

        def predict() -> torch.Tensor:
            return layerwise_forward(model, data.graph, data.features, sampler.eval_batch_size, (rank, world_size))

    state = run_epochs(model=model, optimizers=optimizers, run_dir=run_dir, epochs=recipe.optim.epochs,
                       patience=recipe.optim.patience, train_epoch=train_epoch,
                       evaluate=lambda: _evaluate_losses(model, predict, data, masks, main_metric), monitor=MONITOR,
                       mode="min", desc=f"{recipe.name} seed {seed}", progress=progress, on_epoch_end=on_epoch_end,
                       checkpoint_every=checkpoint_every,
                       batch_checkpoints=sampler is not None)
    model.load_state_dict(state["best_model"])
    model.eval()
    with torch.no_grad():
        logits = predict()
    if not is_main():
        return {}
    save_checkpoint({"model": state["best_model"], "recipe": recipe.to_dict(), "epoch": state["best_epoch"]},
                    run_dir / "best.pt")
    final = {split: classification_metrics(logits[mask], data.labels[mask]) for split, mask in masks.items()}
    chunk_size = None if sampler is None else sampler.eval_batch_size
    diagnostics = _attention_diagnostics(model, data, masks["test"], main_metric, seed, run_dir, chunk_size)
    # full batch only: a sampled run's graph may not fit one forward
    oversmoothing = oversmoothing_diagnostics(model, data.graph, data.features) if sampler is None else None
    metrics = {
        "seed": seed,
        "split": data.split,
        "dataset": recipe.dataset,
        "main_metric": main_metric,
        "monitor": MONITOR,
        "best_epoch": state["best_epoch"],
        "epochs_run": state["epoch"],
        "stopped_early": state["stopped_early"],
        "num_parameters": sum(p.numel() for p in model.parameters()),
        "train_seconds": state["train_seconds"], "train_cpu_seconds": state["train_cpu_seconds"],
        "peak_rss_bytes": state["peak_rss_bytes"],
        "final": final,
        "curves": state["curves"],
        **({"diagnostics": diagnostics} if diagnostics else {}),
        **({"oversmoothing": oversmoothing} if oversmoothing else {}),
    }
    write_json(metrics, run_dir / "metrics.json")
    finish(run_dir)
    return metrics


def _attention_diagnostics(model, data, mask, main_metric: str, seed: int, run_dir: Path,
                           chunk_size: int | None = None) -> dict | None:
    """LTGA diagnostics of the final model (test-split metric), also logged to TensorBoard; with
    a ``chunk_size``, every forward of them runs layer-wise in chunks of that many nodes."""
    if not isinstance(model, HasLTGALayers):
        return None
    score = lambda logits: classification_metrics(logits[mask], data.labels[mask], [main_metric])[main_metric]
    viewed = model if chunk_size is None else LayerwiseInference(model, chunk_size)
    diagnostics = ltga_diagnostics(viewed, data, score, seed)
    with SummaryWriter(str(run_dir / "tensorboard")) as writer:
        for layer, stats in enumerate(diagnostics["layers"]):
            for key, value in stats.items():
                writer.add_scalar(f"attention/{key}/layer{layer}", value)
        for key, value in diagnostics["counterfactual"].items():
            writer.add_scalar(f"counterfactual/{key}", value)
    return diagnostics


def _optimizers(model, optim) -> list[torch.optim.Optimizer]:
    """Adam for the weights; the indices' own Adam (:mod:`zoo.engine.index_training`), if any."""
    weights = split_index_parameters(model)[0]
    index_optimizer = build_index_optimizer(model, optim)
    return [torch.optim.Adam(weights, lr=optim.lr, weight_decay=optim.weight_decay)] + \
        ([index_optimizer] if index_optimizer is not None else [])


def _evaluate_losses(model, predict: Callable[[], torch.Tensor], data, masks, main_metric: str) -> dict:
    """Per-epoch curve values: loss on every split, the card's main metric on val and test, from
    the logits of every node ``predict()`` gives (full batch or layer-wise)."""
    model.eval()
    with torch.no_grad():
        logits = predict()
    row = {}
    for split, mask in masks.items():
        row[f"{split}_loss" if split != "train" else "train_eval_loss"] = float(
            F.cross_entropy(logits[mask], data.labels[mask]))
    for split in ("val", "test"):
        row[f"{split}_{main_metric}"] = classification_metrics(
            logits[masks[split]], data.labels[masks[split]], [main_metric])[main_metric]
    return row
