"""LTGA diagnostics on a trained model: attention statistics, pruning counterfactuals and the
label agreement of pruned versus kept edges.

Counterfactuals (inference only, same weights):
* A: force q = 1 (softmax) in every layer;
* B: q = 1, then prune at random as many edges per neighbourhood and head as the learned
  attention set exactly to zero, and renormalise;
* C: clamp q >= 1 (no heavy tails, keep the learned sparsity).

Label agreement has two definitions (:data:`LABEL_AGREEMENTS`), both recorded:
* ``pairs``: every (edge, head) pair counts once, pruned where that head's weight is 0;
* ``every_head`` (the paper's, Section 5.2 and Table 5): an edge is pruned when every head gives
  it weight 0, kept when at least one head keeps it.
"""
from __future__ import annotations

from contextlib import contextmanager
from typing import Callable

import dgl.ops
import torch

from zoo.analysis.attention import attention_statistics, segment_rank

class UndefinedCounterfactual(ArithmeticError):
    """A counterfactual has no value on this model (e.g. B renormalising weights that all underflowed)."""


LABEL_AGREEMENTS = {"pairs": "label_agreement", "every_head": "label_agreement_every_head"}
"""Label-agreement definition -> the key of ``ltga_diagnostics``'s result (and of metrics.json)."""


@contextmanager
def _hooks(layers, q_override=None, attention_override=None):
    for conv in layers:
        conv.q_override, conv.attention_override = q_override, attention_override
    try:
        yield
    finally:
        for conv in layers:
            conv.q_override = conv.attention_override = None


def _recorded_forward(model, graph, features):
    """Logits and each layer's attention ``[E, H]`` (in layer order)."""
    recorded = []

    def record(g, attention):
        recorded.append(attention.detach())
        return attention

    with _hooks(model.ltga_layers(), attention_override=record), torch.no_grad():
        logits = model(graph, features)
    return logits, recorded


def random_prune(learned: list[torch.Tensor], generator: torch.Generator) -> Callable:
    """An attention hook that zeroes, per node and head, as many random edges as ``learned``
    (one ``[E, H]`` tensor per layer, used in call order) has exact zeros, then renormalises;
    raises :class:`UndefinedCounterfactual` where every kept weight of a neighbourhood is 0."""
    layer = iter(learned)

    def prune(graph, attention):
        zeros = (next(layer) == 0).to(attention.dtype)
        count = dgl.ops.copy_e_sum(graph, zeros)
        _, dst = graph.edges()
        noise = torch.rand(attention.shape, generator=generator, dtype=torch.float64).to(attention.device)
        rank = torch.stack([segment_rank(dst, noise[:, h]) for h in range(attention.shape[1])], 1)
        keep = (rank >= count[dst]).to(attention.dtype)
        kept = attention * keep
        total = dgl.ops.copy_e_sum(graph, kept)[dst]
        if (total == 0).any():
            raise UndefinedCounterfactual(
                f"{int((total == 0).sum())} kept (edge, head) pairs sit in neighbourhoods whose randomly kept "
                "edges all have q = 1 weight 0 (softmax underflow: logit gaps beyond ~100), so renormalising is 0/0")
        return kept / total

    return prune


def label_agreement(graph, attention: torch.Tensor, labels: torch.Tensor, train_mask: torch.Tensor,
                    definition: str = "pairs") -> dict:
    """Share of pruned and of kept edges whose endpoints share a label, over non-loop edges with
    both endpoints in the training set (training labels only). ``definition="pairs"`` counts each
    (edge, head) pair of ``attention`` ``[E, H]``, pruned where its weight is 0; ``"every_head"``
    counts each edge once, pruned when all its H weights are 0 (the paper's).

    >>> g = dgl.graph(([1, 2], [0, 0]))
    >>> a = torch.tensor([[0.0, 0.0], [0.0, 1.0]])
    >>> label_agreement(g, a, torch.tensor([0, 0, 1]), torch.ones(3, dtype=torch.bool), "every_head")
    {'pruned': {'agreement': 1.0, 'n': 1}, 'kept': {'agreement': 0.0, 'n': 1}}
    """
    if definition not in LABEL_AGREEMENTS:
        raise ValueError(f"label agreement definition {definition!r} is not one of {tuple(LABEL_AGREEMENTS)}")
    src, dst = graph.edges()
    usable = train_mask[src] & train_mask[dst] & (src != dst)
    same = (labels[src] == labels[dst])[usable]
    pruned = attention[usable] == 0
    if definition == "every_head":
        pruned = pruned.all(1)
    else:
        same = same[:, None].expand(-1, attention.shape[1])
    result = {}
    for name, mask in (("pruned", pruned), ("kept", ~pruned)):
        n = int(mask.sum())
        result[name] = {"agreement": float(same[mask].double().mean()) if n else None, "n": n}
    return result


def ltga_diagnostics(model, data, score: Callable[[torch.Tensor], float], seed: int = 0) -> dict:
    """Attention statistics per layer, label agreement and counterfactuals A-C of a trained LTGA
    model (a :class:`zoo.models.HasLTGALayers`) on ``data`` (a :class:`zoo.data.NodeData`);
    ``score(logits)`` gives the metric reported for each variant (e.g. test accuracy). A variant
    without a value on this model is left out of ``counterfactual`` and named, with the reason, in
    ``undefined``."""
    model.eval()
    graph, features = data.graph, data.features
    logits, learned = _recorded_forward(model, graph, features)
    report = {
        "layers": [attention_statistics(graph, a) for a in learned],
        **{key: [label_agreement(graph, a, data.labels, data.train_mask, definition) for a in learned]
           for definition, key in LABEL_AGREEMENTS.items()},
        "counterfactual": {"trained": score(logits)},
    }
    if all(conv.normaliser == "qsoftmax" for conv in model.ltga_layers()):
        one = lambda q: 1.0
        clamp = lambda q: q.clamp(min=1.0) if torch.is_tensor(q) else max(q, 1.0)
        prune = random_prune(learned, torch.Generator().manual_seed(seed))
        variants = {"A_softmax": dict(q_override=one), "B_random_prune": dict(q_override=one, attention_override=prune),
                    "C_clamp_q": dict(q_override=clamp)}
        for name, hooks in variants.items():
            try:
                with _hooks(model.ltga_layers(), **hooks), torch.no_grad():
                    report["counterfactual"][name] = score(model(graph, features))
            except UndefinedCounterfactual as err:
                report.setdefault("undefined", {})[name] = str(err)
    return report
