"""Mean Average Distance (MAD) of node representations, Chen et al., "Measuring and Relieving the
Over-smoothing Problem for Graph Neural Networks from the Topological View", AAAI 2020, Eq. 2-4,
over a batch of graphs, as the SigGate-GT paper's Table 12 reports it (higher: more diverse).

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

import torch
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
