"""``gated_gcn_messages``: GatedGCN's message passing (Bresson and Laurent, 2017, as DGL's
``GatedGCNConv``), the edge step of a GraphGPS local branch.

On the four node projections ``proj = [A h | B h | D h | E h]`` (``[N, 4D]``, one matmul) and the
edge projection ``ce = C e`` (``[E, D]``), for every edge ``e = i -> j``::

    e'[e] = D h[i] + E h[j] + ce[e],   s = sigmoid(e')
    h'[j] = A h[j] + (sum_in s * B h[i]) / (sum_in s + 1e-6)

On CPU, in float32 and float64, the fused kernels of :mod:`zoo.ops._fused` compute it
(``csrc/edge_ops.cpp``): the forward in one pass per destination over its in-edges; the backward
in one pass per destination (the gradients of ``A h``, ``E h`` and each ``e'``) and one per source
(``B h`` and ``D h``), so that every sum has one order whatever the thread count, and no ``[E, D]``
gather, scatter or zero fill runs. Elsewhere, or with the kernels disabled, the pure-torch path
below runs (two ``index_select`` and one ``index_add_``; about twice as fast as DGL's graph frames
on molecule batches). The two agree to float summation order.
"""
from __future__ import annotations

import torch

from . import _fused
from ._common import ZooOpError

EPS = 1e-6  # DGL's GatedGCNConv: the denominator's shift


def _pure_torch(graph, proj, ce):
    dim = ce.shape[1]
    ah, bh, dh, eh = proj.split(dim, -1)
    src, dst = graph.edges()
    e_new = dh.index_select(0, src) + eh.index_select(0, dst) + ce
    sigma = torch.sigmoid(e_new)
    summed = proj.new_zeros(proj.shape[0], 2 * dim).index_add_(0, dst, torch.cat([bh.index_select(0, src) * sigma,
                                                                                  sigma], 1))
    # split, not two slices: its backward is one cat, where each slice's zero-fills the whole block
    numerator, denominator = summed.split(dim, 1)
    return ah + numerator / (denominator + EPS), e_new


class _FusedGatedGcn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, graph, proj, ce):
        proj, ce = proj.contiguous(), ce.contiguous()
        h_new, e_new = _fused.kernels().gated_gcn_forward(proj, ce, *_fused.adjacency(graph, "in"))
        ctx.graph = graph
        ctx.save_for_backward(proj, e_new)
        return h_new, e_new

    @staticmethod
    def backward(ctx, grad_h, grad_e):
        proj, e_new = ctx.saved_tensors
        grad_proj, grad_ce = _fused.kernels().gated_gcn_backward(
            grad_h.contiguous(), grad_e.contiguous(), proj, e_new, *_fused.adjacency(ctx.graph, "in"),
            *_fused.adjacency(ctx.graph, "out"))
        return None, grad_proj, grad_ce


def gated_gcn_messages(graph, proj: torch.Tensor, ce: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """``(h', e')`` of the module notes for ``proj`` ``[N, 4D]`` (``[A h | B h | D h | E h]``) and
    ``ce`` ``[E, D]`` on a graph whose sources and destinations are the same N nodes. Differentiable
    in both.

    >>> import dgl
    >>> graph = dgl.graph(([0, 1], [1, 1]))                # edges 0->1 and 1->1
    >>> proj = torch.tensor([[1.0, 2.0, 0.0, 0.0],         # node 0: A h, B h, D h, E h (D = 1)
    ...                      [3.0, 4.0, 0.0, 0.0]])
    >>> h_new, e_new = gated_gcn_messages(graph, proj, torch.zeros(2, 1))
    >>> e_new.squeeze(1).tolist(), round(float(h_new[1]), 4)  # s = 1/2 on both edges: 3 + (1 + 2) / 1
    ([0.0, 0.0], 6.0)
    """
    if graph.num_src_nodes() != graph.num_dst_nodes() or proj.dim() != 2 or proj.shape[0] != graph.num_nodes():
        raise ZooOpError(f"proj has shape {list(proj.shape)} on a graph of {graph.num_src_nodes()} source and "
                         f"{graph.num_dst_nodes()} destination nodes; expected one graph's [N, 4D] node rows")
    if ce.dim() != 2 or proj.shape[1] != 4 * ce.shape[1] or ce.shape[0] != graph.num_edges():
        raise ZooOpError(f"ce has shape {list(ce.shape)} beside proj {list(proj.shape)}; expected "
                         f"[{graph.num_edges()}, {proj.shape[1] // 4}] (one row of C e per edge, proj's D = 4D / 4)")
    if proj.dtype != ce.dtype:
        raise ZooOpError(f"proj is {proj.dtype} but ce is {ce.dtype}: cast one of them")
    if _fused.usable(proj):
        return _FusedGatedGcn.apply(graph, proj, ce)
    return _pure_torch(graph, proj, ce)
