"""How both trainers train a :class:`~zoo.models.HasIndexParameters` model's attention indices
(LTGA's q, sparsegate's q or alpha): kept out of the weights' optimizer, given their own Adam
(``optim.q_lr``, no weight decay), pulled towards q = 1 by the Shannon prior, logged per epoch
(q, and the norm of the gradient reaching the indices: the LTGA paper's Figure 11).

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


def index_gradient_norm(model) -> float | None:
    """``||dL/d alpha||_2`` over every index parameter's ``.grad`` (L: the loss with the Shannon
    prior), or None when none holds a gradient. For LTGA-Edge the parameters are the gate's.

    >>> layer = torch.nn.Linear(1, 1)
    >>> index_gradient_norm(layer) is None
    True
    """
    if not isinstance(model, HasIndexParameters):
        return None
    grads = [p.grad.detach().double().flatten() for p in model.index_parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.cat(grads))) if grads else None


def index_trajectory(model) -> dict[str, float]:
    """q per layer and head (mean, and sd over edges for per-edge q) from the last forward, and
    ``q_grad_norm`` (:func:`index_gradient_norm`) where the indices hold gradients.

    Both trainers call it right after an epoch's last optimiser step and before the next
    ``zero_grad``, so the norm is that of the epoch's last step; it is recorded during the warm-up
    too (the indices get gradients then, they only do not step). The graph trainer clips the
    global gradient norm (``optim.clip_grad_norm``) before it, so there the norm is after clipping.
    """
    if not isinstance(model, HasIndexParameters):
        return {}
    row = {}
    norm = index_gradient_norm(model)
    if norm is not None:
        row["q_grad_norm"] = norm
    for layer, q in enumerate(model.q_values()):
        q = q.detach().reshape(-1, q.shape[-1]) if q.dim() else q.detach().reshape(1, 1)
        for head, column in enumerate(q.T):
            row[f"q_mean/layer{layer}_head{head}"] = float(column.mean())
            if len(column) > 1:
                row[f"q_sd/layer{layer}_head{head}"] = float(column.std())
    return row
