"""Training-step benchmarks of whole models against their peer, measured in the same process.

``layers``: LTGA-Head and LTGA-Edge against GATv2 (same backbone, same graph).
``gps``: SigGate-GT against the ungated GPS model on ZINC-sized molecule batches (with a
``normaliser``, also the SigGate-GT model whose global attention uses it: ``sparsegate_gt``), or on
real training batches of a dataset card.
``aggregate``: :func:`zoo.ops.edge_weighted_sum` against DGL's ``update_all(u_mul_e, sum)``.
``logits``: :func:`zoo.ops.edge_gatv2_logits` against the materialised ``[E, H, F]`` computation
(DGL's ``GATv2Conv``, and ``LTGAConv`` before it).

Steps of the models are interleaved (A, B, C, A, B, C, ...) so that load from other processes
hits each alike; the table gives the median ms per step and the ratio to the peer.
"""
from __future__ import annotations

import contextlib
import itertools
import os
import statistics
import time

import dgl
import torch
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
from torch.nn import functional as F

from zoo.data import load_graph_dataset, make_dataloaders
from zoo.engine.allocator import allocator_setting
from zoo.engine.graph_trainer import build_index_optimizer, build_optimizer, masked_loss, update
from zoo.engine.recipe import RecipeError, load_recipe
from zoo.models.registry import create_model, model_arguments
from zoo.ops import _fused, edge_gatv2_logits, edge_weighted_sum


CLOCKS = {"wall": time.perf_counter, "cpu": time.process_time}
"""``wall``: elapsed time. ``cpu``: this process's CPU time over all its threads, which other jobs on
the machine disturb less (they still share caches and memory bandwidth)."""


def _median_step_ms(steps: dict, repeats: int, warmup: int = 2, clock: str = "wall") -> dict[str, float]:
    now = CLOCKS[clock]
    for _ in range(warmup):
        for step in steps.values():
            step()
    times = {name: [] for name in steps}
    for _ in range(repeats):
        for name, step in steps.items():
            started = now()
            step()
            times[name].append((now() - started) * 1e3)
    return {name: statistics.median(values) for name, values in times.items()}


def _updater(model, optim=None):
    """``(optimizer, apply)``, the update of ``model``'s training steps. ``optim`` (a recipe's
    ``OptimConfig``): the graph trainer's own update (its optimizer, gradient clipping, and a learned
    q's own Adam as after its warm-up); None: plain ``Adam``. One per model: the trainer's flat-buffer
    AdamW takes over the storage of the model's parameters, so a second one would orphan the first."""
    if optim is None:
        optimizer = torch.optim.Adam(model.parameters(), lr=1e-3)
        apply = optimizer.step
    elif (index := build_index_optimizer(model, optim)) is None:
        optimizer = build_optimizer(model, optim)
        apply = lambda: update(model, optimizer, optim)  # noqa: E731
    else:
        optimizer = build_optimizer(model, optim)

        def apply():
            update(model, optimizer, optim)
            index.step()
            index.zero_grad()
    return optimizer, apply


def _train_step(model, loss_fn, optim=None, updater=None):
    """A training step: forward, backward and update, with ``updater`` (the model's
    :func:`_updater`, shared by several steps of one model) or a new one from ``optim``."""
    optimizer, apply = updater or _updater(model, optim)

    def step():
        optimizer.zero_grad()
        loss_fn(model).backward()
        apply()

    return step


