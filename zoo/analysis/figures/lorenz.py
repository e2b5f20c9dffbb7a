"""Lorenz curves of attention (the LTGA paper's Figure 4), in two readings:

* :func:`pooled_lorenz`, the paper's: one curve over every attention weight alpha_ij of a layer
  (all edges and heads pooled), with its Gini coefficient. On a graph of uneven degrees even
  uniform attention is unequal here (a node with n neighbours gives each 1 / n), which is why the
  paper's GAT and GATv2 curves "stay similarly bowed across graphs";
* :func:`attention_lorenz`, per neighbourhood: each (destination node, head) neighbourhood has the
  Lorenz curve of its sorted weights, piecewise linear through ``(k / n, share of the k smallest
  weights)``, averaged over neighbourhoods and heads on a grid. The Gini coefficient is linear in
  the curve (``G = 1 - 2 * area``), so the averaged curve's Gini is the mean per-neighbourhood Gini
  that :func:`zoo.analysis.attention.attention_statistics` reports (exactly when the grid holds
  every breakpoint ``k / n``): uniform attention gives the diagonal (G = 0) on any graph.
"""
from __future__ import annotations

import numpy as np
import torch

from zoo.analysis.attention import attention_statistics, segment_rank


def attention_lorenz(graph, attention: torch.Tensor, points: int = 101) -> tuple[torch.Tensor, torch.Tensor]:
    """``(p, L)``: the grid ``p`` of ``points`` population shares in [0, 1] and the mean over
    (destination node, head) neighbourhoods of their Lorenz curves at ``p`` (float64).

    ``attention`` is ``[E]`` or ``[E, H]``, normalised over each node's incoming edges.

    >>> import dgl
    >>> g = dgl.graph(([0, 1], [1, 1]))
    >>> attention_lorenz(g, torch.tensor([0.25, 0.75]), points=3)[1].tolist()  # node 0 has no in-edge
    [0.0, 0.25, 1.0]
    """
    a = attention.detach().double().reshape(graph.num_edges(), -1)
    _, dst = graph.edges()
    n = graph.in_degrees().double()[dst][:, None]
    # the j-th smallest weight (j from 1) adds its share a / total over p * n in [j - 1, j]
    before = torch.stack([segment_rank(dst, a[:, h]) for h in range(a.shape[1])], 1).double()
    total = torch.zeros(graph.num_nodes(), a.shape[1], dtype=a.dtype).index_add_(0, dst, a)
    share = a / total[dst].clamp_min(1e-300)
    has_in = graph.in_degrees() > 0
    grid = torch.linspace(0.0, 1.0, points, dtype=torch.float64)
    curve = []
    for p in grid:
        part = share * (p * n - before).clamp(0.0, 1.0)
        per_node = torch.zeros_like(total).index_add_(0, dst, part)
        curve.append(per_node[has_in].mean())
    return grid, torch.stack(curve)


def lorenz_gini(graph, attention: torch.Tensor) -> float:
    """The mean per-neighbourhood Gini of ``attention`` (:mod:`zoo.analysis.attention`'s ``gini``)."""
    return attention_statistics(graph, attention)["gini"]


def pooled_lorenz(attention: torch.Tensor, points: int = 101) -> tuple[np.ndarray, np.ndarray, float]:
    """``(p, L, gini)``: the Lorenz curve of all weights of ``attention`` ``[E]`` or ``[E, H]``
    pooled, at ``points`` population shares ``p``, and the Gini coefficient of all of them
    (``2 sum_i i x_(i) / (n sum x) - (n + 1) / n`` over the sorted weights; 0 = all equal).

    >>> p, curve, gini = pooled_lorenz(torch.tensor([4.0, 1.0, 2.0, 1.0]), points=5)
    >>> curve.tolist(), gini
    ([0.0, 0.125, 0.25, 0.5, 1.0], 0.3125)
    """
    x = np.sort(attention.detach().double().flatten().numpy())
    n, total = len(x), x.sum()
    if n == 0 or total <= 0:
        raise ValueError(f"a Lorenz curve needs weights with a positive sum; got {n} weights summing to {total}")
    steps = np.concatenate([[0.0], np.cumsum(x) / total])
    grid = np.linspace(0.0, 1.0, points)
    curve = np.interp(grid, np.arange(n + 1) / n, steps)
    gini = 2 * np.sum(np.arange(1, n + 1) * x) / (n * total) - (n + 1) / n
    return grid, curve, float(gini)
