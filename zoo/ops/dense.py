"""Dense, masked twins of the edge normalisers: q-softmax, alpha-entmax and sparsemax over the last
axis of a score block (e.g. ``[B, H, L, L]`` global attention), with a key masked by a score of
``-inf`` (weight exactly 0, and no effect on the other keys' weights).

Same functions, same numerics, same gradients as :func:`edge_qsoftmax`, :func:`edge_entmax` and
:func:`edge_sparsemax` on the graph whose in-edges of a node are the row's unmasked keys: the
element-wise parts are the edge ops' own helpers; only the per-node reductions (DGL's
``copy_e_sum`` / ``copy_e_max``) become reductions over the last axis. A row whose every key is
masked (e.g. an empty graph's padded block) gets all-zero weights.
"""
from __future__ import annotations

import math

import torch

from ._common import ZooOpError, check_param, entmax_terms_, entmax_threshold, exp_flush_, expq_log_grads_
from .entmax import EPS_FLOOR
from .qsoftmax import _exp_q_, _log_grads_, _taylor

_FLOATS = (torch.bfloat16, torch.float32, torch.float64)


def _check_scores(scores: torch.Tensor) -> None:
    if not torch.is_tensor(scores) or scores.dtype not in _FLOATS:
        raise ZooOpError(f"scores must be a float32, float64 or bfloat16 tensor, got "
                         f"{getattr(scores, 'dtype', type(scores).__name__)}")
    if scores.dim() < 1:
        raise ZooOpError("scores must have at least one axis (the keys, last)")


def _index(value, name: str, scores: torch.Tensor):
    """A float stays a float; a tensor must broadcast to ``scores`` (e.g. ``[H, 1, 1]`` per head of
    ``[B, H, L, L]``) and is cast to its dtype."""
    if not torch.is_tensor(value):
        return float(value)
    try:
        torch.broadcast_shapes(value.shape, scores.shape)
    except RuntimeError:
        raise ZooOpError(f"{name} has shape {list(value.shape)}, which does not broadcast to the scores "
                         f"{list(scores.shape)}: pass a float, one value, or e.g. [H, 1, 1] per head") from None
    if value.dim() > scores.dim():
        raise ZooOpError(f"{name} has more axes ({value.dim()}) than the scores ({scores.dim()})")
    return value.to(device=scores.device, dtype=scores.dtype)


def _check_total(total: torch.Tensor, name: str = "scores") -> None:
    if not bool(torch.isfinite(total).all()):
        raise ZooOpError(f"{name} contain NaN or +inf: scores must be finite, or -inf to mask a key")


