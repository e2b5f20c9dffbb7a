"""Training-step benchmarks of whole models against their peer, measured in the same process.

``layers``: LTGA-Head and LTGA-Edge against GATv2 (same backbone, same graph).
``gps``: SigGate-GT against the ungated GPS model on ZINC-sized molecule batches.
``aggregate``: :func:`zoo.ops.edge_weighted_sum` against DGL's ``update_all(u_mul_e, sum)``.

Steps of the models are interleaved (A, B, C, A, B, C, ...) so that load from other processes
hits each alike; the table gives the median ms per step and the ratio to the peer.
"""
from __future__ import annotations

import os
import statistics
import time

import dgl
import torch
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
from torch.nn import functional as F

from zoo.models.registry import create_model
from zoo.ops import edge_weighted_sum


def _median_step_ms(steps: dict, repeats: int, warmup: int = 2) -> dict[str, float]:
    for _ in range(warmup):
        for step in steps.values():
            step()
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            started = time.perf_counter()
            step()
            times[name].append((time.perf_counter() - started) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def _train_step(model, loss_fn):
    optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)

    def step():
        optimizer.zero_grad()
        loss_fn(model).backward()
        optimizer.step()

    return step


def _print_table(title: str, ms: dict[str, float], peer: str, step: str = "training step") -> None:
    print(f"\n{title}")
    allocator = ", ".join(f"{key}={os.environ.get(key, 'unset')}" for key in
                          ("LD_PRELOAD", "MALLOC_CONF", "MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_"))
    print(f"allocator: {allocator}, torch threads {torch.get_num_threads()}")
    print(f"| model | ms / {step} (median) | ratio to {peer} |\n|---|---|---|")
    for name, value in ms.items():
        print(f"| {name} | {value:.1f} | {value / ms[peer]:.3f} |")


def random_graph(nodes: int, edges: int, seed: int = 0) -> dgl.DGLGraph:
    """A graph with power-law-ish in-degrees (destinations drawn from a Zipf-like law) and self-loops."""
    gen = torch.Generator().manual_seed(seed)
    weights = 1.0 / torch.arange(1, nodes + 1, dtype=torch.float64) ** 0.8
    dst = torch.multinomial(weights, edges, replacement=True, generator=gen)
    src = torch.randint(0, nodes, (edges,), generator=gen)
    return dgl.add_self_loop(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=nodes)))


def benchmark_layers(nodes: int = 2708, edges: int = 10556, feats: int = 1433, classes: int = 7,
                     repeats: int = 20, density: float | None = None) -> dict[str, float]:
    """Median training step of GATv2, LTGA-Head and LTGA-Edge (2 layers, 8 x 64, the paper's backbone).

    With ``density`` the features are random 0/1 bag-of-words at that density and LTGA-Head also
    runs with ``sparse_features=True`` (row ``ltga_head_sparse``).
    """
    if density is not None and not 0 < density < 1:
        raise ValueError(f"density must lie in (0, 1), got {density}")
    graph = random_graph(nodes, edges)
    gen = torch.Generator().manual_seed(1)
    x = torch.randn(nodes, feats, generator=gen) if density is None else \
        (torch.rand(nodes, feats, generator=gen) < density).float()
    y = torch.randint(0, classes, (nodes,), generator=gen)
    loss = lambda model: F.cross_entropy(model(graph, x), y)
    models = {"gatv2": create_model("gatv2", in_feats=feats, num_classes=classes),
              "ltga_head": create_model("ltga", in_feats=feats, num_classes=classes, q_mode="head"),
              "ltga_edge": create_model("ltga", in_feats=feats, num_classes=classes, q_mode="edge")}
    if density is not None:
        models["ltga_head_sparse"] = create_model("ltga", in_feats=feats, num_classes=classes, q_mode="head",
                                                  sparse_features=True)
    ms = _median_step_ms({name: _train_step(model, loss) for name, model in models.items()}, repeats)
    kind = "random normal" if density is None else f"0/1 bag-of-words at density {density:g}"
    _print_table(f"layers: {nodes} nodes, {graph.num_edges()} edges (with self-loops), {feats} {kind} features",
                 ms, "gatv2")
    return ms


