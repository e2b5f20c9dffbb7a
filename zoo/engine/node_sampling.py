"""Mini-batch node classification on DGL's message-flow graphs, and layer-wise inference.

Training draws seed nodes and their sampled neighbourhoods with ``dgl.dataloading.NeighborSampler``
and ``dgl.dataloading.DataLoader``; layer ``i`` of the model runs on block ``i``. Inference runs
one layer at a time over all nodes in chunks (``MultiLayerFullNeighborSampler(1)``), so its
memory is two layers' node representations plus one chunk, never the whole model on the graph.

The zoo's node models take one graph and call their graph layers in order (``conv(graph, h)``).
They run unchanged here: each graph layer (an outermost submodule whose ``forward`` takes the
graph first, e.g. ``GATConv``, ``LTGAConv``) receives its block through a forward pre-hook, and
in layer-wise inference the layers before the current one replay their stored outputs, so the
model's own code between layers (activation, head concatenation, dropout) is what runs.
``GraphConv`` (GCN) normalises by the degrees it sees; on a block those are the block's, so it
gets edge weights that turn them into the full graph's (exact with full neighbourhoods).

>>> import torch
>>> from zoo.data import load_node_dataset
>>> from zoo.models import create_model
>>> data = load_node_dataset("texas", split=0)  # ZOO_DATA or a download
>>> g, train_nodes = data.graph, data.train_mask.nonzero().squeeze(1)
>>> _ = torch.manual_seed(0)
>>> model = create_model("gcn", in_feats=data.features.shape[1], num_classes=data.num_classes, layers=2)
>>> shapes = []  # one epoch of training-step logits over the 87 training nodes, batches of 32
>>> for input_nodes, output_nodes, blocks in shuffled_batches(g, train_nodes, [10, 10], 32,
...                                                            torch.Generator().manual_seed(0)):
...     shapes.append(tuple(sampled_forward(model.train(), g, blocks, data.features[input_nodes]).shape))
>>> shapes
[(32, 5), (32, 5), (23, 5)]
>>> with torch.no_grad():  # full neighbourhoods: the full-batch forward, sampled or layer by layer
...     full = model.eval()(g, data.features)
...     input_nodes, output_nodes, blocks = next(iter(neighbour_loader(g, train_nodes, [-1, -1], 64)))
...     torch.allclose(sampled_forward(model, g, blocks, data.features[input_nodes]), full[output_nodes], atol=1e-5)
...     torch.allclose(layerwise_forward(model, g, data.features, chunk_size=64), full, atol=1e-5)
True
True
"""
from __future__ import annotations

import inspect
import warnings
from contextlib import contextmanager

import dgl
import torch
from dgl.nn import GraphConv
from torch import nn

from zoo.engine.distributed import gather_rows, stop_together
from zoo.models.capabilities import HasLTGALayers
from zoo.nn.ltga_conv import LTGAConv


def graph_layers(model: nn.Module) -> list[nn.Module]:
    """The model's graph layers in registration order: the outermost submodules whose ``forward``
    takes the graph first (a parameter named ``graph`` or ``g``).

    >>> from zoo.models import create_model
    >>> [type(m).__name__ for m in graph_layers(create_model("gat", in_feats=4, num_classes=2))]
    ['GATConv', 'GATConv']
    """
    found: list[tuple[str, nn.Module]] = []
    for name, module in model.named_modules():
        if module is model or any(name.startswith(f"{outer}.") for outer, _ in found):
            continue
        parameters = list(inspect.signature(module.forward).parameters)
        if parameters and parameters[0] in ("graph", "g"):
            found.append((name, module))
    return [module for _, module in found]


def neighbour_loader(graph, nodes: torch.Tensor, fanouts: list[int], batch_size: int) -> dgl.dataloading.DataLoader:
    """DGL's DataLoader of ``(input_nodes, output_nodes, blocks)`` over ``nodes`` in their order,
    with ``NeighborSampler(fanouts)`` (fanouts input layer first, -1: every neighbour)."""
    sampler = dgl.dataloading.NeighborSampler(fanouts)
    return dgl.dataloading.DataLoader(graph, nodes.to(graph.device), sampler, batch_size=batch_size,
                                      shuffle=False, drop_last=False, device=graph.device)