def _sum_to(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return grad.sum_to_size(like.shape) if like.dim() else grad.sum()


def dense_qsoftmax(scores: torch.Tensor, q, *, taylor_eps: float = 1e-4) -> torch.Tensor:
    r"""Tsallis q-softmax over the last axis: :func:`zoo.ops.edge_qsoftmax` of a dense block.

    ``p_i = exp_q(z_i - max_j z_j) / sum_j exp_q(z_j - max_j z_j)`` over the unmasked keys
    (``-inf`` scores), with the edge op's Taylor branch for ``|q - 1| < taylor_eps``. ``q``: a float
    ``> 0`` or a tensor broadcasting to ``scores`` (gradients flow to it and to ``scores``).

    >>> dense_qsoftmax(torch.tensor([0.0, -0.5, -3.0, -float("inf")]), q=2.0)
    tensor([0.6667, 0.3333, 0.0000, 0.0000])
    """
    _check_scores(scores)
    q = _index(q, "q", scores)
    check_param(q, "q", 0.0, low_ok=False)
    if scores.numel() == 0:
        return scores.clone()
    top = scores.amax(-1, keepdim=True)
    top = top.masked_fill(top == -math.inf, 0.0)  # a row without keys
    return _DenseQSoftmax.apply(scores, top, q, float(taylor_eps))


class _DenseQSoftmax(torch.autograd.Function):
    """The edge op's ``_QSoftmax`` with reductions over the last axis."""

    @staticmethod
    def forward(ctx, x, m, q, taylor_eps):
        eps = q - 1
        taylor = _taylor(eps, taylor_eps)
        e = _exp_q_(x - m, eps, taylor)
        total = e.sum(-1, keepdim=True)
        _check_total(total)
        p = e.div_(total.clamp_(min=1))  # >= 1 on a row with a key (its max contributes exp_q(0) = 1)
        ctx.eps, ctx.taylor = eps, taylor
        ctx.save_for_backward(x, m, p, q if torch.is_tensor(q) else None)
        return p

    @staticmethod
    def backward(ctx, grad):
        eps, taylor = ctx.eps, ctx.taylor
        x, m, p, q = ctx.saved_tensors
        need_q = ctx.needs_input_grad[2]
        r = (grad - (grad * p).sum(-1, keepdim=True)).mul_(p)  # d loss / d log e
        d = (x - m).clamp_(min=-torch.finfo(x.dtype).max ** 0.25)  # -inf: weight 0
        dx, dq = _log_grads_(d, eps, taylor, need_q)
        grad_q = _sum_to(dq.mul_(r), q) if need_q else None
        if dx is not None:
            r.mul_(dx)
        grad_m = r.sum(-1, keepdim=True).neg_() if ctx.needs_input_grad[1] else None
        return r, grad_m, grad_q, None


def dense_entmax(scores: torch.Tensor, alpha, *, n_bisect: int = 4, max_iter: int = 50) -> torch.Tensor:
    r"""alpha-entmax over the last axis: :func:`zoo.ops.edge_entmax` of a dense block.

    ``p_i = [1 + (alpha - 1)(z_i - t)]_+ ^ (1 / (alpha - 1))`` with ``t`` such that the unmasked
    keys' weights sum to one; the edge op's threshold search (bisection, then Newton from below),
    Jacobian and alpha-gradient. ``alpha``: a float ``>= 1`` or a tensor broadcasting to ``scores``.

    >>> dense_entmax(torch.tensor([1.0, 0.5, -2.0, -float("inf")]), alpha=1.5)
    tensor([0.6740, 0.3260, 0.0000, 0.0000])
    """
    _check_scores(scores)
    alpha = _index(alpha, "alpha", scores)
    check_param(alpha, "alpha", 1.0, low_ok=True)
    if scores.numel() == 0:
        return scores.clone()
    return _DenseEntmax.apply(scores, alpha, int(n_bisect), int(max_iter))


def dense_sparsemax(scores: torch.Tensor, *, n_bisect: int = 4, max_iter: int = 50) -> torch.Tensor:
    """Sparsemax over the last axis (:func:`dense_entmax` at alpha = 2, as :func:`zoo.ops.edge_sparsemax`).

    >>> dense_sparsemax(torch.tensor([1.0, 0.5, -2.0]))
    tensor([0.7500, 0.2500, 0.0000])
    """
    return dense_entmax(scores, 2.0, n_bisect=n_bisect, max_iter=max_iter)


def _row_max(x):
    top = x.amax(-1, keepdim=True)
    return top.masked_fill(top == -math.inf, 0.0)


def _threshold(x, eps, n_bisect, max_iter):
    """Per row ``t`` with ``sum_i exp_eps(x_i - t) = 1``: the edge op's search, row-wise."""
    return entmax_threshold(
        x, eps, lo=_row_max(x), degree=(x > -math.inf).sum(-1, keepdim=True),
        total=lambda p: p.sum(-1, keepdim=True), diff=lambda a, t: a - t, check=_check_total,
        n_bisect=n_bisect, max_iter=max_iter, name="dense_entmax")


class _DenseEntmax(torch.autograd.Function):
    """The edge op's ``_Entmax`` with reductions over the last axis."""

    @staticmethod
    def forward(ctx, x, alpha, n_bisect, max_iter):
        eps = alpha - 1
        if torch.is_tensor(eps):
            eps = eps.clamp(min=EPS_FLOOR)
        if not torch.is_tensor(eps) and eps == 0:  # softmax, exactly
            m = _row_max(x)
            p = exp_flush_(x - m)
            total = p.sum(-1, keepdim=True)
            t = m + total.log()
        else:
            t = _threshold(x, eps, n_bisect, max_iter)
            p, _ = entmax_terms_(x - t, eps, slope=False)
            total = p.sum(-1, keepdim=True)
        _check_total(total)
        p = p.div_(torch.where(total > 0, total, 1.0))  # a row without keys stays 0
        ctx.eps = eps
        ctx.save_for_backward(x, t, p, alpha if torch.is_tensor(alpha) else None)
        return p

    @staticmethod
    def backward(ctx, grad):
        eps = ctx.eps
        x, t, p, alpha = ctx.saved_tensors
        need_alpha = ctx.needs_input_grad[1]
        if not torch.is_tensor(eps) and eps in (0.0, 1.0, 0.5):
            s, dlog = (p if eps == 0 else p.sign() if eps == 1 else p.sqrt()), None
        else:
            rho, dlog = expq_log_grads_(eps, x - t, need_alpha)
            s = rho.mul_(p)  # p / (1 + eps (x - t))
        norm = s.sum(-1, keepdim=True)
        gbar = (s * grad).sum(-1, keepdim=True).div_(torch.where(norm > 0, norm, 1.0))
        r = grad - gbar
        grad_x = r * s
        grad_alpha = None if dlog is None else _sum_to(dlog.mul_(r.mul_(p)), alpha)
        return grad_x, grad_alpha, None, None
