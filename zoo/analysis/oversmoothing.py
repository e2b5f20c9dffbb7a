"""Over-smoothing diagnostics of node representations.

Graph batches: Mean Average Distance (MAD) of Chen et al., "Measuring and Relieving the
Over-smoothing Problem for Graph Neural Networks from the Topological View", AAAI 2020, Eq. 2-4,
over a batch of graphs, as the SigGate-GT paper's Table 12 reports it (higher: more diverse).

One node-classification graph, the LTGA paper's Table 19 (Appendix N) on the last hidden layer:
:func:`directional_dirichlet_energy` and :func:`mean_cosine_distance`, both from
:func:`oversmoothing_diagnostics` (higher: less collapse).

With cosine distance ``D_ij = 1 - cos(h_i, h_j)`` and the mask of node pairs ``i != j`` of the same
graph (the batch is one disconnected graph; molecules are never compared with each other):
``D_i = sum_j D_ij / #{j: D_ij > 0}`` (the mean of node i's non-zero distances) and
``MAD = sum_i D_i / #{i: D_i > 0}``. Distances at most :data:`ZERO_DISTANCE` count as zero (two equal
float32 rows give exactly 0 in float64 arithmetic; the tolerance only absorbs the last-bit rounding of
the normalisation). Chen et al.'s released code averages ``D_i`` over every node instead; the
difference is the nodes whose every distance is 0, which trained models hardly produce.
A zero row has cosine 0 to everything (distance 1), as ``sklearn.metrics.pairwise_distances``.
"""
from __future__ import annotations

import dgl
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.rnn import pad_sequence

ZERO_DISTANCE = 1e-12
"""Cosine distances up to this (float64) count as zero in MAD's non-zero counts."""


class MeanAverageDistance:
    """MAD accumulated batch by batch (one total over every node the batches hold).

    >>> mad = MeanAverageDistance()
    >>> mad.add(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]), torch.tensor([2, 1]))
    >>> mad.value()
    1.0
    """

    def __init__(self):
        self.total, self.nodes = 0.0, 0

    def add(self, h: torch.Tensor, sizes: torch.Tensor) -> None:
        """Add the nodes of a batch: ``h`` [N, D] graph by graph, ``sizes`` [B] nodes per graph."""
        if int(sizes.sum()) != h.shape[0]:
            raise ValueError(f"sizes sum to {int(sizes.sum())} but h has {h.shape[0]} rows")
        sizes = sizes.cpu()
        unit = torch.nn.functional.normalize(h.detach().double(), dim=1)
        dense = pad_sequence(list(torch.split(unit, sizes.tolist())), batch_first=True)  # [B, L, D]
        real = torch.arange(dense.shape[1])[None, :] < sizes[:, None]  # [B, L]
        pairs = real[:, :, None] & real[:, None, :] & ~torch.eye(dense.shape[1], dtype=torch.bool)
        distance = (1 - dense @ dense.transpose(1, 2)).clamp_min(0) * pairs
        nonzero = distance > ZERO_DISTANCE
        count = nonzero.sum(-1)
        per_node = torch.where(count > 0, (distance * nonzero).sum(-1) / count.clamp_min(1), torch.zeros(()))
        kept = per_node > 0
        self.total += float(per_node[kept].sum())
        self.nodes += int(kept.sum())

    def value(self) -> float:
        """MAD over the nodes added so far (0 when no node has a non-zero distance)."""
        return self.total / self.nodes if self.nodes else 0.0


def mean_average_distance(h: torch.Tensor, sizes: torch.Tensor) -> float:
    """MAD of node representations ``h`` [N, D] of a batch with ``sizes`` nodes per graph.

    >>> round(mean_average_distance(torch.tensor([[1.0, 0.0], [1.0, 1.0], [2.0, 2.0]]), torch.tensor([3])), 6)
    0.292893
    """
    mad = MeanAverageDistance()
    mad.add(h, sizes)
    return mad.value()


def mean_cosine_distance(h: torch.Tensor) -> float:
    """The LTGA paper's MAD (Table 19): ``1 - mean cos(h_i, h_j)`` over the ordered node pairs
    ``i != j`` of one graph, in float64 and in O(N D) (``sum_{i != j} cos = |sum_i u_i|^2 -
    sum_i |u_i|^2`` with ``u = h / |h|``), so a 20,000-node graph needs no N x N matrix.

    It is Chen et al.'s MAD (:func:`mean_average_distance` with one graph) whenever no two rows
    point the same way; Chen et al. leave zero distances out of their means, this plain mean keeps
    them. A zero row has cosine 0 to everything, as in :func:`mean_average_distance`.

    >>> mean_cosine_distance(torch.tensor([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))  # doctest: +ELLIPSIS
    0.5285...
    """
    n = h.shape[0]
    if n < 2:
        raise ValueError(f"mean_cosine_distance needs at least 2 nodes, got {n}")
    unit = F.normalize(h.detach().double(), dim=1)
    pairs = float(unit.sum(0).square().sum() - unit.square().sum())
    return 1.0 - pairs / (n * (n - 1))


