"""H2GCN (Zhu et al., "Beyond Homophily in Graph Neural Networks", NeurIPS 2020), on DGL's GraphConv.

The paper's three designs: ego and neighbour embeddings kept apart (no self-loops), higher-order
neighbourhoods (1-hop and exactly-2-hop), and a combination of every round's representation:

* embedding (S1): ``r0 = ReLU(X W_e)``;
* ``K = layers`` aggregation rounds (S2): ``r_k = [P_1 r_{k-1} || P_2 r_{k-1}]``, with
  ``P_i = D_i^{-1/2} A_i D_i^{-1/2}``, ``A_1`` the neighbours without the node itself and ``A_2``
  the nodes at distance exactly 2; no nonlinearity between rounds;
* combination (S3): ``[r0 || r1 || ... || rK]``, dropout, then the classifier ``W_c``.

Defaults are H2GCN-2 as in the authors' code (GemsLab/H2GCN, ``M64-R-T1-G-V-T2-G-V-C1-C2-D0.5-MO``):
64 units, 2 rounds, dropout 0.5 before a bias-free classifier, a bias-free embedding. They
row-normalise the features; this model takes them as given, like every node model here.
Neighbourhoods follow the graph's edges (``A[dst, src]``), as in every node model here (DGL's
WebKB graphs are directed; on an undirected graph this is the paper's ``A``).
"""
from __future__ import annotations

import dgl
import dgl.sparse as dglsp
import torch
from dgl.nn import GraphConv
from torch import nn

from zoo.models.constraints import Count, DropoutRate
from zoo.models.registry import register_model


def hop_graphs(graph: dgl.DGLGraph) -> tuple[dgl.DGLGraph, dgl.DGLGraph]:
    """The 1-hop graph without self-loops or repeated edges, and the graph of nodes at distance
    exactly 2 (reached in two steps, neither the node itself nor a 1-hop neighbour).

    >>> path = dgl.graph(([0, 1, 2, 1, 2, 3], [1, 2, 3, 0, 1, 2]))
    >>> one, two = hop_graphs(dgl.add_self_loop(path))
    >>> sorted(zip(*(t.tolist() for t in two.edges())))
    [(0, 2), (1, 3), (2, 0), (3, 1)]
    """
    one = dgl.to_simple(dgl.remove_self_loop(graph), copy_ndata=False)
    n = one.num_nodes()
    src, dst = one.edges()
    adjacency = dglsp.spmatrix(torch.stack([dst, src]), shape=(n, n))
    row, col = (adjacency @ adjacency).indices()
    one_hop = dst * n + src
    keep = (row != col) & ~torch.isin(row * n + col, one_hop)
    return one, dgl.graph((col[keep], row[keep]), num_nodes=n)


@register_model("h2gcn")
class H2GCN(nn.Module):
    """H2GCN with ``layers`` aggregation rounds (``K``) of ``hidden`` embedding units; the output has
    ``hidden * (2^(K+1) - 1)`` combined features before the classifier. The hop graphs of the last
    graph seen are cached (the distance-2 graph of Tolokers has 46 million edges).

    >>> model = H2GCN(in_feats=4, num_classes=3, hidden=8)
    >>> graph = dgl.add_self_loop(dgl.graph(([0, 1, 2], [1, 2, 3])))
    >>> model(graph, torch.randn(4, 4)).shape
    torch.Size([4, 3])
    """

    def __init__(self, in_feats: Count, num_classes: Count, hidden: Count = 64, layers: Count = 2,
                 dropout: DropoutRate = 0.5):
        super().__init__()
        self.rounds = layers
        self.embed = nn.Linear(in_feats, hidden, bias=False)
        # parameter-free symmetric normalisation D^-1/2 A D^-1/2 (a node without neighbours gets 0)
        self.propagate = GraphConv(hidden, hidden, weight=False, bias=False, allow_zero_in_degree=True)
        self.dropout = nn.Dropout(dropout)
        self.classify = nn.Linear(hidden * (2 ** (layers + 1) - 1), num_classes, bias=False)
        self._cache: tuple[dgl.DGLGraph, tuple[dgl.DGLGraph, dgl.DGLGraph]] | None = None

    def hops(self, graph: dgl.DGLGraph) -> tuple[dgl.DGLGraph, dgl.DGLGraph]:
        """:func:`hop_graphs` of ``graph``, computed once per graph object."""
        if self._cache is None or self._cache[0] is not graph:
            self._cache = (graph, hop_graphs(graph))
        return self._cache[1]

    def forward(self, graph: dgl.DGLGraph, features: torch.Tensor) -> torch.Tensor:
        if graph.is_block:
            raise ValueError("H2GCN trains full-batch only (its distance-2 neighbourhoods span the whole graph); "
                             "remove train.sampler from the recipe")
        one, two = self.hops(graph)
        rounds = [torch.relu(self.embed(features))]
        for _ in range(self.rounds):
            previous = rounds[-1]
            rounds.append(torch.cat([self.propagate(one, previous), self.propagate(two, previous)], 1))
        return self.classify(self.dropout(torch.cat(rounds, 1)))