def _print_table(title: str, ms: dict[str, float], peer: str, step: str = "training step", unit: str = "ms") -> None:
    print(f"\n{title}")
    allocator = ", ".join(f"{key}={os.environ.get(key, 'unset')}" for key in
                          ("LD_PRELOAD", "MALLOC_CONF", "MALLOC_ARENA_MAX", "MALLOC_TRIM_THRESHOLD_"))
    print(f"allocator: {allocator_setting()}; {allocator}, torch threads {torch.get_num_threads()}")
    print(f"| model | {unit} / {step} (median) | ratio to {peer} |\n|---|---|---|")
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

    DGL's ``update_all`` against :func:`zoo.ops.edge_weighted_sum` on its pure-torch path and,
    where the fused kernels are built, on its fused kernels. Defaults: a Tolokers-sized graph with
    the LTGA backbone's first layer (8 heads x 64).
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

    def step(op, fused=False):
        def run():
            with contextlib.nullcontext() if fused else _fused.disabled():
                op().backward(upstream)
        return run

    steps = {"dgl_update_all": step(dgl_update_all),
             "edge_weighted_sum, pure torch": step(lambda: edge_weighted_sum(graph, weights, feat))}
    if _fused.usable(feat):
        steps["edge_weighted_sum, fused"] = step(lambda: edge_weighted_sum(graph, weights, feat), True)
    ms = _median_step_ms(steps, repeats)
    _print_table(f"aggregate: {nodes} nodes, {graph.num_edges()} edges (with self-loops), {heads} heads x {feats}",
                 ms, "dgl_update_all", step="forward+backward")
    return ms


