"""Launched by test_distributed.py under torchrun (its single-process reference calls the same
functions in the test's process). Modes:

* ``graph CSV CACHE OUT``: a tiny SigGate-GT without BatchNorm or dropout on a toy CSV;
  ``graph_gatedgcn``: the same with the GatedGCN local branch (BatchNorm inside; the last layer's
  edge update feeds nothing, so its parameters never get a gradient);
* ``node OUT [KILL]``: a sampled LTGA-Edge (full neighbourhoods, no dropout) on a small synthetic
  graph; with KILL, rank 0 is interrupted at its KILL-th training batch (a killed job to resume);
* ``resume CSV CACHE OUT``: with dropout (and ranks' generators that part ways), the graph and
  the node run trained whole, then trained again with every rank interrupted at the same batch
  inside epoch 1 and started again in this process (``OUT/{graph,node}_{whole,resumed}``;
  ``OUT/{graph,node}_killed.json``: the batches of the epoch that ``last.pt`` held at the kill);
* ``overflow CSV CACHE OUT``: attention scores that overflow on rank 1 only, in the training of a
  graph run and in the training or the evaluation of a sampled node run (a graph run's evaluation
  makes such a graph's outputs NaN instead); each rank writes the ``TrainingDiverged`` it stopped
  with to ``OUT/<case>_rank<r>.txt``;
* ``exit``: the exit after a collective that deadlocked torch 2.2's gloo teardown (see
  ``zoo.engine.distributed._shutdown``): the collective's tensors and work are dropped by Python
  first, so gloo's worker thread frees them, and the process exits at once without yielding the GIL.
"""
import json
import math
import sys
from functools import partial, wraps
from pathlib import Path
import dgl
import torch
import torch.distributed as dist

from zoo.data import NodeData
from zoo.data.csv_source import load_csv_dataset
from zoo.data.synthetic import synthetic_sbm_graph
from tests.engine.kill_at_call import KillAtCall
from zoo.engine import graph_trainer, node_trainer
from zoo.engine.divergence import TrainingDiverged
from zoo.engine.distributed import barrier, init_from_env, is_main, load_once_per_machine, main_first, world
from zoo.engine.epoch_loop import CHECKPOINT_EVERY
from zoo.engine.recipe import build_recipe
from zoo.nn.gated_attention import GatedMultiheadAttention
from zoo.nn.ltga_conv import LTGAConv
from zoo.ops import dense_qsoftmax

NODE_RECIPE = {"dataset": "toy", "name": "toy_ltga_edge_sampled", "seeds": [0],
               "model": {"name": "ltga", "hidden": 4, "heads": 2, "q_mode": "edge", "dropout": 0.0,
                         "attn_dropout": 0.0},
               "optim": {"epochs": 4, "patience": 50, "q_warmup": 1, "lr": 0.02},
               # 60 training nodes: batches of 16, 16, 16 and 12 an epoch, 8, 8, 8 and 6 per rank with 2 ranks
               "train": {"sampler": {"fanouts": [-1, -1], "batch_size": 16, "eval_batch_size": 32}}}


def graph_run(csv: Path, cache: Path, out: Path, local: str = "gine", dropout: float = 0.0,
              checkpoint_every: float = CHECKPOINT_EVERY) -> dict:
    """19 training graphs: batches of 8, 8 and 3 an epoch (4, 4 and 2 or 1 per rank with 2 ranks)."""
    with main_first():
        data = load_csv_dataset(csv, "smiles", ["a", "b"], split="random", cache_root=cache, progress=False)
    recipe = build_recipe({"dataset": "zinc_smiles", "name": "toy", "task": "graph_regression",
                           "model": {"name": "siggate_gt", "dim": 16, "heads": 2, "layers": 2, "local": local,
                                     "pe": "none", "norm": "layer", "dropout": dropout, "attn_dropout": dropout},
                           "optim": {"epochs": 3, "batch_size": 8, "lr": 0.01}})
    return graph_trainer.train_graph_model(recipe, data, seed=0, run_dir=out, progress=False,
                                           checkpoint_every=checkpoint_every)


def node_data() -> NodeData:
    """120 nodes, 60 of them training nodes (an even count: no node sits out an epoch on 2 ranks)."""
    g = synthetic_sbm_graph(120, 600, num_classes=3, homophily=0.7, num_features=6, split=(0.5, 0.25, 0.25), seed=3)
    graph = dgl.add_self_loop(dgl.graph(g.edges(), num_nodes=g.num_nodes()))
    return NodeData(graph=graph, features=g.ndata["feat"], labels=g.ndata["label"], num_classes=3, split=0,
                    train_mask=g.ndata["train_mask"], val_mask=g.ndata["val_mask"], test_mask=g.ndata["test_mask"],
                    card={"metric": "accuracy"})


