"""Node classification on DistDGL: a graph partitioned by ``tools/partition.py``, served by DGL's
graph servers, trained from a ``dgl.distributed.DistGraph`` with ``dgl.dataloading.DistNodeDataLoader``.

    python tools/partition.py cora --parts 2 --out parts/cora
    python tools/train.py recipes/cora_ltga_edge_sampled.yaml --dist-config parts/cora/cora.json --ip-config ip_config.txt

Every process runs that same command; DGL's environment (``DGL_ROLE``, ``DGL_SERVER_ID``,
``DGL_NUM_SERVER``, ``DGL_NUM_CLIENT``, ``DGL_CONF_PATH``, ``DGL_IP_CONFIG``, ``DGL_DIST_MODE``, as
DGL's ``tools/launch.py`` sets it) makes it a graph server, which serves its partition until the
trainers exit, or a trainer. Trainers form a torch process group (gloo; ``RANK``, ``WORLD_SIZE``,
``MASTER_ADDR``, ``MASTER_PORT`` as torchrun sets them) and train one DistributedDataParallel model.
Without ``DGL_DIST_MODE`` the run is DGL's standalone mode: one process on a 1-partition graph.

Each trainer draws its training nodes with ``dgl.distributed.node_split`` (an even share of its
partition's, :class:`DistData`), takes
``batch_size / trainers`` of them per step with neighbours sampled per the recipe's
``train.sampler.fanouts``, and runs the model through :func:`zoo.engine.node_sampling.sampled_forward`;
every trainer takes the same number of steps (the smallest share's). Validation and test nodes are
split the same way and evaluated on their full neighbourhoods (exact: the full-batch forward), the
losses and counts summed over trainers. Early stopping on validation loss; only rank 0 writes
``config.yaml``, ``environment.json``, ``metrics.json``, ``best.pt``, TensorBoard events and, while
the run lasts, ``last.pt`` (the same command resumes a killed run) into
``<out>/<recipe>/<config-hash>/seed<k>/``.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path
from typing import NamedTuple

import dgl
import torch
import torch.nn.functional as F
import yaml

from zoo._atomic import atomic_write
from zoo.data import load_card
from zoo.engine.checkpoint import save_checkpoint, write_json
from zoo.engine.distributed import all_sum, barrier, init_from_env, is_main, say, stop_together, world
from zoo.engine.divergence import (DIVERGED, TrainingDiverged, check_loss, record_divergence, recorded_divergence,
                                   still_diverged)
from zoo.engine.environment import record_environment
from zoo.engine.epoch_loop import CHECKPOINT_EVERY, LAST, finish, overflow_is_divergence, run_epochs
from zoo.engine.experiment import run_folder
from zoo.engine.index_training import (build_index_optimizer, index_trajectory, shannon_prior,
                                       split_index_parameters)
from zoo.engine.node_sampling import graph_layers, sampled_forward
from zoo.engine.recipe import Recipe, RecipeError
from zoo.engine.run_lock import hold_seed
from zoo.engine.reproducibility import epoch_seed, seed_everything
from zoo.models import create_model


class DistData(NamedTuple):
    """The partitioned graph and the partition book this trainer splits its nodes by (partition
    ``rank // (trainers / partitions)``: the machine's, when trainer ranks are numbered machine
    by machine as DGL's launcher does)."""

    graph: dgl.distributed.DistGraph
    book: dgl.distributed.GraphPartitionBook


def open_dist_graph(recipe: Recipe, part_config: str | Path, ip_config: str | Path | None) -> DistData:
    """Check that ``recipe`` can train on the partitions of ``part_config``, then start DGL's
    distributed services and open the partitioned graph.

    In a server process (``DGL_ROLE=server``) DGL serves its partition here and exits the process.
    Trainers then join the torch process group (when ``WORLD_SIZE`` > 1).

    >>> data = open_dist_graph(recipe, "parts/cora/cora.json", "ip_config.txt")  # doctest: +SKIP
    """
    check_recipe(recipe)
    part_config = Path(part_config)
    if not part_config.is_file():
        raise RecipeError(f"--dist-config {part_config}: no such partition config; write one with "
                          "python tools/partition.py DATASET --parts N --out FOLDER (it is FOLDER/DATASET.json)")
    config = json.loads(part_config.read_text())
    dataset = load_card(recipe.dataset)["name"]
    if config["graph_name"].lower().replace("-", "_") != dataset:
        raise RecipeError(f"--dist-config {part_config} holds the graph {config['graph_name']!r} but {recipe.name} "
                          f"trains on {dataset!r}: partition that card (python tools/partition.py {dataset} ...) "
                          f"or pick the card with --set dataset={config['graph_name']}")
    if os.environ.get("DGL_DIST_MODE", "standalone") == "standalone" and config["num_parts"] > 1:
        raise RecipeError(f"--dist-config {part_config} has {config['num_parts']} partitions, but without "
                          "DGL_DIST_MODE=distributed this is DGL's standalone mode, which reads one partition: launch "
                          "graph servers and trainers (DGL's tools/launch.py; README, Training), or partition with "
                          "--parts 1")
    dgl.distributed.initialize(None if ip_config is None else str(ip_config))
    init_from_env()
    rank, trainers = world()
    if trainers % config["num_parts"]:
        raise RecipeError(f"{trainers} trainers for {config['num_parts']} partitions: DGL needs the same number "
                          "of trainers on every partition (a multiple of the partition count)")
    book = dgl.distributed.load_partition_book(str(part_config), rank // (trainers // config["num_parts"]))[0]
    return DistData(dgl.distributed.DistGraph(config["graph_name"], part_config=str(part_config)), book)


def train_dist_graph(recipe: Recipe, data: DistData, seed: int, out: str | Path, *, force: bool = False,
                     on_epoch_end=None, checkpoint_every: float = CHECKPOINT_EVERY) -> dict:
    """Train ``recipe`` (a node recipe with ``train.sampler``) on ``data`` for ``seed``.

    Returns the metrics (``{}`` on ranks other than 0, which write nothing). The epochs run in
    :func:`zoo.engine.epoch_loop.run_epochs`: ``last.pt`` (rank 0 writes it, every trainer reads
    it, so across machines the run folder must be on a file system they all see, e.g. NFS),
    TensorBoard scalars, and a kill that costs at most ``checkpoint_every`` seconds of training:
    the same command resumes. Each epoch's shuffle and dropout are seeded by (seed, epoch, rank),
    so a resumed run takes the batches it would have taken; with sampled fanouts the neighbours
    come from DGL's samplers, whose state a resume does not restore. A seed whose
    ``metrics.json`` exists is skipped unless ``force``. A seed whose training diverges is recorded in
    its ``diverged.json`` (:mod:`zoo.engine.divergence`) and, unless ``force`` (which retrains it from
    scratch), raises again on the next call without training. ``on_epoch_end(epoch, row)`` runs on
    rank 0 after each epoch.

    >>> metrics = train_dist_graph(load_recipe("recipes/cora_ltga_edge_sampled.yaml"), data, 0, "runs")  # doctest: +SKIP
    """
    graph = data.graph
    check_recipe(recipe)
    sampler = recipe.train.sampler
    rank, trainers = world()
    if sampler.batch_size % trainers:
        raise RecipeError(f"train.sampler.batch_size={sampler.batch_size} does not split over {trainers} trainers; "
                          f"use a multiple of {trainers}")
    run_dir = run_folder(recipe, out) / f"seed{seed}"
    finished = run_dir / "metrics.json"
    if finished.exists() and not force:
        say(f"seed {seed}: finished run found in {run_dir}, skipping it (use --force to retrain)")
        return json.loads(finished.read_text()) if is_main() else {}
    if (message := recorded_divergence(run_dir)) is not None and not force:
        raise still_diverged(message, run_dir / DIVERGED)
    seed_everything(seed)
    model = create_model(recipe.model["name"], in_feats=graph.ndata["feat"].shape[1],
                         num_classes=load_card(recipe.dataset)["num_classes"], **recipe.model_args())
    if len(graph_layers(model)) != len(sampler.fanouts):
        raise RecipeError(f"{recipe.name}: the model has {len(graph_layers(model))} graph layers but "
                          f"train.sampler.fanouts has {len(sampler.fanouts)} entries; give one per layer")
    trained = model if trainers == 1 else torch.nn.parallel.DistributedDataParallel(model)
    weights = torch.optim.Adam(split_index_parameters(model)[0], lr=recipe.optim.lr,
                               weight_decay=recipe.optim.weight_decay)
    index_optimizer = build_index_optimizer(model, recipe.optim)
    optimizers = [weights] + ([index_optimizer] if index_optimizer is not None else [])
    split = {part: dgl.distributed.node_split(graph.ndata[f"{part}_mask"], data.book, force_even=True)
             for part in ("train", "val", "test")}
    loader = dgl.dataloading.DistNodeDataLoader(graph, split["train"], dgl.dataloading.NeighborSampler(sampler.fanouts),
                                                batch_size=sampler.batch_size // trainers, shuffle=True)
    steps = _fewest_steps(math.ceil(len(split["train"]) / (sampler.batch_size // trainers)))

    def train_epoch(epoch: int) -> dict:
        torch.manual_seed(epoch_seed(seed, epoch, rank))  # this epoch's shuffle and dropout
        loss_sum, seen = 0.0, 0
        trained.train()
        for step, (input_nodes, seeds, blocks) in zip(range(1, steps + 1), loader):
            for optimizer in optimizers:
                optimizer.zero_grad()
            logits = stop_together(lambda: sampled_forward(trained, graph, blocks, graph.ndata["feat"][input_nodes]))
            loss = F.cross_entropy(logits, graph.ndata["label"][seeds].long())
            # summed over the ranks, so every rank stops together
            check_loss(all_sum(float(loss)), f"epoch {epoch}, batch {step} of {recipe.name} seed {seed}")
            (loss + shannon_prior(model, recipe.optim.q_prior)).backward()
            weights.step()
            if index_optimizer is not None and epoch >= recipe.optim.q_warmup:
                index_optimizer.step()
            loss_sum, seen = loss_sum + float(loss) * len(seeds), seen + len(seeds)
        return {"train_loss": all_sum(loss_sum) / all_sum(seen), **index_trajectory(model)}

    def end_of_epoch(epoch: int, row: dict) -> None:
        say(f"seed {seed} epoch {epoch}: train loss {row['train_loss']:.4f}, val loss {row['val_loss']:.4f}, "
            f"val accuracy {row['val_accuracy']:.4f}")
        if on_epoch_end is not None:
            on_epoch_end(epoch, row)

    if is_main():
        run_dir.mkdir(parents=True, exist_ok=True)
    with hold_seed(run_dir, is_main(), agree=all_sum):  # one job at a time in the run folder
        if force and recorded_divergence(run_dir) is not None:  # from scratch, not from the last.pt that diverged
            if is_main():
                for name in (DIVERGED, LAST):
                    (run_dir / name).unlink(missing_ok=True)
            barrier()
        if is_main():
            record_environment(run_dir, resumed=(run_dir / LAST).exists())
        try:
            state = run_epochs(model=model, optimizers=optimizers, run_dir=run_dir, epochs=recipe.optim.epochs,
                               patience=recipe.optim.patience, train_epoch=train_epoch, monitor="val_loss", mode="min",
                               evaluate=lambda: {f"val_{k}": v for k, v in
                                                 evaluate(model, graph, split["val"], sampler.eval_batch_size).items()},
                               desc=f"{recipe.name} seed {seed}", progress=False, on_epoch_end=end_of_epoch,
                               checkpoint_every=checkpoint_every)
            model.load_state_dict(state["best_model"])
            # the test nodes' neighbourhoods are first seen here
            desc = f"{recipe.name} seed {seed}"
            with overflow_is_divergence("final evaluation of the model", state["best_epoch"], desc):
                final = {part: evaluate(model, graph, split[part], sampler.eval_batch_size) for part in ("val", "test")}
        except TrainingDiverged as err:  # every rank raises it (loss summed, overflow agreed)
            if is_main():
                record_divergence(run_dir, recipe.name, seed, err)
            raise
        metrics = {"dataset": recipe.dataset, "seed": seed, "trainers": trainers, "monitor": "val_loss",
                   "best_epoch": state["best_epoch"],
                   "epochs_run": state["epoch"], "stopped_early": state["stopped_early"],
                   "train_seconds": state["train_seconds"], "train_cpu_seconds": state["train_cpu_seconds"],
                   "peak_rss_bytes": state["peak_rss_bytes"], "curves": state["curves"], "final": final}
        if not is_main():
            return {}
        text = yaml.safe_dump(recipe.to_dict(), sort_keys=False).encode()
        atomic_write(run_dir / "config.yaml", lambda handle: handle.write(text))
        save_checkpoint({"model": state["best_model"], "recipe": recipe.to_dict(), "epoch": state["best_epoch"]},
                        run_dir / "best.pt")
        write_json(metrics, run_dir / "metrics.json")
        finish(run_dir)
        return metrics


def check_recipe(recipe: Recipe) -> None:
    """Refuse a recipe DistGraph training cannot run: graph-level, or node-level without ``train.sampler``."""
    if recipe.task != "node_classification" or recipe.train.sampler is None:
        raise RecipeError(f"{recipe.name}: DistGraph training is for node recipes with train.sampler (mini-batches "
                          "of sampled neighbourhoods); add e.g. --set 'train.sampler.fanouts=[10,10]'")


def evaluate(model: torch.nn.Module, graph: dgl.distributed.DistGraph, nodes: torch.Tensor, chunk: int) -> dict:
    """Cross-entropy and accuracy of ``model`` over every trainer's ``nodes``, each on its full
    neighbourhood (one block per graph layer, all in-neighbours; ``chunk`` nodes a batch), summed
    over trainers."""
    model.eval()
    layers = len(graph_layers(model))
    loader = dgl.dataloading.DistNodeDataLoader(graph, nodes, dgl.dataloading.NeighborSampler([-1] * layers),
                                                batch_size=chunk, shuffle=False)

    def sums() -> tuple[float, int]:  # this trainer's; its DistGraph reads wait for servers, not trainers
        loss_sum, right = 0.0, 0
        with torch.no_grad():
            for input_nodes, seeds, blocks in loader:
                logits = sampled_forward(model, graph, blocks, graph.ndata["feat"][input_nodes])
                labels = graph.ndata["label"][seeds].long()
                loss_sum += float(F.cross_entropy(logits.double(), labels, reduction="sum"))
                right += int((logits.argmax(1) == labels).sum())
        return loss_sum, right

    loss_sum, right = stop_together(sums)
    count = all_sum(len(nodes))
    return {"loss": all_sum(loss_sum) / count, "accuracy": all_sum(right) / count}


def _fewest_steps(local_steps: int) -> int:
    """The smallest number of steps any trainer has (DDP needs the same count on every trainer)."""
    if world()[1] == 1:
        return local_steps
    count = torch.tensor([local_steps])
    torch.distributed.all_reduce(count, op=torch.distributed.ReduceOp.MIN)
    return int(count)
