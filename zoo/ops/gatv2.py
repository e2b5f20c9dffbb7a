"""``edge_gatv2_logits``: GATv2's attention logits ``e_ij = a . LeakyReLU(W_l h_i + W_r h_j)``.

The plain computation (DGL's ``GATv2Conv``, ``apply_edges(u_add_v)`` then LeakyReLU, product and
sum) builds several ``[E, H, F]`` tensors and keeps two of them for the backward pass. On Tolokers
with the LTGA backbone (1.05M edges x 8 heads x 64 features) each is 2.1 GB, and the products over
them, bound by memory bandwidth, were most of an LTGA training step. Here the
edges are taken in chunks small enough to stay in the CPU caches: the forward keeps only the
``[E, H]`` logits and the backward recomputes each chunk's sums. The values are the plain
computation's up to float rounding (each logit is the same sum over ``F``; the gradients of
``feat_src``, ``feat_dst`` and ``attn`` add the edges' terms in a different order).

On CPU, in float32 and float64, the fused kernel of :mod:`zoo.ops._fused` does the same in one
pass over the destinations' in-edges (``csrc/edge_ops.cpp``): no ``[edges, H, F]`` chunk is
written to memory, and the backward recomputes each edge's sums twice, once per destination (the
gradients of ``feat_dst``, ``attn`` and ``edge_term``) and once per source (``feat_src``), so that
each node's gradient is a sum in the graph's edge order whatever the thread count. Elsewhere, or
with the kernels disabled, the chunks above run in torch.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from . import _fused
from ._common import ZooOpError

CHUNK_ELEMENTS = 1 << 18
"""Elements of one chunk's ``[edges, H, F]`` sums: 1 MiB of float32, 512 edges at 8 heads x 64
features. ``python tools/benchmark.py logits --chunk-powers 14 16 18 20 24`` (Tolokers-sized, 1
thread, beside three training jobs) found 2**18 fastest at 8 heads x 64 (2.90 s; 2**20 3.56 s,
2**16 4.38 s, 2**14 9.57 s, 2**24 11.44 s) and at 8 x 8 (``--features 8``: 0.46 s; 2**14 and 2**24
took 2.8 and 3.4 times as long)."""


def _chunks(num_edges: int, heads: int, feats: int, chunk_edges: int | None):
    step = chunk_edges or max(1, CHUNK_ELEMENTS // (heads * feats))
    return [(start, min(start + step, num_edges)) for start in range(0, num_edges, step)]


def _sums(feat_src, feat_dst, edge_term, src, dst, start, end):
    """The chunk's ``[edges, H * F]`` sums (2-D rows: ``index_select`` is fastest on them)."""
    z = feat_src.index_select(0, src[start:end]).add_(feat_dst.index_select(0, dst[start:end]))
    return z if edge_term is None else z.add_(edge_term[start:end])


class _GATv2Logits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feat_src, feat_dst, attn, edge_term, src, dst, negative_slope, chunk_edges):
        heads, feats = attn.shape
        rows = [t.reshape(t.shape[0], heads * feats) for t in (feat_src, feat_dst)]
        flat_edge = None if edge_term is None else edge_term.reshape(-1, heads * feats)
        logits = feat_src.new_empty(src.shape[0], heads)
        for start, end in _chunks(src.shape[0], heads, feats, chunk_edges):
            z = F.leaky_relu_(_sums(*rows, flat_edge, src, dst, start, end), negative_slope)
            torch.sum(z.view(-1, heads, feats).mul_(attn), -1, out=logits[start:end])
        ctx.save_for_backward(feat_src, feat_dst, attn, edge_term, src, dst)
        ctx.negative_slope, ctx.chunk_edges = negative_slope, chunk_edges
        return logits

    @staticmethod
    def backward(ctx, grad):
        feat_src, feat_dst, attn, edge_term, src, dst = ctx.saved_tensors
        need_src, need_dst, need_attn, need_edge = ctx.needs_input_grad[:4]
        heads, feats = attn.shape
        rows = [t.reshape(t.shape[0], heads * feats) for t in (feat_src, feat_dst)]
        flat_edge = None if edge_term is None else edge_term.reshape(-1, heads * feats)
        grad = grad.contiguous()
        grad_src = feat_src.new_zeros(rows[0].shape) if need_src else None
        grad_dst = feat_dst.new_zeros(rows[1].shape) if need_dst else None
        grad_attn = torch.zeros_like(attn) if need_attn else None
        grad_edge = flat_edge.new_empty(flat_edge.shape) if need_edge else None
        for start, end in _chunks(src.shape[0], heads, feats, ctx.chunk_edges):
            z = _sums(*rows, flat_edge, src, dst, start, end).view(-1, heads, feats)
            g = grad[start:end]
            grad_z = torch.ops.aten.leaky_relu_backward(g.unsqueeze(-1) * attn, z, ctx.negative_slope, False)
            if need_attn:
                grad_attn += torch.einsum("eh,ehf->hf", g, F.leaky_relu_(z, ctx.negative_slope))
            grad_z = grad_z.view(-1, heads * feats)
            if need_src:
                grad_src.index_add_(0, src[start:end], grad_z)
            if need_dst:
                grad_dst.index_add_(0, dst[start:end], grad_z)
            if need_edge:
                grad_edge[start:end] = grad_z
        return (None if grad_src is None else grad_src.view(feat_src.shape),
                None if grad_dst is None else grad_dst.view(feat_dst.shape), grad_attn,
                None if grad_edge is None else grad_edge.view(edge_term.shape), None, None, None, None)