def benchmark_aggregate(nodes: int = 11758, edges: int = 1038000, heads: int = 8, feats: int = 64,
                        repeats: int = 5) -> dict[str, float]:
    """Median forward+backward of the attention aggregation ``[E, H]`` x ``[N, H, F]`` -> ``[N, H, F]``.

    Defaults: a Tolokers-sized graph with the LTGA backbone's first layer (8 heads x 64).
    """
    graph = random_graph(nodes, edges)
    graph.create_formats_()
    gen = torch.Generator().manual_seed(1)
    weights = torch.rand(graph.num_edges(), heads, generator=gen, requires_grad=True)
    feat = torch.randn(nodes, heads, feats, generator=gen, requires_grad=True)
    upstream = torch.randn(nodes, heads, feats, generator=gen)

    def dgl_update_all():
        with graph.local_scope():
            graph.srcdata["h"], graph.edata["a"] = feat, weights.unsqueeze(-1)
            graph.update_all(dgl.function.u_mul_e("h", "a", "m"), dgl.function.sum("m", "out"))
            return graph.dstdata["out"]

    def step(op):
        return lambda: op().backward(upstream)

    ms = _median_step_ms({"dgl_update_all": step(dgl_update_all),
                          "edge_weighted_sum": step(lambda: edge_weighted_sum(graph, weights, feat))}, repeats)
    _print_table(f"aggregate: {nodes} nodes, {graph.num_edges()} edges (with self-loops), {heads} heads x {feats}",
                 ms, "dgl_update_all", step="forward+backward")
    return ms


def random_molecules(count: int, atoms: int = 23, bonds: int = 25, seed: int = 0) -> dgl.DGLGraph:
    """A batch of ZINC-sized random molecular graphs with OGB-spec categorical features."""
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for _ in range(count):
        chain = torch.arange(atoms - 1)
        extra = torch.randint(0, atoms, (2, bonds - (atoms - 1)), generator=gen)
        src, dst = torch.cat([chain, extra[0]]), torch.cat([chain + 1, extra[1]])
        g = dgl.to_bidirected(dgl.graph((src, dst), num_nodes=atoms))
        g.ndata["feat"] = torch.stack([torch.randint(0, d, (atoms,), generator=gen) for d in get_atom_feature_dims()], 1)
        g.edata["feat"] = torch.stack([torch.randint(0, d, (g.num_edges(),), generator=gen)
                                       for d in get_bond_feature_dims()], 1)
        graphs.append(g)
    batch = dgl.batch(graphs)
    batch.ndata["rwse"] = torch.rand(batch.num_nodes(), 20, generator=gen)
    batch.ndata["lap_eigvec"] = torch.randn(batch.num_nodes(), 8, generator=gen)
    batch.ndata["lap_eigval"] = torch.rand(batch.num_nodes(), 8, generator=gen)
    return batch


def benchmark_gps(batch_size: int = 32, repeats: int = 20) -> dict[str, float]:
    """Median training step of the ZINC GPS model with and without the per-head output gate."""
    batch = random_molecules(batch_size)
    target = torch.randn(batch_size, 1)
    loss = lambda model: F.l1_loss(model(batch), target)
    config = dict(dim=64, heads=8, layers=10, local="gine", pe="lap+rwse", lap_k=8, rwse_k=20, pool="sum")
    models = {"gps": create_model("gps", **config),
              "siggate_gt": create_model("siggate_gt", gate="output", **config)}
    ms = _median_step_ms({name: _train_step(model, loss) for name, model in models.items()}, repeats)
    _print_table(f"gps: batches of {batch_size} ZINC-sized molecules (23 atoms), 10 layers, d 64, 8 heads", ms, "gps")
    return ms