def shuffled_batches(graph, nodes: torch.Tensor, fanouts: list[int], batch_size: int, generator: torch.Generator,
                     rank: int = 0, world_size: int = 1):
    """One epoch of mini-batches over ``nodes`` in a random order, with sampled neighbourhoods.

    The order and DGL's sampling seed are drawn from ``generator`` (the trainer seeds one per
    epoch, so a resumed run draws the same batches and neighbours; DGL's own shuffle permutes the
    previous epoch's order in place and its generator state cannot be saved). With
    ``world_size`` > 1 (torchrun) every rank draws the same order and batches of
    ``batch_size`` nodes, and gets ``batch_size // world_size`` nodes of each from DGL's
    DDP-aware DataLoader (``use_ddp=True``): the ranks' batches make up the single-process ones.
    The last ``len(nodes) % world_size`` nodes of the order sit out that epoch.

    (Example: the module's.)
    """
    order = nodes[torch.randperm(len(nodes), generator=generator).to(nodes.device)]
    dgl.seed(int(torch.randint(0, 2**31 - 1, (), generator=generator)))
    if world_size == 1:
        return _iterate(neighbour_loader(graph, order, fanouts, batch_size))
    if batch_size % world_size:
        raise ValueError(f"train.sampler.batch_size={batch_size} does not split over {world_size} ranks; use a "
                         f"multiple of {world_size}, e.g. --set train.sampler.batch_size="
                         f"{batch_size - batch_size % world_size or world_size}")
    # DGL gives rank r the r-th contiguous slice of the node list: lay the list out so that this
    # slice is, batch after batch, the r-th part of each single-process batch
    kept = order[:len(order) - len(order) % world_size]
    parts = [batch.view(world_size, -1) for batch in kept.split(batch_size)]
    laid_out = torch.cat([part[r] for r in range(world_size) for part in parts])
    loader = dgl.dataloading.DataLoader(graph, laid_out, dgl.dataloading.NeighborSampler(fanouts),
                                        batch_size=batch_size // world_size, shuffle=False, drop_last=False,
                                        use_ddp=True, device=graph.device)
    return _iterate(loader)