class _FusedGATv2Logits(torch.autograd.Function):
    @staticmethod
    def forward(ctx, feat_src, feat_dst, attn, edge_term, graph, negative_slope):
        rows = [t.reshape(t.shape[0], -1).contiguous() for t in (feat_src, feat_dst)]
        flat_edge = None if edge_term is None else edge_term.reshape(graph.num_edges(), -1).contiguous()
        attn = attn.contiguous()
        ctx.save_for_backward(*rows, attn, flat_edge)
        ctx.graph, ctx.negative_slope, ctx.shapes = graph, negative_slope, (feat_src.shape, feat_dst.shape)
        return _fused.kernels().gatv2_logits_forward(*rows, attn, flat_edge, negative_slope,
                                                     *_fused.adjacency(graph, "in"))

    @staticmethod
    def backward(ctx, grad):
        src_rows, dst_rows, attn, flat_edge = ctx.saved_tensors
        needs = ctx.needs_input_grad[:4]
        grads = _fused.kernels().gatv2_logits_backward(
            grad.contiguous(), src_rows, dst_rows, attn, flat_edge, ctx.negative_slope,
            *_fused.adjacency(ctx.graph, "in"), *_fused.adjacency(ctx.graph, "out"), *needs)
        grad_src, grad_dst, grad_attn, grad_edge = (g if need else None for g, need in zip(grads, needs))
        return (None if grad_src is None else grad_src.view(ctx.shapes[0]),
                None if grad_dst is None else grad_dst.view(ctx.shapes[1]), grad_attn,
                None if grad_edge is None else grad_edge.view(-1, *attn.shape), None, None)


def edge_gatv2_logits(graph, feat_src: torch.Tensor, feat_dst: torch.Tensor, attn: torch.Tensor,
                      negative_slope: float = 0.2, edge_term: torch.Tensor | None = None,
                      chunk_edges: int | None = None) -> torch.Tensor:
    """``logits[e, h] = sum_f attn[h, f] * LeakyReLU(feat_src[i, h, f] + feat_dst[j, h, f] (+ edge_term[e, h, f]))``
    for every edge ``e = i -> j`` of ``graph`` (in edge-ID order; a DGL block works too).

    ``feat_src`` ``[N_src, H, F]``, ``feat_dst`` ``[N_dst, H, F]``, ``attn`` ``[H, F]`` (or
    ``[1, H, F]``), optional ``edge_term`` ``[E, H, F]`` (e.g. projected edge features). Returns
    ``[E, H]``, differentiable in all four. ``chunk_edges`` overrides the chunk size of the
    pure-torch path (module docstring), e.g. to test several chunks on a small graph.

    >>> import dgl
    >>> x = torch.tensor([[[1.0, -2.0]], [[0.5, 0.5]]])  # 2 nodes, 1 head, 2 features
    >>> edge_gatv2_logits(dgl.graph(([0, 1], [1, 1])), x, x, torch.tensor([[1.0, 1.0]]))
    tensor([[1.2000],
            [2.0000]])
    """
    if feat_src.dim() != 3 or feat_src.shape[0] != graph.num_src_nodes():
        raise ZooOpError(f"feat_src has shape {list(feat_src.shape)}; expected [{graph.num_src_nodes()}, H, F] "
                         "(source nodes, heads, features)")
    if feat_dst.shape != (graph.num_dst_nodes(), *feat_src.shape[1:]):
        raise ZooOpError(f"feat_dst has shape {list(feat_dst.shape)}; expected [{graph.num_dst_nodes()}, "
                         f"{feat_src.shape[1]}, {feat_src.shape[2]}] (destination nodes, heads, features)")
    attn = attn.reshape(attn.shape[-2:]) if attn.dim() == 3 and attn.shape[0] == 1 else attn
    if attn.shape != feat_src.shape[1:]:
        raise ZooOpError(f"attn has shape {list(attn.shape)}; expected [{feat_src.shape[1]}, {feat_src.shape[2]}] "
                         "(heads, features) or [1, heads, features]")
    if edge_term is not None and edge_term.shape != (graph.num_edges(), *feat_src.shape[1:]):
        raise ZooOpError(f"edge_term has shape {list(edge_term.shape)}; expected [{graph.num_edges()}, "
                         f"{feat_src.shape[1]}, {feat_src.shape[2]}] (edges, heads, features)")
    tensors = (feat_src, feat_dst, attn) + (() if edge_term is None else (edge_term,))
    if len({t.dtype for t in tensors}) > 1:
        raise ZooOpError(f"feat_src, feat_dst, attn (and edge_term) must share a dtype, got "
                         f"{', '.join(str(t.dtype) for t in tensors)}: cast them to one")
    if _fused.usable(feat_src):
        return _FusedGATv2Logits.apply(feat_src, feat_dst, attn, edge_term, graph, float(negative_slope))
    src, dst = graph.edges(order="eid")
    return _GATv2Logits.apply(feat_src, feat_dst, attn, edge_term, src, dst, float(negative_slope), chunk_edges)
