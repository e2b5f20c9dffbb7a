"""How both trainers train a :class:`~zoo.models.HasIndexParameters` model's attention indices
(LTGA's q, sparsegate's q or alpha): kept out of the weights' optimizer, given their own Adam
(``optim.q_lr``, no weight decay), pulled towards q = 1 by the Shannon prior, logged per epoch.

>>> import torch
>>> weights, index = split_index_parameters(torch.nn.Linear(2, 1))
>>> len(weights), index
(2, [])
"""
from __future__ import annotations

import torch

from zoo.models.capabilities import HasIndexParameters


def split_index_parameters(model: torch.nn.Module) -> tuple[list[torch.nn.Parameter], list[torch.nn.Parameter]]:
    """``(weights, indices)``: the trainable parameters but the indices, and the indices."""
    index = list(model.index_parameters()) if isinstance(model, HasIndexParameters) else []
    ids = {id(p) for p in index}
    return [p for p in model.parameters() if p.requires_grad and id(p) not in ids], index


def build_index_optimizer(model: torch.nn.Module, optim) -> torch.optim.Optimizer | None:
    """The indices' own Adam (``optim.q_lr``, no weight decay), or None for a model without any."""
    index = split_index_parameters(model)[1]
    return torch.optim.Adam(index, lr=optim.q_lr, weight_decay=0.0) if index else None


def shannon_prior(model, strength: float) -> torch.Tensor | float:
    """``strength * mean (q - 1)^2`` over every q the model used in its last forward."""
    if strength == 0 or not isinstance(model, HasIndexParameters):
        return 0.0
    values = [q.flatten() for q in model.q_values()]
    return strength * torch.cat(values).sub(1).pow(2).mean() if values else 0.0


def index_trajectory(model) -> dict[str, float]:
    """q per layer and head (mean, and sd over edges for per-edge q) from the last forward."""
    if not isinstance(model, HasIndexParameters):
        return {}
    row = {}
    for layer, q in enumerate(model.q_values()):
        q = q.detach().reshape(-1, q.shape[-1]) if q.dim() else q.detach().reshape(1, 1)
        for head, column in enumerate(q.T):
            row[f"q_mean/layer{layer}_head{head}"] = float(column.mean())
            if len(column) > 1:
                row[f"q_sd/layer{layer}_head{head}"] = float(column.std())
    return row