def directional_dirichlet_energy(h: torch.Tensor, graph: dgl.DGLGraph) -> float:
    """The Dirichlet energy of the row-normalised representations, per edge: the mean over the
    graph's edges ``(i, j)``, self-loops left out, of ``|u_i - u_j|^2 / 2`` with ``u = h / |h|``
    (float64; a zero row stays zero).

    This is the normalisation of the LTGA paper's Table 19 ("normalised so it tracks directional
    rather than magnitude collapse", Appendix N): rescaling any node's row leaves it unchanged, it
    is 0 exactly when every edge joins rows of one direction, and for non-zero rows it equals the
    mean cosine distance ``1 - cos(h_i, h_j)`` over the edges (range [0, 2]). The plain energy
    ``sum |h_i - h_j|^2`` would also fall when the rows merely shrink. Each undirected edge stored
    both ways (as DGL stores Cora) counts twice, which leaves the mean unchanged.

    >>> g = dgl.graph(([0, 1], [1, 2]))
    >>> directional_dirichlet_energy(torch.tensor([[1.0, 0.0], [3.0, 0.0], [0.0, 2.0]]), g)
    0.5
    """
    src, dst = graph.edges()
    keep = src != dst
    if not bool(keep.any()):
        raise ValueError("directional_dirichlet_energy needs a graph with at least one edge that is not a self-loop")
    unit = F.normalize(h.detach().double(), dim=1)
    edges = dgl.graph((src[keep], dst[keep]), num_nodes=graph.num_nodes()).to(unit.device)
    # |u_i - u_j|^2 / 2 = (|u_i|^2 + |u_j|^2) / 2 - u_i . u_j, per edge without an [E, D] gather
    norms = unit.square().sum(1, keepdim=True)
    halves = dgl.ops.u_add_v(edges, norms, norms) / 2 - dgl.ops.u_dot_v(edges, unit, unit)
    return float(halves.mean())


def last_hidden_representation(model: nn.Module, graph: dgl.DGLGraph, features: torch.Tensor) -> torch.Tensor | None:
    """The node representation that enters the model's last layer, from one forward without
    gradients: forward pre-hooks on the model's top-level layers (its direct children, the
    entries of a ``ModuleList`` or ``Sequential`` included) record the first ``[N, D]`` tensor each
    call receives, and the last call's wins. For the zoo's GCN, GAT, GATv2 and LTGA this is the
    output of the last hidden layer (after its ELU, heads concatenated), the input of the output
    layer; for GPR-GNN it is the MLP's output before propagation. None when that input is the
    features themselves (a one-layer model has no hidden layer). Sparse inputs are passed over.
    The model's mode is left as it is (call ``model.eval()`` first: dropout would perturb it).

    >>> import dgl
    >>> from zoo.models import create_model
    >>> graph, x = dgl.add_self_loop(dgl.rand_graph(60, 200)), torch.randn(60, 8)
    >>> last_hidden_representation(create_model("gcn", in_feats=8, num_classes=3).eval(), graph, x).shape
    torch.Size([60, 64])
    """
    layers = [m for child in model.children()
              for m in (child if isinstance(child, (nn.ModuleList, nn.Sequential)) else [child])]
    seen: list[torch.Tensor] = []

    def record(module, args):
        rows = [a for a in args
                if torch.is_tensor(a) and not a.is_sparse and a.dim() == 2 and a.shape[0] == features.shape[0]]
        if rows:
            seen.append(rows[0])

    handles = [layer.register_forward_pre_hook(record) for layer in layers]
    try:
        with torch.no_grad():
            model(graph, features)
    finally:
        for handle in handles:
            handle.remove()
    if not seen or seen[-1] is features:
        return None
    return seen[-1].detach()


def oversmoothing_diagnostics(model: nn.Module, graph: dgl.DGLGraph, features: torch.Tensor) -> dict | None:
    """``{"dirichlet_energy": ..., "mad": ...}`` of the model's last hidden layer on ``graph``
    (:func:`directional_dirichlet_energy`, :func:`mean_cosine_distance`), as the LTGA paper's
    Table 19 reports them; None for a model without a hidden layer (see
    :func:`last_hidden_representation`).

    >>> from zoo.data import load_node_dataset
    >>> from zoo.models import create_model
    >>> data = load_node_dataset("texas", split=0)  # ZOO_DATA or a download
    >>> _ = torch.manual_seed(0)
    >>> model = create_model("gcn", in_feats=data.features.shape[1], num_classes=data.num_classes, layers=2)
    >>> diagnostics = oversmoothing_diagnostics(model.eval(), data.graph, data.features)  # untrained
    >>> {name: round(value, 3) for name, value in diagnostics.items()}
    {'dirichlet_energy': 0.284, 'mad': 0.532}
    """
    h = last_hidden_representation(model, graph, features)
    if h is None:
        return None
    return {"dirichlet_energy": directional_dirichlet_energy(h, graph), "mad": mean_cosine_distance(h)}