def benchmark_logits(nodes: int = 11758, edges: int = 1038000, heads: int = 8, feats: int = 64,
                     repeats: int = 3, chunk_powers: tuple[int, ...] = (), materialised: bool = True) -> dict[str, float]:
    """Median forward+backward of GATv2's logits ``a . LeakyReLU(x_i + x_j)`` ``[E, H]``: the
    materialised computation (``apply_edges(u_add_v)``, LeakyReLU, product, sum) against
    :func:`zoo.ops.edge_gatv2_logits` on its pure-torch path and, where the fused kernels are
    built, on its fused kernel. Defaults: a Tolokers-sized graph with the LTGA backbone's first
    layer (8 heads x 64). ``chunk_powers``: also time the pure-torch path with chunks of ``2**k``
    elements for each ``k`` (row ``edge_gatv2_logits, pure torch 2^k``; the default is
    :data:`zoo.ops.gatv2.CHUNK_ELEMENTS`). ``materialised=False`` leaves out the materialised
    computation (about 9 GB at the defaults), and ratios are then to the pure-torch path."""
    graph = random_graph(nodes, edges)
    gen = torch.Generator().manual_seed(1)
    feat_src, feat_dst = (torch.randn(nodes, heads, feats, generator=gen, requires_grad=True) for _ in range(2))
    attn = torch.randn(1, heads, feats, generator=gen, requires_grad=True)
    upstream = torch.randn(graph.num_edges(), heads, generator=gen)

    def materialise():
        with graph.local_scope():
            graph.srcdata["el"], graph.dstdata["er"] = feat_src, feat_dst
            graph.apply_edges(dgl.function.u_add_v("el", "er", "e"))
            return (F.leaky_relu(graph.edata.pop("e"), 0.2) * attn).sum(-1)

    def step(op, fused=False):
        def run():
            with contextlib.nullcontext() if fused else _fused.disabled():
                op().backward(upstream)
        return run

    steps = {"materialised": step(materialise)} if materialised else {}
    steps["edge_gatv2_logits, pure torch"] = step(lambda: edge_gatv2_logits(graph, feat_src, feat_dst, attn))
    if _fused.usable(feat_src):
        steps["edge_gatv2_logits, fused"] = step(lambda: edge_gatv2_logits(graph, feat_src, feat_dst, attn), True)
    for power in chunk_powers:
        chunk = max(1, 2 ** power // (heads * feats))
        steps[f"edge_gatv2_logits, pure torch 2^{power}"] = step(
            lambda chunk=chunk: edge_gatv2_logits(graph, feat_src, feat_dst, attn, chunk_edges=chunk))
    ms = _median_step_ms(steps, repeats, warmup=1)
    _print_table(f"logits: {nodes} nodes, {graph.num_edges()} edges (with self-loops), {heads} heads x {feats}",
                 ms, next(iter(ms)), step="forward+backward")
    return ms


def random_molecules(count: int, atoms: int | tuple[int, int] = 23, bonds: int = 25, seed: int = 0, lap_k: int = 8,
                     rwse_k: int = 20) -> dgl.DGLGraph:
    """A batch of random molecular graphs with OGB-spec categorical features and random
    ``lap_eigvec``/``lap_eigval`` ``[N, lap_k]`` and ``rwse`` ``[N, rwse_k]``: ZINC-sized by default
    (23 atoms, 25 bonds); ``atoms=(low, high)`` draws each molecule's size uniformly from that range,
    with ``size + 2`` bonds (e.g. ``(40, 400)`` for Peptides-func's spread of sizes)."""
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for _ in range(count):
        size = atoms if isinstance(atoms, int) else int(torch.randint(atoms[0], atoms[1] + 1, (1,), generator=gen))
        edges = bonds if isinstance(atoms, int) else size + 2
        chain = torch.arange(size - 1)
        extra = torch.randint(0, size, (2, edges - (size - 1)), generator=gen)
        src, dst = torch.cat([chain, extra[0]]), torch.cat([chain + 1, extra[1]])
        g = dgl.to_bidirected(dgl.graph((src, dst), num_nodes=size))
        g.ndata["feat"] = torch.stack([torch.randint(0, d, (size,), generator=gen) for d in get_atom_feature_dims()], 1)
        g.edata["feat"] = torch.stack([torch.randint(0, d, (g.num_edges(),), generator=gen)
                                       for d in get_bond_feature_dims()], 1)
        graphs.append(g)
    batch = dgl.batch(graphs)
    batch.ndata["rwse"] = torch.rand(batch.num_nodes(), rwse_k, generator=gen)
    batch.ndata["lap_eigvec"] = torch.randn(batch.num_nodes(), lap_k, generator=gen)
    batch.ndata["lap_eigval"] = torch.rand(batch.num_nodes(), lap_k, generator=gen)
    return batch


GPS_DEFAULT = dict(dim=64, heads=8, layers=10, local="gine", pe="lap+rwse", lap_k=8, rwse_k=20, pool="sum")
NORMALISER_OPTIONS = {  # sparsegate_gt's global attention as recipes/*_sparsegate_*.yaml set it
    "qsoftmax": dict(normaliser="qsoftmax", q_mode="head"),
    "entmax": dict(normaliser="entmax", alpha=1.5, alpha_mode="head"),
    "sparsemax": dict(normaliser="sparsemax"), "softmax": dict(normaliser="softmax"),
}


def random_molecule_loss(spec: dict, batch_size: int, atoms: int | tuple[int, int], batches: int = 1):
    """``model -> L1 loss`` on ``batches`` fixed batches of :func:`random_molecules` (seeds 0, 1, ...;
    the next one at each call, cycling) with the positional encodings of ``spec`` (a model's
    ``pe_spec()``) and random regression targets."""
    data = [(random_molecules(batch_size, atoms, seed=seed, lap_k=spec.get("lap_k", 8), rwse_k=spec.get("rwse_k", 20)),
             torch.randn(batch_size, 1)) for seed in range(batches)]
    return _real_batch_loss(data, "graph_regression")


def _real_batch_loss(batches: list, task: str):
    """A loss closure that takes the next of ``batches`` (cycling) at every call: the trainer's
    masked loss of the model on it."""
    calls = itertools.count()

    def loss(model):
        graphs, target = batches[next(calls) % len(batches)]
        return masked_loss(model(graphs), target, task)
    return loss


def _mean_nodes(batches: list) -> float:
    return statistics.mean(graphs.num_nodes() / graphs.batch_size for graphs, _ in batches)


ONE_BLOCK = 1 << 30
"""A ``GROUP_MIN_WIDTH`` wider than any batch: one padded block, as before the size groups."""


def _with_min_width(step, width: int):
    """``step`` with the global attention's size groups starting at ``width`` nodes
    (:data:`zoo.nn.gated_attention.GROUP_MIN_WIDTH`; :data:`ONE_BLOCK`: no groups)."""
    from zoo.nn import gated_attention

    def run():
        default, gated_attention.GROUP_MIN_WIDTH = gated_attention.GROUP_MIN_WIDTH, width
        try:
            step()
        finally:
            gated_attention.GROUP_MIN_WIDTH = default
    return run


def _with_pure_ops(step):
    """``step`` with the fused CPU kernels off (:func:`zoo.ops._fused.disabled`): the pure-torch
    paths that ``ZOO_FUSED_OPS=0`` selects."""
    def run():
        with _fused.disabled():
            step()
    return run


def gps_configs(recipe: str | None = None) -> tuple[dict, dict]:
    """Keyword arguments of the ``gps`` and ``siggate_gt`` models to time.

    Without ``recipe``: the session-2 setting (GINE, LapPE 8 + RWSE 20, per-head output gate).
    With ``recipe`` (a SigGate-GT recipe, e.g. ``recipes/zinc_siggate.yaml``): its model section
    exactly, and for ``gps`` the same model less the keys ``gps`` does not take (the gate's).

    >>> ungated, gated = gps_configs("recipes/molhiv_siggate.yaml")
    >>> sorted(set(gated) - set(ungated))
    ['gate', 'gate_activation', 'gate_bias_init', 'gate_per_head', 'gate_weight_init']
    """
    if recipe is None:
        return dict(GPS_DEFAULT), dict(GPS_DEFAULT, gate="output")
    model = dict(load_recipe(recipe).model)
    if model.pop("name") != "siggate_gt":
        raise RecipeError(f"{recipe} is not a siggate_gt recipe; give one such as recipes/zinc_siggate.yaml")
    ungated = model_arguments("gps")
    return {k: v for k, v in model.items() if k in ungated}, model


def benchmark_gps(batch_size: int = 32, repeats: int = 20, recipe: str | None = None,
                  models: tuple[str, ...] = ("gps", "siggate_gt"), profile: int = 0,
                  top: int = 25, peer: str | None = None, normaliser: str | None = None,
                  atoms: int | tuple[int, int] = 23, one_block: bool = False,
                  dataset: str | None = None, min_widths: tuple[int, ...] = (),
                  clock: str = "wall", pure_ops: bool = False) -> dict[str, float]:
    """Median training step of the ZINC GPS model with and without the per-head output gate.

    ``recipe``: build both from a SigGate-GT recipe's model section (see :func:`gps_configs`) and
    update them as the graph trainer does with its ``optim`` section (its optimizer, foreach,
    gradient clipping); without it, plain ``Adam``.
    ``profile`` > 0: instead of timing, run that many training steps of the last of ``models``
    under ``torch.profiler`` and print the ``top`` operators by self CPU time.
    ``peer="pyg"``: also time the ungated model with PyG's ``GPSConv`` layers (equal parameter
    count, :mod:`tools.benchmarks.pyg_gps`), interleaved with the others; ratios are then to it.
    ``normaliser``: also time ``sparsegate_gt_<normaliser>``, the ``siggate_gt`` model whose global
    attention uses it (:data:`NORMALISER_OPTIONS`: learned per-head q or alpha), last.
    ``atoms``: molecule sizes (:func:`random_molecules`). ``one_block``: also time each model with
    its global attention over one block padded to the batch's largest graph (row ``<model> (one
    block)``), the path before :func:`zoo.nn.gated_attention.dense_batch_groups`. ``min_widths``:
    also time each model with its size groups starting at each of these widths instead of
    :data:`~zoo.nn.gated_attention.GROUP_MIN_WIDTH` (rows ``<model> (groups from W)``).
    ``pure_ops``: also time each model with the fused CPU kernels off (rows ``<model> (pure-torch
    ops)``; GatedGCN's message passing is then index_select / index_add_), interleaved step by step.
    ``clock``: a key of :data:`CLOCKS`; ``cpu`` times CPU time, steadier beside other jobs.
    The command line (``tools/benchmark.py gps``) first keeps freed memory as the training tools
    do (:func:`zoo.engine.allocator.keep_freed_memory`; ``ZOO_MALLOC=default`` turns it off), so
    the step is timed as the trainer runs it.
    ``dataset``: instead of random molecules, the training batches of this dataset card (loaded
    as the trainer loads it, with the models' positional encodings; ``atoms`` is then unused), the
    models built for its targets and featurizer; round ``r`` of the timing steps every model on
    the ``r``-th batch (shuffled with seed 0), so the median is over real batches.
    """
    configs = dict(zip(("gps", "siggate_gt"), gps_configs(recipe)))
    data = None
    if dataset is not None:
        featurizer = load_recipe(recipe).featurizer if recipe else None
        data = load_graph_dataset(dataset, seed=0, featurizer=featurizer, progress=False)
        configs = {name: dict(config, **data.model_inputs, num_outputs=data.num_tasks)
                   for name, config in configs.items()}
    torch.manual_seed(0)
    built = {name: create_model(name, **configs[name]) for name in models}
    if peer == "pyg":
        from tools.benchmarks.pyg_gps import pyg_gps_like

        ungated = create_model("gps", **configs["gps"])
        first = ungated.gps_layers()[0]
        built = {"pyg_gpsconv": pyg_gps_like(ungated, heads=first.attn.heads, attn_dropout=first.attn.attn_dropout.p,
                                             dropout=first.dropout.p), **built}
    if normaliser is not None:
        built[f"sparsegate_gt_{normaliser}"] = create_model("sparsegate_gt", **configs["siggate_gt"],
                                                            **NORMALISER_OPTIONS[normaliser])
    spec = next(iter(built.values())).pe_spec()
    optim = load_recipe(recipe).optim if recipe else None  # the recipe's update, as the graph trainer runs it
    if data is None:
        loss = random_molecule_loss(spec, batch_size, atoms)
        make_loss = lambda: loss  # noqa: E731
    else:
        data.add_positional_encodings(spec, progress=True)
        rounds = (profile + 2) if profile else (repeats + 2)  # two warm-up rounds, as _median_step_ms
        loader = make_dataloaders(data, batch_size, seed=0)["train"]
        batches = [b for b, _ in zip(loader, range(rounds))]
        make_loss = lambda: _real_batch_loss(batches, data.task)  # noqa: E731  (each step its own batch count)
    updaters = {name: _updater(model, optim) for name, model in built.items()}
    steps = {name: _train_step(model, make_loss(), updater=updaters[name]) for name, model in built.items()}
    variants = {f"groups from {width}": width for width in min_widths}
    if one_block:
        variants["one block"] = ONE_BLOCK
    for label, width in variants.items():
        steps.update({f"{name} ({label})": _with_min_width(_train_step(model, make_loss(), updater=updaters[name]),
                                                           width) for name, model in built.items()})
    if pure_ops:
        steps.update({f"{name} (pure-torch ops)": _with_pure_ops(_train_step(model, make_loss(), updater=updaters[name]))
                      for name, model in built.items()})
    setting = recipe or "GINE + LapPE 8 + RWSE 20"
    sizes = f"{atoms} atoms" if isinstance(atoms, int) else f"{atoms[0]}-{atoms[1]} atoms"
    what = f"random molecules ({sizes})" if data is None else \
        f"{dataset} training graphs (mean {_mean_nodes(batches):.1f} nodes over the timed batches)"
    title = f"gps: batches of {batch_size} {what}, {setting}, " + \
        ", ".join(f"{k} {configs['siggate_gt'][k]}" for k in ("layers", "dim", "heads", "local"))
    if profile:
        name, step = list(steps.items())[-1]
        for _ in range(2):
            step()
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
            for _ in range(profile):
                step()
        print(f"\n{title}\nprofile of {profile} training steps of {name}, torch threads {torch.get_num_threads()}")
        print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=top))
        return {}
    ms = _median_step_ms(steps, repeats, clock=clock)
    _print_table(title, ms, next(iter(built)), unit="CPU ms" if clock == "cpu" else "ms")
    if peer:
        print("parameters: " + ", ".join(f"{name} {sum(p.numel() for p in model.parameters())}"
                                          for name, model in built.items()))
    return ms
