"""A finished node-classification run rebuilt from its folder (resolved recipe, ``best.pt``, the
dataset split it trained on) and one recorded forward pass over the whole graph: what the
reliability, Lorenz, q_ij histogram and probe figures read, since metrics.json keeps none of it.

``best.pt`` is read with ``weights_only=True`` (:mod:`zoo._safe_load`). Every failure is a
:class:`~zoo.analysis.runs.ReportError` naming the run and what is missing.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import dgl.nn
import torch

from zoo._safe_load import load_weights_only
from zoo.analysis.runs import ReportError, _read_config
from zoo.data import DatasetError, load_node_dataset
from zoo.models import create_model
from zoo.models.capabilities import HasLTGALayers


@dataclass
class Recorded:
    """One eval-mode forward: test ``probs`` [N_test, C] and ``labels``; ``attention`` of the first
    layer [E, H] (None for a model without attention); per LTGA layer ``q`` (float, [H] or [E, H])
    and ``scores`` ([E, H] GATv2 scores; None with dot scoring); ``embedding`` (the first layer's
    output, heads concatenated); the ``graph`` and raw ``features``."""

    probs: torch.Tensor
    labels: torch.Tensor
    attention: torch.Tensor | None
    q: list
    scores: list
    embedding: torch.Tensor | None
    graph: object
    features: torch.Tensor


class DatasetCache:
    """Node datasets by (card, split), loaded once for every run that trained on them."""

    def __init__(self):
        self._data = {}

    def get(self, name: str, split: int):
        if (name, split) not in self._data:
            self._data[name, split] = load_node_dataset(name, split=split)
        return self._data[name, split]


def load_trained(seed_dir: str | Path, datasets: DatasetCache):
    """``(model, data)``: the run's model with its best weights, in eval mode, and its dataset split."""
    seed_dir = Path(seed_dir)
    config = _read_config(seed_dir.parent, seed_dir)
    task = config.get("task", "node_classification")
    if task != "node_classification":
        raise ReportError(f"{seed_dir}: a {task} run; this figure reads node-classification runs only")
    best = seed_dir / "best.pt"
    if not best.is_file():
        raise ReportError(f"{seed_dir} has no best.pt (the trained weights); retrain it with tools/train.py --force")
    state = load_weights_only(best, lambda why: ReportError(f"{best} cannot be read ({why}); retrain the run"))
    split = json.loads((seed_dir / "metrics.json").read_text()).get("split", 0)
    try:
        data = datasets.get(config["dataset"], int(split))
    except DatasetError as err:
        raise ReportError(f"{seed_dir}: dataset {config['dataset']!r} cannot be loaded ({err})") from None
    arguments = {k: v for k, v in config.get("model", {}).items() if k != "name"}
    try:
        model = create_model(config["model"]["name"], in_feats=data.features.shape[1], num_classes=data.num_classes,
                             **arguments)
        model.load_state_dict(state["model"])
    except (KeyError, TypeError, ValueError, RuntimeError) as err:
        raise ReportError(f"{best} does not fit its recipe's model {config.get('model')}: {err}") from None
    return model.eval(), data


def _first_attention_layer(model):
    """The first layer of a GAT / GATv2 stack (dgl.nn), or None."""
    convs = [*getattr(model, "convs", []), getattr(model, "out", None)]
    first = convs[0] if convs else None
    return first if isinstance(first, (dgl.nn.GATConv, dgl.nn.GATv2Conv)) else None


def record_forward(model, data) -> Recorded:
    """Run ``model`` once on ``data``'s whole graph (eval mode, no gradients) and record what the
    figures need (see :class:`Recorded`)."""
    graph, features = data.graph, data.features
    attention, scores, embedding, hooks = None, [], [], []
    with torch.no_grad():
        if isinstance(model, HasLTGALayers):
            layers = model.ltga_layers()
            recorded = []

            def keep(g, a):
                recorded.append(a.detach())
                return a

            def score(g, logits):
                scores.append(logits.detach())
                return logits

            for conv in layers:
                conv.attention_override = keep
                if conv.attn is not None:  # GATv2 scoring: the logits a . LeakyReLU(...)
                    conv.logits_override = score
            hooks.append(layers[0].register_forward_hook(lambda module, args, out: embedding.append(out.flatten(1))))
            try:
                logits = model(graph, features)
            finally:
                for conv in layers:
                    conv.attention_override = conv.logits_override = None
                for hook in hooks:
                    hook.remove()
            attention = recorded[0]
            q = [conv.last_q.detach() if torch.is_tensor(conv.last_q) else conv.last_q for conv in layers]
            scores = scores if len(scores) == len(layers) else [None] * len(layers)
        else:
            first = _first_attention_layer(model)
            if first is not None:
                hooks.append(first.register_forward_hook(lambda module, args, out: embedding.append(out.flatten(1))))
            try:
                logits = model(graph, features)
            finally:
                for hook in hooks:
                    hook.remove()
            if first is not None:
                attention = first(graph, features, get_attention=True)[1].squeeze(-1)
            q, scores = [], []
    mask = data.test_mask
    return Recorded(probs=logits[mask].double().softmax(1), labels=data.labels[mask], attention=attention, q=q,
                    scores=scores, embedding=embedding[0] if embedding else None, graph=graph, features=features)
