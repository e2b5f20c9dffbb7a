"""FAGCN (Bo et al., "Beyond Low-frequency Information in Graph Convolutional Networks", AAAI 2021).

A self-gating layer mixes low- and high-frequency signals with signed edge coefficients, on DGL's
``dgl.ops`` edge kernels (DGL 2.1 ships no FAGCN layer):

    alpha_ij = tanh(g^T [h_i || h_j]),
    h_i' = eps * h_i^(0) + sum_{j in N(i)} alpha_ij / sqrt(d_i d_j) * h_j,

with ``N(i)`` the neighbours without ``i`` itself (``eps`` carries the node's own signal) and
``h^(0) = ReLU(W_1 x)`` the input of the first layer; the output is ``W_2 h^(L)``. A coefficient
near +1 is a low-pass (GCN-like) filter of that edge, near -1 a high-pass one.

Defaults are those of the authors' code (bdy9527/FAGCN, ``src/train.py``): 32 hidden units,
2 layers, dropout 0.5 (on the input, the hidden layer and the edge coefficients), ``eps = 0.3``,
Xavier-normal initialisation with gain 1.414. Degrees are in-degrees without self-loops, as theirs;
their loader makes every graph undirected (``dgl.to_bidirected``), the zoo's keeps DGL's edges.
"""
from __future__ import annotations

from typing import Annotated

import dgl
import torch
from torch import nn

from zoo.models.constraints import Count, DropoutRate, Interval
from zoo.models.registry import register_model


class FALayer(nn.Module):
    """One frequency-adaptive layer: signed tanh coefficients on the edges of a graph without
    self-loops, scaled by ``1 / sqrt(d_i d_j)``, then a sum over the in-edges (``dgl.ops``).

    >>> layer = FALayer(8, dropout=0.0)
    >>> layer(dgl.graph(([0, 1], [1, 0])), torch.randn(2, 8)).shape
    torch.Size([2, 8])
    """

    def __init__(self, dim: int, dropout: float):
        super().__init__()
        self.gate = nn.Linear(2 * dim, 1)  # g over [h_dst || h_src], with the bias of the authors' code
        nn.init.xavier_normal_(self.gate.weight, gain=1.414)
        self.dropout = nn.Dropout(dropout)

    def coefficients(self, graph: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        """``tanh(g^T [h_dst || h_src] + b)`` per edge, ``[E]``."""
        g_dst, g_src = self.gate.weight[0].chunk(2)
        score = dgl.ops.u_add_v(graph, (h @ g_src)[:, None], (h @ g_dst)[:, None])[:, 0]
        return torch.tanh(score + self.gate.bias)

    def forward(self, graph: dgl.DGLGraph, h: torch.Tensor) -> torch.Tensor:
        norm = graph.in_degrees().clamp(min=1).to(h).rsqrt()[:, None]
        scale = dgl.ops.u_mul_v(graph, norm, norm)[:, 0]
        weights = self.dropout(self.coefficients(graph, h) * scale)
        return dgl.ops.u_mul_e_sum(graph, h, weights[:, None])


@register_model("fagcn")
class FAGCN(nn.Module):
    """FAGCN: dropout, ``ReLU(W_1 x)``, dropout, ``layers`` :class:`FALayer` each followed by
    ``+ eps * h^(0)``, then ``W_2``. Self-loops in the input graph are ignored.

    >>> model = FAGCN(in_feats=4, num_classes=3, hidden=8)
    >>> graph = dgl.add_self_loop(dgl.graph(([0, 1, 2], [1, 2, 3])))
    >>> model(graph, torch.randn(4, 4)).shape
    torch.Size([4, 3])
    """

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 32, layers: Count = 2,
                 dropout: DropoutRate = 0.5, eps: Annotated[float, Interval(0, 1)] = 0.3):
        super().__init__()
        self.eps = eps
        self.dropout = nn.Dropout(dropout)
        self.input = nn.Linear(in_feats, hidden)
        self.layers = nn.ModuleList(FALayer(hidden, dropout) for _ in range(layers))
        self.output = nn.Linear(hidden, num_classes)
        for linear in (self.input, self.output):
            nn.init.xavier_normal_(linear.weight, gain=1.414)

    def forward(self, graph: dgl.DGLGraph, features: torch.Tensor) -> torch.Tensor:
        if graph.is_block:
            raise ValueError("FAGCN trains full-batch only (each layer adds eps times the first layer's input "
                             "of every node); remove train.sampler from the recipe")
        graph = dgl.remove_self_loop(graph)
        raw = h = self.dropout(torch.relu(self.input(self.dropout(features))))
        for layer in self.layers:
            h = layer(graph, h) + self.eps * raw
        return self.output(h)
