"""GPR-GNN (Chien et al., "Adaptive Universal Generalized PageRank Graph Neural Network", ICLR 2021).

An MLP predicts, then a learned polynomial of the normalised adjacency propagates:

    H^(0) = f_theta(X),   H^(k) = A_sym H^(k-1),   Z = sum_{k=0..K} gamma_k H^(k),

with ``A_sym = D~^{-1/2} (A + I) D~^{-1/2}`` (the loader's one self-loop per node is the ``+ I``;
DGL's :class:`~dgl.nn.GraphConv` without weights does the propagation). The generalized PageRank
weights ``gamma`` are learned, initialised as personalised PageRank (the paper's ``PPR`` init):
``gamma_k = alpha (1 - alpha)^k``, ``gamma_K = (1 - alpha)^K``, which is APPNP at initialisation.

Defaults are the authors' (jianhao2016/GPRGNN, ``train_model.py``): 64 hidden units, a 2-layer
MLP, dropout 0.5 in the MLP and 0.5 before the propagation (``dprate``), ``K = 10``, ``alpha =
0.1``. Their optimiser gives ``gamma`` no weight decay; the zoo's node trainer decays every weight.
"""
from __future__ import annotations

from typing import Annotated

import dgl
import torch
from dgl.nn import GraphConv
from torch import nn

from zoo.models.constraints import Count, DropoutRate, Interval
from zoo.models.registry import register_model


def ppr_coefficients(hops: int, alpha: float) -> torch.Tensor:
    """Personalised-PageRank weights ``alpha (1 - alpha)^k`` for ``k < hops`` and ``(1 - alpha)^hops``
    last, so that they sum to 1.

    >>> ppr_coefficients(2, 0.5)
    tensor([0.5000, 0.2500, 0.2500])
    """
    gamma = alpha * (1 - alpha) ** torch.arange(hops + 1, dtype=torch.float64)
    gamma[-1] = (1 - alpha) ** hops
    return gamma.float()


@register_model("gprgnn")
class GPRGNN(nn.Module):
    """GPR-GNN: a ``layers``-layer MLP of ``hidden`` units (ReLU, dropout before each layer), dropout
    ``prop_dropout``, then ``hops`` (``K``) propagation steps weighted by the learned ``gamma``.

    >>> model = GPRGNN(in_feats=4, num_classes=3, hidden=8, hops=3)
    >>> graph = dgl.add_self_loop(dgl.graph(([0, 1, 2], [1, 2, 3])))
    >>> model(graph, torch.randn(4, 4)).shape, model.gamma.shape
    (torch.Size([4, 3]), torch.Size([4]))
    """

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 64, layers: Count = 2,
                 dropout: DropoutRate = 0.5, prop_dropout: DropoutRate = 0.5, hops: Count = 10,
                 alpha: Annotated[float, Interval(0, 1)] = 0.1):
        super().__init__()
        sizes = [in_feats] + [hidden] * (layers - 1) + [num_classes]
        self.linears = nn.ModuleList(nn.Linear(a, b) for a, b in zip(sizes[:-1], sizes[1:]))
        self.dropout = nn.Dropout(dropout)
        self.prop_dropout = nn.Dropout(prop_dropout)
        self.propagate = GraphConv(num_classes, num_classes, weight=False, bias=False)
        self.gamma = nn.Parameter(ppr_coefficients(hops, alpha))

    def forward(self, graph: dgl.DGLGraph, features: torch.Tensor) -> torch.Tensor:
        if graph.is_block:
            raise ValueError("GPR-GNN trains full-batch only (its K propagation steps span the whole graph); "
                             "remove train.sampler from the recipe")
        h = features
        for i, linear in enumerate(self.linears):
            h = linear(self.dropout(h))
            if i < len(self.linears) - 1:
                h = torch.relu(h)
        h = self.prop_dropout(h)
        out = self.gamma[0] * h
        for gamma in self.gamma[1:]:
            h = self.propagate(graph, h)
            out = out + gamma * h
        return out
