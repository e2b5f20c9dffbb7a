"""Scale benchmark (issue 17): training seeds per second and peak resident memory of a recipe's
node model (default LTGA-Edge, ``recipes/cora_ltga_edge_sampled.yaml``) on synthetic DC-SBM graphs
(the ``synthetic_sbm_100k`` / ``synthetic_sbm_1m`` cards' generator and parameters at each size):

* ``full``: one full-batch step over every training node, one process;
* ``sampled``: the recipe's ``train.sampler`` mini-batches (NeighborSampler), one process;
* ``ranks2``: the same mini-batches data-parallel on 2 torchrun ranks (gloo; each rank takes half
  of every batch, as ``train_node_classifier`` does).

Each (graph, mode) runs in a fresh process (torchrun for 2 ranks) that loads the graph the parent
saved (``dgl.save_graphs``), so its peak RSS (``ru_maxrss``) is its own: the graph, the features,
the model and the steps. Seeds per second: training nodes stepped over per second of wall time,
after one warm-up step (full batch: ``repeats`` steps over all training nodes; mini-batch:
``batches`` batches). With 2 ranks the time is the slower rank's and RSS is given per rank (max)
and summed.
"""
from __future__ import annotations

import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import dgl
import torch
from torch.nn import functional as F

from zoo.data import load_card, synthetic_sbm_graph
from zoo.engine.distributed import all_sum, init_from_env, world
from zoo.engine.node_sampling import sampled_forward, shuffled_batches
from zoo.engine.recipe import load_recipe
from zoo.models import create_model

ROOT = Path(__file__).resolve().parents[2]
MODES = ("full", "sampled", "ranks2")
CARDS = {10**5: "synthetic_sbm_100k", 10**6: "synthetic_sbm_1m"}


def graph_parameters(num_nodes: int) -> dict:
    """The synthetic card's generator parameters, at ``num_nodes`` nodes and 10 edges a node (the
    cards' ratio): exactly the card's graph at 1e5 and 1e6 nodes."""
    parameters = dict(load_card("synthetic_sbm_100k")["source"]["parameters"])
    return {**parameters, "num_nodes": num_nodes, "num_edges": 10 * num_nodes}


def save_graph(num_nodes: int, folder: Path) -> Path:
    """Generate the graph, add one self-loop per node (as the node loader does) and save it."""
    g = synthetic_sbm_graph(**graph_parameters(num_nodes))
    graph = dgl.add_self_loop(dgl.graph(g.edges(), num_nodes=g.num_nodes()))
    for key in ("feat", "label", "train_mask"):
        graph.ndata[key] = g.ndata[key]
    path = folder / f"sbm_{num_nodes}.bin"
    dgl.save_graphs(str(path), [graph])
    return path


def measure(config: dict) -> dict | None:
    """One (graph, mode) in this process (or this torchrun rank): seeds per second and peak RSS."""
    init_from_env()
    rank, size = world()
    recipe = load_recipe(config["recipe"])
    sampler = recipe.train.sampler
    (graph,), _ = dgl.load_graphs(config["graph"])
    features, labels = graph.ndata.pop("feat"), graph.ndata.pop("label")
    train = graph.ndata.pop("train_mask").nonzero().squeeze(1)
    torch.manual_seed(0)
    model = create_model(recipe.model["name"], in_feats=features.shape[1], num_classes=int(labels.max()) + 1,
                         **recipe.model_args())
    trained = model if size == 1 else torch.nn.parallel.DistributedDataParallel(model)
    optimizer = torch.optim.Adam(model.parameters(), lr=recipe.optim.lr)

    def step(logits, target):
        optimizer.zero_grad()
        F.cross_entropy(logits, target).backward()
        optimizer.step()

    if config["mode"] == "full":
        def steps(count):
            for _ in range(count):
                step(model(graph, features)[train], labels[train])
                yield len(train)
        warm, timed = steps(1), steps(config["repeats"])
    else:
        def steps(count, epoch):
            batches = shuffled_batches(graph, train, sampler.fanouts, sampler.batch_size,
                                       torch.Generator().manual_seed(epoch), rank, size)
            for _, (input_nodes, output_nodes, blocks) in zip(range(count), batches):
                step(sampled_forward(trained, graph, blocks, features[input_nodes]), labels[output_nodes])
                yield len(output_nodes)
        warm, timed = steps(1, 0), steps(config["batches"], 1)
    sum(warm)
    all_sum(0)  # every rank starts the clock together
    started = time.perf_counter()
    seeds = sum(timed)
    seconds = time.perf_counter() - started
    seeds, seconds = int(all_sum(seeds)), seconds if size == 1 else _slowest(seconds)
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 2**20  # KiB -> GiB
    rss_ranks = [all_sum(rss if r == rank else 0.0) for r in range(size)]
    if rank:
        return None
    return {"seeds_per_s": seeds / seconds, "seconds": seconds, "seeds": seeds,
            "peak_rss_gib": max(rss_ranks), "total_rss_gib": sum(rss_ranks), "ranks": size}


