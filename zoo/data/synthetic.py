"""Seeded synthetic node-classification graphs with planted homophily: a degree-corrected
stochastic block model (DC-SBM) with Gaussian class features, the contextual SBM of Deshpande
et al. (NeurIPS 2018) with Karrer and Newman's degree correction (Phys. Rev. E 83, 016107, 2011).

Every node gets a class (balanced) and a degree propensity ``theta`` (Pareto with tail exponent
``degree_exponent``, normalised to sum 1 within each class). An undirected edge picks its first
end with probability ``theta / num_classes``, its second end's class (the same class for a share
``homophily`` of the edges, else one of the other classes uniformly) and then the node in that
class with probability ``theta``. The number of same-class edges is fixed, ``round(homophily *
pairs)``, not drawn (a microcanonical SBM), so the measured edge homophily equals ``homophily``
to within ``1 / (2 * pairs)``. Self-loops and repeated pairs are redrawn until the graph has
exactly ``num_edges`` edges. Everything is vectorised (NumPy), so 10M edges take seconds.
"""
from __future__ import annotations

import dgl
import numpy as np
import torch

MAX_ROUNDS = 64
"""Redraw rounds for self-loops and repeated pairs before the graph is declared too dense."""


def synthetic_sbm_graph(
    num_nodes: int,
    num_edges: int,
    *,
    num_classes: int = 5,
    homophily: float = 0.5,
    degree_exponent: float | None = 2.5,
    num_features: int = 32,
    feature_signal: float = 1.0,
    split: tuple[float, float, float] = (0.5, 0.25, 0.25),
    seed: int = 0,
) -> dgl.DGLGraph:
    """A DC-SBM graph with Gaussian class features, the ``ndata`` of the zoo's node datasets.

    ``num_edges`` counts directed edges: each of the ``num_edges / 2`` undirected pairs is stored
    in both directions, as DGL stores Cora, so it must be even; no self-loops (the node loader adds
    one per node). ``homophily``: the share of edges whose ends share a class (edge homophily).
    ``degree_exponent``: the tail exponent of the degree propensities (``P(theta > t) ~ t^-(gamma-1)``,
    must be > 2 for a finite mean), ``None`` for an ordinary SBM (equal propensities).
    Features: ``x_i = mu_{y_i} + N(0, I)``, with class means ``mu_c`` of norm ``feature_signal``
    in random directions (0: features carry no label information). ``split``: the shares of
    nodes in ``train_mask``, ``val_mask`` and ``test_mask`` (a random partition). The same
    arguments give the same graph, bit for bit.

    >>> g = synthetic_sbm_graph(1000, 10_000, homophily=0.8, seed=0)
    >>> g.num_nodes(), g.num_edges(), sorted(g.ndata)
    (1000, 10000, ['feat', 'label', 'test_mask', 'train_mask', 'val_mask'])
    >>> round(float(dgl.edge_homophily(g, g.ndata["label"])), 4)
    0.8
    """
    _check_arguments(num_nodes, num_edges, num_classes, homophily, degree_exponent, num_features, split)
    rng = np.random.default_rng(seed)
    labels = rng.permutation(np.arange(num_nodes) % num_classes)
    if degree_exponent is None:
        theta = np.ones(num_nodes)
    else:  # Pareto(gamma - 1) propensities by inverse transform, minimum 1
        theta = (1.0 - rng.random(num_nodes)) ** (-1.0 / (degree_exponent - 1.0))
    sampler = _ClassSampler(labels, theta, num_classes)
    pairs = num_edges // 2
    same = round(homophily * pairs)
    src_same, dst_same = _distinct_pairs(rng, sampler, same, same_class=True)
    src_cross, dst_cross = _distinct_pairs(rng, sampler, pairs - same, same_class=False)
    src = np.concatenate([src_same, src_cross])
    dst = np.concatenate([dst_same, dst_cross])
    graph = dgl.graph((torch.from_numpy(np.concatenate([src, dst])), torch.from_numpy(np.concatenate([dst, src]))),
                      num_nodes=num_nodes)
    means = rng.standard_normal((num_classes, num_features))
    means *= feature_signal / np.linalg.norm(means, axis=1, keepdims=True)
    features = means[labels] + rng.standard_normal((num_nodes, num_features))
    graph.ndata["feat"] = torch.from_numpy(features.astype(np.float32))
    graph.ndata["label"] = torch.from_numpy(labels)
    order = rng.permutation(num_nodes)
    bounds = np.round(np.cumsum(split[:2]) * num_nodes).astype(np.int64)
    for name, part in zip(("train_mask", "val_mask", "test_mask"), np.split(order, bounds)):
        mask = torch.zeros(num_nodes, dtype=torch.bool)
        mask[torch.from_numpy(part)] = True
        graph.ndata[name] = mask
    return graph