def node_run(out: Path, kill: int | None = None, dropout: float = 0.0) -> dict:
    if kill is not None and is_main():
        node_trainer.sampled_forward = KillAtCall(node_trainer.sampled_forward, at=kill)

    def load():  # leaves a mark of the rank that loaded
        out.mkdir(parents=True, exist_ok=True)
        (out / f"loaded_by_rank{world()[0]}").touch()
        return node_data()

    data = load_once_per_machine(load)  # under torchrun: rank 1 attaches to rank 0's copy in shared memory
    recipe = {**NODE_RECIPE, "model": {**NODE_RECIPE["model"], "dropout": dropout, "attn_dropout": dropout}}
    return node_trainer.train_node_classifier(build_recipe(recipe), data, seed=0, run_dir=out, progress=False,
                                              checkpoint_every=0)


def killed_and_resumed(module, name: str, at: int, train, out: Path, kind: str) -> None:
    """``train(run_dir)`` with every rank interrupted at call ``at`` of ``module.name``, then again."""
    real = getattr(module, name)
    setattr(module, name, KillAtCall(real, at=at))
    try:
        train(out / f"{kind}_resumed")
    except KeyboardInterrupt:
        pass
    setattr(module, name, real)
    barrier()
    if is_main():
        partial = torch.load(out / f"{kind}_resumed" / "last.pt", weights_only=True)["partial"]
        (out / f"{kind}_killed.json").write_text(json.dumps({"trained": partial["trained"]}))
    train(out / f"{kind}_resumed")


def drawing_per_rank(real):
    """``real`` after drawing rank + 1 numbers from torch's generator, so the ranks' generators
    part ways. Dropout alone may not do that: with MKL (as here) a mask takes one seed per call,
    whatever its size; elsewhere one number per element."""
    def call(*args):
        torch.rand(world()[0] + 1)
        return real(*args)
    return call


def resumed_runs(csv: Path, cache: Path, out: Path) -> None:
    graph_trainer.rank_loss = drawing_per_rank(graph_trainer.rank_loss)
    node_trainer.sampled_forward = drawing_per_rank(node_trainer.sampled_forward)
    graph = partial(graph_run, csv, cache, dropout=0.3, checkpoint_every=0)
    node = partial(node_run, dropout=0.3)
    graph(out / "graph_whole")
    killed_and_resumed(graph_trainer, "update", 5, graph, out, "graph")  # epoch 1's second step
    node(out / "node_whole")
    killed_and_resumed(node_trainer, "sampled_forward", 7, node, out, "node")  # epoch 1's third batch


def overflowing_on_rank_1(forward, training: bool, at: int):
    """A layer's ``forward``, except that on rank 1 its ``at``-th call in training (or eval) mode
    meets NaN attention scores: the op's own refusal, as when the weights overflowed."""
    calls = 0

    @wraps(forward)  # its signature: node_sampling reads it
    def call(layer, *args, **kwargs):
        nonlocal calls
        calls += layer.training == training
        if world()[0] == 1 and layer.training == training and calls == at:
            dense_qsoftmax(torch.tensor([math.nan, 0.0]), 1.5)
        return forward(layer, *args, **kwargs)
    return call


def overflow_runs(csv: Path, cache: Path, out: Path) -> None:
    graph = partial(graph_run, csv, cache)
    cases = {"graph_training": (GatedMultiheadAttention, True, graph),
             "node_training": (LTGAConv, True, node_run), "node_evaluation": (LTGAConv, False, node_run)}
    for case, (layer, training, train) in cases.items():
        real = layer.forward
        # in epoch 0: the second layer call of training, the first of evaluation
        layer.forward = overflowing_on_rank_1(real, training, at=2 if training else 1)
        try:
            train(out / case)
        except TrainingDiverged as err:
            (out / f"{case}_rank{world()[0]}.txt").write_text(str(err))
        finally:
            layer.forward = real


def exit_after_a_collective() -> None:
    sys.setswitchinterval(10.0)  # the main thread keeps the GIL until it blocks, as on a busy CPU
    outputs = [torch.empty(1000) for _ in range(dist.get_world_size())]
    work = dist.all_gather(outputs, torch.arange(1000.0), async_op=True)
    del outputs
    work.wait()
    del work


if __name__ == "__main__":
    init_from_env()
    mode, paths = sys.argv[1], list(map(Path, sys.argv[2:]))
    if mode == "graph":
        graph_run(*paths)
    elif mode == "graph_gatedgcn":  # its last layer's edge update is unused: DDP must accept that
        graph_run(*paths, local="gatedgcn")
    elif mode == "node":
        node_run(paths[0], *map(int, sys.argv[3:]))
    elif mode == "resume":
        resumed_runs(*paths)
    elif mode == "overflow":
        overflow_runs(*paths)
    else:
        exit_after_a_collective()
