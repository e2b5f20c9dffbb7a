"""LINKX (Lim et al., "Large Scale Learning on Non-Homophilous Graphs: New Benchmarks and Strong
Simple Methods", NeurIPS 2021).

Adjacency and features are embedded separately, then mixed by an MLP:

    h_A = MLP_A(A),   h_X = MLP_X(X),   Y = MLP_f(ReLU(W [h_A || h_X] + h_A + h_X)).

``MLP_A`` and ``MLP_X`` are single linear layers (the authors' default, ``init_layers_A = 1``):
``h_A = A W_A + b_A`` reads each node's row of the adjacency, so ``W_A`` has one row per node of
the graph, a transductive model. Its size is taken from the first graph the model sees (a lazy
parameter, materialised before the optimiser's first step or by a checkpoint load); ``A`` has no
self-loops, and a row ``i`` sums ``W_A[j]`` over the in-edges ``j -> i`` (``dgl.ops.copy_u_sum``).
``MLP_f`` is ``layers`` linear layers with ReLU, BatchNorm and dropout between them.

Defaults are the authors' (CUAI/Non-Homophily-Large-Scale, ``parse.py``): 32 hidden units, a
2-layer ``MLP_f``, dropout 0.5, no inner dropout or activation. Their ``main.py`` symmetrises the
graph and trains with AdamW (weight decay 1e-3); the zoo keeps DGL's edges and its node trainer.
"""
from __future__ import annotations

import math
import warnings

import dgl
import torch
from torch import nn
from torch.nn.modules.lazy import LazyModuleMixin

from zoo.models.constraints import Count, DropoutRate
from zoo.models.registry import register_model


class AdjacencyEmbedding(LazyModuleMixin, nn.Module):
    """``A W + b``: a linear layer on the rows of the adjacency without self-loops, ``W`` with one
    row per node, sized and initialised (``nn.Linear``'s uniform bound ``1/sqrt(num_nodes)``) at
    the first forward.

    >>> embed = AdjacencyEmbedding(2)
    >>> out = embed(dgl.graph(([0, 0, 1], [1, 2, 2])))
    >>> torch.allclose(out[2], embed.weight[0] + embed.weight[1] + embed.bias), embed.weight.shape
    (True, torch.Size([3, 2]))
    """

    def __init__(self, dim: int):
        with warnings.catch_warnings():  # torch's notice that lazy modules are a new feature
            warnings.simplefilter("ignore", UserWarning)
            super().__init__()
        self.dim = dim
        self.weight = nn.UninitializedParameter()
        self.bias = nn.UninitializedParameter()

    def initialize_parameters(self, graph: dgl.DGLGraph) -> None:
        if self.has_uninitialized_params():
            bound = 1 / math.sqrt(graph.num_nodes())
            with torch.no_grad():
                self.weight.materialize((graph.num_nodes(), self.dim))
                self.bias.materialize((self.dim,))
                nn.init.uniform_(self.weight, -bound, bound)
                nn.init.uniform_(self.bias, -bound, bound)

    def forward(self, graph: dgl.DGLGraph) -> torch.Tensor:
        if graph.num_nodes() != len(self.weight):
            raise ValueError(f"LINKX's adjacency embedding has one row per node of the graph it was built for "
                             f"({len(self.weight)} nodes); this graph has {graph.num_nodes()}. LINKX is "
                             "transductive: train a new model for this graph")
        return dgl.ops.copy_u_sum(dgl.remove_self_loop(graph), self.weight) + self.bias


@register_model("linkx")
class LINKX(nn.Module):
    """LINKX with ``hidden`` units and a ``layers``-layer final MLP.

    >>> model = LINKX(in_feats=4, num_classes=3, hidden=8).eval()
    >>> graph = dgl.add_self_loop(dgl.graph(([0, 1, 2], [1, 2, 3])))
    >>> model(graph, torch.randn(4, 4)).shape
    torch.Size([4, 3])
    """

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 32, layers: Count = 2,
                 dropout: DropoutRate = 0.5):
        super().__init__()
        self.adjacency = AdjacencyEmbedding(hidden)
        self.features = nn.Linear(in_feats, hidden)
        self.mix = nn.Linear(2 * hidden, hidden)
        blocks = [nn.Sequential(nn.Linear(hidden, hidden), nn.ReLU(), nn.BatchNorm1d(hidden), nn.Dropout(dropout))
                  for _ in range(layers - 1)]
        self.final = nn.Sequential(*blocks, nn.Linear(hidden, num_classes))

    def forward(self, graph: dgl.DGLGraph, features: torch.Tensor) -> torch.Tensor:
        if graph.is_block:
            raise ValueError("LINKX trains full-batch only (one adjacency weight row per node of the whole "
                             "graph); remove train.sampler from the recipe")
        h_a, h_x = self.adjacency(graph), self.features(features)
        return self.final(torch.relu(self.mix(torch.cat([h_a, h_x], 1)) + h_a + h_x))