def contextual_sbm_card(homophily: float, mean_degree: float, snr: float, *, num_nodes: int = 1000,
                        num_classes: int = 5, num_features: int = 32, seed: int = 0) -> dict:
    """A dataset card (``datasets/README.md``) for one cell of a contextual-SBM sweep such as the LTGA
    paper's (Section 6: mean degree in {5, 20}, feature SNR in [0.1, 2], homophily 0.5): an ordinary
    SBM (no degree correction, as Deshpande et al.'s cSBM) with ``num_nodes * mean_degree`` directed
    edges (rounded to even), edge homophily ``homophily`` and Gaussian class features whose class
    means have norm ``snr`` against unit noise per feature (``feature_signal = snr``). Its name,
    ``csbm_h<homophily>_d<mean_degree>_snr<snr>``, is the file name to save it under in a
    ``$ZOO_CARDS`` folder.

    >>> card = contextual_sbm_card(0.5, 5, 0.1)
    >>> card["name"], card["source"]["parameters"]["num_edges"]
    ('csbm_h0.5_d5_snr0.1', 5000)
    """
    num_edges = 2 * round(num_nodes * mean_degree / 2)
    name = f"csbm_h{homophily:g}_d{mean_degree:g}_snr{snr:g}"
    parameters = dict(num_nodes=num_nodes, num_edges=num_edges, num_classes=num_classes, homophily=homophily,
                      degree_exponent=None, num_features=num_features, feature_signal=snr,
                      split=[0.5, 0.25, 0.25], seed=seed)
    _check_arguments(**{k: v for k, v in parameters.items() if k not in ("feature_signal", "seed")})
    return {
        "name": name,
        "title": f"Contextual SBM, {num_nodes} nodes, mean degree {mean_degree:g}, edge homophily {homophily:g}, "
                 f"feature SNR {snr:g}",
        "task": "node_classification",
        "source": {"kind": "synthetic", "parameters": parameters},
        "num_classes": num_classes,
        "metric": "accuracy",
        "split": {"protocol": "random", "num_splits": 1,
                  "rule": "the generator's seeded random partition of the nodes (50 / 25 / 25)"},
        "citation": 'Deshpande et al., "Contextual Stochastic Block Models", NeurIPS 2018. Generated by '
                    "zoo.data.synthetic.",
    }


def _check_arguments(num_nodes, num_edges, num_classes, homophily, degree_exponent, num_features, split):
    if num_classes < 2 or num_nodes < 2 * num_classes:
        raise ValueError(f"num_classes={num_classes} and num_nodes={num_nodes}: give at least 2 classes and "
                         "2 nodes per class")
    if num_edges <= 0 or num_edges % 2:
        raise ValueError(f"num_edges={num_edges} must be a positive even number: each undirected edge is "
                         f"stored in both directions (e.g. {num_edges + num_edges % 2 or 2})")
    if not 0 <= homophily <= 1:
        raise ValueError(f"homophily={homophily} must be in [0, 1] (the share of same-class edges)")
    if degree_exponent is not None and not degree_exponent > 2:
        raise ValueError(f"degree_exponent={degree_exponent} must be > 2 (finite mean degree), or None for "
                         "equal degree propensities")
    if num_features < 1:
        raise ValueError(f"num_features={num_features} must be >= 1")
    if len(split) != 3 or min(split) < 0 or abs(sum(split) - 1) > 1e-9:
        raise ValueError(f"split={split} must be three non-negative shares (train, val, test) summing to 1")
    per_class = num_nodes // num_classes  # the smallest class
    room_same = num_classes * per_class * (per_class - 1) // 2
    room_cross = num_nodes * (num_nodes - 1) // 2 - (num_classes * (per_class + 1) * per_class // 2)
    same = round(homophily * (num_edges // 2))
    if same > room_same // 2 or num_edges // 2 - same > room_cross // 2:
        raise ValueError(f"num_edges={num_edges} is too many for {num_nodes} nodes at homophily={homophily}: "
                         "the generator fills at most half of the possible same-class and cross-class pairs; "
                         "lower num_edges or raise num_nodes")


class _ClassSampler:
    """Draws nodes of given classes with probability proportional to ``theta`` within the class."""

    def __init__(self, labels: np.ndarray, theta: np.ndarray, num_classes: int):
        self.num_classes = num_classes
        self.labels = labels
        self.order = np.argsort(labels, kind="stable")
        sizes = np.bincount(labels, minlength=num_classes)
        self.ends = np.cumsum(sizes)
        mass = np.bincount(labels, weights=theta, minlength=num_classes)
        self.cdf = np.cumsum(theta[self.order] / mass[labels[self.order]])  # each class adds exactly 1
        self.cdf_start = np.arange(num_classes, dtype=np.float64)

    def nodes(self, rng: np.random.Generator, classes: np.ndarray) -> np.ndarray:
        """One node per entry of ``classes``."""
        target = self.cdf_start[classes] + rng.random(len(classes))
        position = np.searchsorted(self.cdf, target, side="right")
        position = np.minimum(position, self.ends[classes] - 1)  # rounding at a class's last node
        return self.order[position]


def _distinct_pairs(rng, sampler: _ClassSampler, count: int, *, same_class: bool):
    """``count`` distinct undirected pairs (no self-loops), same-class or cross-class."""
    num_nodes = len(sampler.labels)
    keys = np.empty(0, dtype=np.int64)
    for _ in range(MAX_ROUNDS):
        missing = count - len(keys)
        if missing == 0:
            break
        draw = missing + missing // 8 + 16  # a little extra: some draws are loops or repeats
        first_class = rng.integers(0, sampler.num_classes, draw)
        if same_class:
            second_class = first_class
        else:
            second_class = (first_class + rng.integers(1, sampler.num_classes, draw)) % sampler.num_classes
        a, b = sampler.nodes(rng, first_class), sampler.nodes(rng, second_class)
        fresh = np.minimum(a, b) * num_nodes + np.maximum(a, b)
        fresh = fresh[a != b]
        fresh = fresh[np.sort(np.unique(fresh, return_index=True)[1])]  # first occurrence, in draw order
        fresh = fresh[~np.isin(fresh, keys)][:missing]
        keys = np.concatenate([keys, fresh])
    if len(keys) < count:
        raise ValueError(f"could place only {len(keys)} of {count} distinct {'same' if same_class else 'cross'}-class "
                         f"pairs in {MAX_ROUNDS} rounds: the hubs are saturated; lower num_edges or raise "
                         "degree_exponent (lighter tail)")
    return keys // num_nodes, keys % num_nodes