def _iterate(loader: dgl.dataloading.DataLoader):
    """The batches of ``loader``, each sampled on one OpenMP thread, without DGL's advice (on every
    CPU epoch) to pin sampler worker threads to cores (the zoo samples in the main process).

    DGL's neighbour sampling draws from per-thread random streams, so with several OpenMP threads
    the same seed gave different neighbourhoods from run to run; on one thread it is reproducible
    (and a resumed run draws the same batches). The thread count is restored for the training step.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Dataloader CPU affinity opt is not enabled")
        batches = iter(loader)
    while True:
        threads = dgl.utils.get_num_threads()
        dgl.utils.set_num_threads(1)
        try:
            batch = next(batches)
        except StopIteration:
            return
        finally:
            dgl.utils.set_num_threads(threads)
        yield batch


def sampled_forward(model: nn.Module, graph, blocks: list, features: torch.Tensor) -> torch.Tensor:
    """The model on a mini-batch: logits of the last block's destination nodes.

    ``graph`` is the full graph the blocks were sampled from (GCN's degrees); ``features`` are
    those of ``blocks[0].srcdata[dgl.NID]``. The model must have one graph layer per block;
    ``model`` may be wrapped in ``DistributedDataParallel`` (the wrapper runs the forward).

    (Example: the module's.)
    """
    inner = model.module if isinstance(model, nn.parallel.DistributedDataParallel) else model
    layers = graph_layers(inner)
    if not layers:
        raise ValueError(f"{type(inner).__name__} has no graph layers (submodules whose forward takes the graph "
                         "first), so it cannot run on sampled blocks: train it full batch (remove train.sampler)")
    if len(layers) != len(blocks):
        raise ValueError(f"{type(inner).__name__} has {len(layers)} graph layers but the sampler gives "
                         f"{len(blocks)} blocks: give one fanout per layer (train.sampler.fanouts)")
    with _on_blocks(graph, list(zip(layers, blocks)), type(inner).__name__):
        return model(blocks[0], features)


def layerwise_forward(model: nn.Module, graph, features: torch.Tensor, chunk_size: int,
                      shard: tuple[int, int] = (0, 1)) -> torch.Tensor:
    """The model's output for every node of ``graph``, one graph layer at a time over chunks of
    ``chunk_size`` destination nodes with their full in-neighbourhoods: the full-batch forward
    up to float rounding, in bounded memory. Run it under ``torch.no_grad()`` in eval mode.

    An LTGA layer's ``attention_override(graph, attention)`` (the counterfactual hook) sees the
    whole graph's ``[E, H]`` attention, as in a full-batch forward: that layer is run twice, once
    to collect its attention over all chunks, once with the hook's result.

    ``shard=(rank, world_size)`` (every rank of a torchrun group must call it): each rank computes
    each layer for its contiguous share of the nodes and the shares are gathered, so every rank
    ends with all outputs for a ``1 / world_size`` share of the work.

    (Example: the module's.)
    """
    layers = graph_layers(model)
    nodes = torch.arange(graph.num_nodes(), device=graph.device)
    chunks = lambda ids: dgl.dataloading.DataLoader(graph, ids, dgl.dataloading.MultiLayerFullNeighborSampler(1),
                                                    batch_size=chunk_size, shuffle=False, device=graph.device)
    rank, world_size = shard
    shares = nodes.tensor_split(world_size)
    loader, own = chunks(nodes), chunks(shares[rank])
    previous = None
    for index, layer in enumerate(layers):
        hook = layer.attention_override if isinstance(layer, LTGAConv) else None
        try:
            if hook is not None:
                attention = _collected_attention(model, layers, index, graph, loader, features, previous)
                attention = hook(graph, attention)
                layer.attention_override = lambda block, _, full=attention: full[block.edata[dgl.EID]]
            if world_size == 1:
                previous = _layer_output(model, layers, index, graph, own, features, previous)
            else:  # an overflow on one rank stops them all, before the gather would wait for it
                output = stop_together(lambda: _layer_output(model, layers, index, graph, own, features, previous))
                previous = gather_rows(output[shares[rank]], [len(s) for s in shares])
        finally:
            if hook is not None:
                layer.attention_override = hook
    return previous


class LayerwiseInference(HasLTGALayers):
    """A trained model seen through :func:`layerwise_forward`: ``view(graph, features)`` gives all
    logits in chunks of ``chunk_size`` nodes, so :func:`zoo.analysis.counterfactuals.ltga_diagnostics`
    (attention statistics and counterfactuals) runs on graphs too large for a full-batch forward.

    >>> ltga_diagnostics(LayerwiseInference(model, 4096), data, score, seed)  # doctest: +SKIP
    """

    def __init__(self, model: nn.Module, chunk_size: int):
        self.model, self.chunk_size = model, chunk_size

    def eval(self) -> "LayerwiseInference":
        self.model.eval()
        return self

    def ltga_layers(self) -> list[LTGAConv]:
        return self.model.ltga_layers()

    def __call__(self, graph, features: torch.Tensor) -> torch.Tensor:
        return layerwise_forward(self.model, graph, features, self.chunk_size)


class _Stop(Exception):
    """Raised by a hook once the value a pass needs exists, to skip the rest of the model."""


def _layer_output(model, layers, index, graph, loader, features, previous) -> torch.Tensor:
    """``layers[index]``'s output for every node (the model's output for the last layer)."""
    output = None
    last = index == len(layers) - 1

    def stop(module, args, result):
        raise _Stop(result)

    for input_nodes, output_nodes, (block,) in _iterate(loader):
        handle = None if last else layers[index].register_forward_hook(stop)
        try:
            with _replaying(layers[:index], previous, input_nodes), \
                    _on_blocks(graph, [(layers[index], block)], type(model).__name__):
                result = model(block, features[input_nodes])
        except _Stop as done:
            result = done.args[0]
        finally:
            if handle is not None:
                handle.remove()
        if output is None:
            output = result.new_empty((graph.num_nodes(), *result.shape[1:]))
        output[output_nodes] = result
    return output


def _collected_attention(model, layers, index, graph, loader, features, previous) -> torch.Tensor:
    """The LTGA layer ``layers[index]``'s attention ``[E, H]`` on every edge of ``graph``."""
    layer, collected = layers[index], {}

    def collect(block, attention):
        if "all" not in collected:
            collected["all"] = attention.new_empty((graph.num_edges(), *attention.shape[1:]))
        collected["all"][block.edata[dgl.EID]] = attention
        raise _Stop

    layer.attention_override = collect
    for input_nodes, _, (block,) in _iterate(loader):
        try:
            with _replaying(layers[:index], previous, input_nodes), \
                    _on_blocks(graph, [(layer, block)], type(model).__name__):
                model(block, features[input_nodes])
        except _Stop:
            pass
    return collected["all"]


@contextmanager
def _replaying(layers, previous, input_nodes):
    """The ``layers`` return ``previous[input_nodes]`` (the stored output of the last of them)
    instead of computing; the model's code after each still runs (hidden layers only, so it is
    the same row-wise code for each)."""
    replay = lambda *args, **kwargs: previous[input_nodes]
    for layer in layers:
        layer.forward = replay
    try:
        yield
    finally:
        for layer in layers:
            del layer.forward


@contextmanager
def _on_blocks(graph, pairs: list, model_name: str):
    """Each ``(layer, block)``: the layer runs on its block, the layers called in the given order."""
    calls = []

    def substitute(position, block):
        def hook(module, args, kwargs):
            if len(calls) != position:
                raise RuntimeError(f"{model_name} calls a graph layer twice or its graph layers out of registration "
                                   "order; mini-batches give layer i block i, so each layer must run once, in order: "
                                   "train this model full batch (remove train.sampler)")
            calls.append(position)
            if isinstance(module, GraphConv):
                kwargs = {**kwargs, "edge_weight": _full_graph_gcn_weights(module, graph, block).to(args[1].dtype)}
            return (block, *args[1:]), kwargs
        return hook

    handles = [layer.register_forward_pre_hook(substitute(i, block), with_kwargs=True)
               for i, (layer, block) in enumerate(pairs)]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def _full_graph_gcn_weights(conv: GraphConv, graph, block) -> torch.Tensor:
    """Edge weights that make ``GraphConv(norm="both")`` on ``block`` use ``graph``'s degrees.

    GraphConv weighs edge ``u -> v`` by ``(d_out(u) d_in(v))^-1/2`` with the block's degrees; the
    weight ``sqrt(d_out(u) / D_out(u)) * sqrt(D_in(v) / d_in(v))`` (capitals: full graph) turns that
    into ``(D_out(u) D_in(v))^-1/2 * D_in(v) / d_in(v)``: GCN's normalisation, with the sum over a
    sampled neighbourhood scaled up by the share it leaves out (1 with full neighbourhoods).
    """
    if conv._norm != "both":
        raise ValueError(f"GraphConv(norm={conv._norm!r}) on blocks is not supported; the zoo's GCN uses "
                         "norm='both'")
    src, dst = block.edges()
    out_block, in_block = block.out_degrees().double(), block.in_degrees().double()
    out_full = graph.out_degrees(block.srcdata[dgl.NID]).double()
    in_full = graph.in_degrees(block.dstdata[dgl.NID]).double()
    return (out_block / out_full).sqrt()[src] * (in_full / in_block).sqrt()[dst]
