"""``edge_weighted_sum``: the attention aggregation ``h'_j = sum_i a_ij h_i`` per head.

The same sums as DGL's ``update_all(u_mul_e, sum)`` with the weights broadcast over the feature
axis, computed as one CSR sparse-dense product per head. The two add in different orders, so they
agree to float32 summation error, not bit for bit (the last bits depend on the CPU's kernels). On the CPU
DGL's broadcasting kernel is a slow part of a GAT layer on large graphs; these products took
0.58x its forward+backward time on a Tolokers-sized graph (``python tools/benchmark.py aggregate``).

On CPU, in float32 and float64, the fused kernels of :mod:`zoo.ops._fused` compute the same sums
(``csrc/edge_ops.cpp``): per destination over its in-edges forward; in the backward, each edge's
weight gradient as one dot product per head, and each source's feature gradient over its
out-edges, so that every sum has one order whatever the thread count. Elsewhere, or with the
kernels disabled, the per-head products above run.
"""
from __future__ import annotations

import warnings

import dgl
import torch

from . import _fused
from ._common import ZooOpError, check_cpu_half


def _per_head_products(indptr, indices, values, feat, shape):
    """``out[:, h] = CSR(indptr, indices, values[:, h]) @ feat[:, h]`` for every head."""
    out = feat.new_empty(shape[0], *feat.shape[1:])
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta")
        for h in range(feat.shape[1]):
            matrix = torch.sparse_csr_tensor(indptr, indices, values[:, h], shape)
            out[:, h] = matrix @ feat[:, h]
    return out


class _EdgeWeightedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, weights, feat):
        indptr, src, eids = graph.adj_tensors("csc")
        ctx.graph = graph
        ctx.save_for_backward(weights, feat)
        return _per_head_products(indptr, src, weights[eids], feat,
                                  (graph.num_dst_nodes(), graph.num_src_nodes()))

    @staticmethod
    def backward(ctx, grad):
        weights, feat = ctx.saved_tensors
        graph = ctx.graph
        grad = grad.contiguous()
        grad_weights = grad_feat = None
        if ctx.needs_input_grad[1]:
            grad_weights = dgl.ops.u_dot_v(graph, feat, grad).squeeze(-1)
        if ctx.needs_input_grad[2]:
            indptr, dst, eids = graph.adj_tensors("csr")
            grad_feat = _per_head_products(indptr, dst, weights[eids], grad,
                                           (graph.num_src_nodes(), graph.num_dst_nodes()))
        return None, grad_weights, grad_feat


class _FusedEdgeWeightedSum(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, weights, feat):
        weights, rows = weights.contiguous(), feat.reshape(feat.shape[0], -1).contiguous()
        ctx.graph, ctx.feat_shape = graph, feat.shape
        ctx.save_for_backward(weights, rows)
        out = _fused.kernels().edge_weighted_rows(weights, rows, feat.shape[1], *_fused.adjacency(graph, "in"))
        return out.view(graph.num_dst_nodes(), *feat.shape[1:])

    @staticmethod
    def backward(ctx, grad):
        weights, rows = ctx.saved_tensors
        grad_rows, heads = grad.reshape(grad.shape[0], -1).contiguous(), weights.shape[1]
        grad_weights = grad_feat = None
        if ctx.needs_input_grad[1]:
            grad_weights = _fused.kernels().edge_head_dots(grad_rows, rows, heads, *_fused.adjacency(ctx.graph, "in"))
        if ctx.needs_input_grad[2]:
            grad_feat = _fused.kernels().edge_weighted_rows(weights, grad_rows, heads,
                                                            *_fused.adjacency(ctx.graph, "out")).view(ctx.feat_shape)
        return None, grad_weights, grad_feat


def edge_weighted_sum(graph, weights: torch.Tensor, feat: torch.Tensor) -> torch.Tensor:
    """``out[j, h] = sum over edges i->j of weights[e, h] * feat[i, h]``.

    ``weights`` ``[E, H]`` (e.g. attention), ``feat`` ``[N_src, H, F]``; returns ``[N_dst, H, F]``.
    Differentiable in both. Equals ``graph.update_all(fn.u_mul_e("h", "a", "m"), fn.sum("m", "h"))``
    with ``a = weights[..., None]``.

    >>> import dgl
    >>> graph = dgl.graph(([0, 1, 1], [1, 0, 1]))          # edges 0->1, 1->0, 1->1
    >>> attention = torch.tensor([[0.25], [1.0], [0.75]])  # [E, H], one head
    >>> projected = torch.tensor([[[4.0]], [[8.0]]])       # [N, H, F], one feature
    >>> edge_weighted_sum(graph, attention, projected).squeeze()  # node 0: 1.0*8; node 1: 0.25*4 + 0.75*8
    tensor([8., 7.])
    """
    if weights.dim() != 2 or weights.shape[0] != graph.num_edges():
        raise ZooOpError(f"weights has shape {list(weights.shape)}; expected [{graph.num_edges()}, H] "
                         "(one weight per edge and head)")
    if feat.dim() != 3 or feat.shape[:2] != (graph.num_src_nodes(), weights.shape[1]):
        raise ZooOpError(f"feat has shape {list(feat.shape)}; expected [{graph.num_src_nodes()}, "
                         f"{weights.shape[1]}, F] (source nodes, heads, features)")
    if weights.dtype != feat.dtype:
        raise ZooOpError(f"weights are {weights.dtype} but feat is {feat.dtype}: cast one of them")
    check_cpu_half(weights, "weights")
    if _fused.usable(feat):
        return _FusedEdgeWeightedSum.apply(graph, weights, feat)
    return _EdgeWeightedSum.apply(graph, weights, feat)
