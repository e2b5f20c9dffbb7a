"""Attention diagnostics per neighbourhood: sparsity, entropy, top-1 weight, effective size, Gini.

Every statistic is computed for each (destination node, head) from the weights on its incoming
edges and then averaged over nodes and heads; exact-zero sparsity is the share of edge weights
that are exactly 0.
"""
from __future__ import annotations

import dgl.ops
import torch


def segment_rank(dst: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    """Rank (0 = smallest) of each edge's value among the edges with the same destination.

    >>> segment_rank(torch.tensor([0, 0, 1, 0]), torch.tensor([0.5, 0.1, 0.3, 0.9])).tolist()
    [1, 0, 0, 2]
    """
    order = torch.argsort(values, stable=True)
    order = order[torch.argsort(dst[order], stable=True)]
    counts = torch.bincount(dst, minlength=int(dst.max()) + 1 if len(dst) else 0)
    starts = torch.cumsum(counts, 0) - counts
    rank = torch.empty_like(dst)
    rank[order] = torch.arange(len(dst), device=dst.device) - starts[dst[order]]
    return rank


def attention_statistics(graph, attention: torch.Tensor) -> dict[str, float]:
    """Sparsity and concentration of normalised attention ``[E]`` or ``[E, H]`` on ``graph``.

    Returns ``exact_zero`` (share of weights == 0), ``entropy`` (mean of -sum a log a, with
    0 log 0 = 0), ``top1`` (mean largest weight), ``effective_size`` (mean 1 / sum a^2) and
    ``gini`` (mean Gini coefficient of each neighbourhood's weights; 0 = uniform).
    """
    a = attention.detach().double().reshape(graph.num_edges(), -1)
    has_in = graph.in_degrees() > 0
    plogp = torch.where(a > 0, a * a.clamp_min(1e-300).log(), torch.zeros_like(a))
    entropy = -dgl.ops.copy_e_sum(graph, plogp)[has_in]
    top1 = dgl.ops.copy_e_max(graph, a)[has_in]
    effective = 1.0 / dgl.ops.copy_e_sum(graph, a * a)[has_in]
    return {
        "exact_zero": float((a == 0).double().mean()),
        "entropy": float(entropy.mean()),
        "top1": float(top1.mean()),
        "effective_size": float(effective.mean()),
        "gini": float(_gini(graph, a)[has_in].mean()),
    }


def _gini(graph, a: torch.Tensor) -> torch.Tensor:
    """Per (node, head) Gini ``2 sum_i i x_(i) / (n sum x) - (n + 1) / n`` over sorted weights."""
    _, dst = graph.edges()
    degree = graph.in_degrees().to(a.dtype).clamp_min(1)[:, None]
    ranks = torch.stack([segment_rank(dst, a[:, h]) for h in range(a.shape[1])], 1).to(a.dtype) + 1
    weighted = dgl.ops.copy_e_sum(graph, ranks * a)
    total = dgl.ops.copy_e_sum(graph, a).clamp_min(1e-300)
    return 2 * weighted / (degree * total) - (degree + 1) / degree