def _slowest(seconds: float) -> float:
    """The largest ``seconds`` over ranks."""
    value = torch.tensor([seconds])
    torch.distributed.all_reduce(value, op=torch.distributed.ReduceOp.MAX)
    return float(value)


def _launch(config: dict, timeout: float) -> dict:
    """``measure(config)`` in a fresh process (torchrun for ``ranks2``); its result or an error."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "1")}
    env.pop("WORLD_SIZE", None)
    launcher = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                "--max-restarts=0", "--monitor-interval=0.2"] if config["mode"] == "ranks2" else [sys.executable]
    try:
        done = subprocess.run([*launcher, str(Path(__file__).resolve()), json.dumps(config)], env=env,
                              capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if done.returncode:
        lines = [line for line in done.stderr.splitlines() if "Error" in line] or done.stderr.splitlines() or [""]
        return {"error": lines[-1].strip() or f"exit code {done.returncode} (killed: out of memory?)"}
    return json.loads(done.stdout.strip().splitlines()[-1])


def format_row(nodes: int, mode: str, result: dict) -> str:
    """One table row: graph size, mode, seeds/s, seconds, peak RSS per process and in total."""
    if "error" in result:
        return f"{nodes:>10,d}  {mode:8s}  {result['error']}"
    return (f"{nodes:>10,d}  {mode:8s}  {result['seeds_per_s']:>10,.0f}  {result['seeds']:>9,d}  "
            f"{result['seconds']:>8.2f}  {result['peak_rss_gib']:>9.2f}  {result['total_rss_gib']:>9.2f}")


HEADER = (f"{'nodes':>10s}  {'mode':8s}  {'seeds/s':>10s}  {'seeds':>9s}  {'seconds':>8s}  "
          f"{'peak GiB':>9s}  {'total GiB':>9s}")


def run(sizes=(10**5, 10**6), modes=MODES, recipe="recipes/cora_ltga_edge_sampled.yaml", batches=20,
        repeats=1, timeout=3600.0) -> list[tuple[int, str, dict]]:
    """Print the table (and return its rows); ``sizes`` in nodes, 10 edges a node."""
    loaded = load_recipe(ROOT / recipe)  # a relative path is the checkout's
    print(f"scale benchmark: {loaded.model['name']} {loaded.model_args()} from {recipe}; sampler "
          f"{loaded.train.sampler}; torch {torch.__version__}, dgl {dgl.__version__}, "
          f"OMP_NUM_THREADS={os.environ.get('OMP_NUM_THREADS', '1')} per process, "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    print(f"graphs: synthetic DC-SBM ({', '.join(CARDS.values())} parameters), 10 edges a node + self-loops; "
          f"mini-batch: {batches} batches after a warm-up one; full batch: {repeats} step(s) after a warm-up one")
    print(HEADER)
    rows = []
    with tempfile.TemporaryDirectory(prefix="zoo-scale-") as folder:
        for nodes in sizes:
            path = save_graph(nodes, Path(folder))
            for mode in modes:
                config = {"graph": str(path), "mode": mode, "recipe": str(ROOT / recipe), "batches": batches,
                          "repeats": repeats}
                result = _launch(config, timeout)
                rows.append((nodes, mode, result))
                print(format_row(nodes, mode, result), flush=True)
            path.unlink()
    return rows


if __name__ == "__main__":
    result = measure(json.loads(sys.argv[1]))
    if result is not None:
        print(json.dumps(result))
