"""Dense, masked twins of the edge normalisers: q-softmax, alpha-entmax and sparsemax over the last
axis of a score block (e.g. ``[B, H, L, L]`` global attention), with a key masked by a score of
``-inf`` (weight exactly 0, and no effect on the other keys' weights).

Same functions, same gradients as :func:`edge_qsoftmax`, :func:`edge_entmax` and
:func:`edge_sparsemax` on the graph whose in-edges of a node are the row's unmasked keys, to float
rounding: the per-node reductions (DGL's ``copy_e_sum`` / ``copy_e_max``) become reductions over the
last axis, the entmax threshold search is the edge op's, and the element-wise parts are the edge
ops' formulas (their helpers where a case is rare), arranged for a block: the forward keeps what the
backward needs, so the backward has no ``log1p``, and few full-size temporaries. A row whose every
key is masked (e.g. an empty graph's padded block) gets all-zero weights.
"""
from __future__ import annotations

import math

import torch

from ._common import (EXP_LOW, NonFiniteScores, ZooOpError, check_param, entmax_terms_, entmax_threshold, exp_flush_,
                      expq_log_grads_)
from .entmax import EPS_FLOOR
from .qsoftmax import _exp_q_, _log_grads_, _taylor

_FLOATS = (torch.bfloat16, torch.float32, torch.float64)
# w = (q - 1)(x - max), or (alpha - 1)(x - t), is clamped to this range (see _exact_); where some
# |q - 1| < 0.05, |w| < 1e-2 takes the series of d log e / dq (as expq_log_grads_)
_W_RANGE = {dtype: (-1 + torch.finfo(dtype).eps / 2, math.exp(-EXP_LOW[dtype])) for dtype in _FLOATS}
_SERIES_EPS, _SERIES_W = 0.05, 1e-2
_LOG1P_OFF = {dtype: math.log(1.5 * (1 + low)) for dtype, (low, _) in _W_RANGE.items()}  # below: w was <= -1
# below this alpha - 1 the index gradient from w (_exact_grads: (alpha - 1)^2, w^2) would underflow: a
# float32 tensor alpha of 1 (evaluated at 1 + EPS_FLOOR) takes the edge helpers, which work from x - t
_EPS_MIN = {dtype: torch.finfo(dtype).tiny ** 0.25 for dtype in _FLOATS}


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
    if not math.isfinite(float(total.sum())):  # NaN and inf propagate (the sums are far below overflow)
        raise NonFiniteScores(f"{name} contain NaN or +inf: scores must be finite, or -inf to mask a key")


def _sum_to(grad: torch.Tensor, like: torch.Tensor) -> torch.Tensor:
    return grad.sum_to_size(like.shape) if like.dim() else grad.sum()


def dense_qsoftmax(scores: torch.Tensor, q, *, taylor_eps: float = 1e-4) -> torch.Tensor:
    r"""Tsallis q-softmax over the last axis: :func:`zoo.ops.edge_qsoftmax` of a dense block.

    ``p_i = exp_q(z_i - max_j z_j) / sum_j exp_q(z_j - max_j z_j)`` over the unmasked keys
    (``-inf`` scores), with the edge op's Taylor branch for ``|q - 1| < taylor_eps``. ``q``: a float
    ``> 0`` or a tensor broadcasting to ``scores`` (gradients flow to it and to ``scores``; the
    max shift's gradient is shared by a row's keys at the max, as ``amax``'s).

    >>> dense_qsoftmax(torch.tensor([0.0, -0.5, -3.0, -float("inf")]), q=2.0)
    tensor([0.6667, 0.3333, 0.0000, 0.0000])
    """
    _check_scores(scores)
    q = _index(q, "q", scores)
    check_param(q, "q", 0.0, low_ok=False)
    if scores.numel() == 0:
        return scores.clone()
    return _DenseQSoftmax.apply(scores, q, float(taylor_eps))


class _DenseQSoftmax(torch.autograd.Function):
    """The edge op's ``_QSoftmax`` with reductions over the last axis. Where no ``|q - 1|`` is below
    ``taylor_eps`` (or every one is) it saves what its backward needs (see :func:`_exact_`,
    :func:`_taylor_terms_`), so the backward has no transcendental function; with some of each (rare)
    it uses the edge op's helpers."""

    @staticmethod
    def forward(ctx, x, q, taylor_eps):
        top = x.amax(-1, keepdim=True)
        d = x - top.masked_fill_(top == -math.inf, 0.0)  # a row without keys: all -inf, weights 0
        eps = q - 1
        taylor = _taylor(eps, taylor_eps)
        every, some = (bool(taylor.all()), bool(taylor.any())) if torch.is_tensor(taylor) else (taylor, taylor)
        mode = "taylor" if every else "mixed" if some else "exact"
        if mode == "exact":
            e, saved = _exact_(d, eps)
        elif mode == "taylor":
            e, saved = _taylor_terms_(d, eps)
        else:
            d.clamp_(min=-torch.finfo(x.dtype).max ** 0.25)  # -inf: weight 0, finite log-gradients
            e, saved = _exp_q_(d.clone(), eps, taylor), (d,)
        total = e.sum(-1, keepdim=True)
        _check_total(total)
        p = e.div_(total.clamp_(min=1))  # >= 1 on a row with a key (its max contributes exp_q(0) = 1)
        ctx.eps, ctx.taylor, ctx.mode = eps, taylor, mode
        ctx.save_for_backward(p, *saved)
        return p

    @staticmethod
    def backward(ctx, grad):
        p, *saved = ctx.saved_tensors
        eps, need_q = ctx.eps, ctx.needs_input_grad[1]
        gp = grad * p
        r = gp.addcmul_(p, gp.sum(-1, keepdim=True), value=-1)  # (g - <g, p>) p = d loss / d log e
        if ctx.mode == "exact":
            grad_x, dq = _exact_grads(r, *saved, eps, need_q)
        elif ctx.mode == "taylor":
            grad_x, dq = _taylor_grads(r, *saved, eps, need_q)
        else:
            dx, dq = _log_grads_(saved[0].clone(), eps, ctx.taylor, need_q)
            dq = None if dq is None else _sum_to(dq.mul_(r), eps)
            grad_x = r.mul_(dx)
        # the max shift: d / d max = -sum of the row's gradient, shared by the keys at the max (where
        # the saved w or d is 0), marked in r's buffer if nothing returned lives there
        spare = r if grad_x is not r and (dq is None or dq.data_ptr() != r.data_ptr()) else None
        at_max = torch.abs(saved[0], out=spare).sign_().neg_().add_(1)
        grad_x.addcmul_(at_max, grad_x.sum(-1, keepdim=True).neg_().div_(at_max.sum(-1, keepdim=True).clamp_(min=1)))
        return grad_x, dq, None


def _tiny(eps, dtype) -> bool:
    return torch.is_tensor(eps) and float(eps.abs().min()) < _EPS_MIN[dtype]


def _exact_(d, eps):
    """``exp_q(d)`` for ``q - 1 = eps`` away from 0, from ``d = x - max`` (overwritten), and what the
    backward needs: ``w = eps d`` and ``log1p(w)``.

    ``w`` is clamped to ``[-1 + ulp, exp(-EXP_LOW)]``, so ``log1p`` sees no ``-1`` or ``inf`` (special
    values that make it several times slower) and both saved tensors are finite (a zero weight times
    their gradients stays 0). Off the support (``w <= -1``, or a masked key) ``log1p(w)`` becomes
    ``-exp(-EXP_LOW)``, and the weight an exact 0 (``|eps| < 1`` flushes the other end).
    """
    low, high = _W_RANGE[d.dtype]
    w = d.mul_(eps).clamp_(min=low, max=high)
    log1p_w = torch.nn.functional.threshold_(torch.log1p(w), _LOG1P_OFF[d.dtype], -high)
    return exp_flush_(log1p_w * (1 / eps)), (w, log1p_w)


def _exact_grads(r, w, log1p_w, eps, need_q):
    """``(r d log e / dx, d loss / d eps)`` from ``r = d loss / d log e`` (overwritten):
    ``d log e / dx = 1 / (1 + w)``, ``d log e / d eps = f / eps^2`` with ``f = w / (1 + w) - log1p(w)``,
    as the edge op's ``expq_log_grads_``: where some ``|eps| < 0.05``, ``f`` comes from its series
    for ``|w| < 1e-2`` (there the difference, about ``-w^2 / 2``, loses the digits that matter once
    divided by ``eps^2``). The series runs only on the slices (e.g. heads) with such an eps."""
    grad_x = torch.add(w, 1).reciprocal_().mul_(r)
    if not need_q:
        return grad_x, None
    where = _series_slices(eps, r.dim())
    if where is not None:
        take = (lambda t: t.index_select(*where)) if where else (lambda t: t)
        series, direct = _series_terms(take(r), take(w))
    fr = r.mul_(log1p_w).neg_().addcmul_(w, grad_x)  # f r = w (r / (1 + w)) - log1p(w) r
    if where:
        fr.index_copy_(*where, series.lerp_(take(fr), direct))
    elif where is not None:
        fr = series.lerp_(fr, direct)
    return grad_x, _sum_to(fr, eps).div_(eps * eps)  # eps is constant over the summed axes


def _series_slices(eps, dim):
    """Where ``f`` needs its series: None (every ``|eps| >= 0.05``), ``(axis, index)`` of the slices
    with a smaller ``|eps|`` if eps varies along one axis (e.g. per head), else ``()``: everywhere
    (the series is exact to rounding for any eps at ``|w| < 1e-2``)."""
    if not torch.is_tensor(eps):
        return () if abs(eps) < _SERIES_EPS else None
    near = eps.abs() < _SERIES_EPS
    if not bool(near.any()):
        return None
    axes = [axis for axis, size in enumerate(eps.shape, dim - eps.dim()) if size > 1]
    if bool(near.all()) or len(axes) != 1:
        return ()
    return axes[0], near.flatten().nonzero().flatten()


def _series_terms(r, w):
    """``f r`` from the series ``f = -w^2 sum_{k>=2} (-1)^k (k-1)/k w^(k-2)`` (where ``|w| < 1e-2``),
    and 1 where ``|w| >= 1e-2`` (the direct ``f`` applies), else 0. float32 needs the terms to
    k = 5 (truncation below 2e-8 relative), float64 to k = 7 (as the edge op)."""
    top = 7 if w.dtype == torch.float64 else 5
    wc = w.clamp(min=-_SERIES_W, max=_SERIES_W)
    acc = torch.mul(wc, (-1) ** top * (1 - top) / top)  # Horner on the negated coefficients
    for k in range(top - 1, 2, -1):
        acc.add_((-1) ** k * (1 - k) / k).mul_(wc)
    acc.add_(-0.5).mul_(wc).mul_(wc).mul_(r)
    return acc, wc.sub_(w).abs_().sign_()


def _taylor_terms_(d, eps):
    """``exp(d) [1 - eps d^2 / 2]_+`` (the edge op's Taylor branch, for every ``|q - 1| < taylor_eps``)
    from ``d = x - max`` (overwritten), and what the backward needs: ``d`` and ``c = 1 - eps d^2 / 2``
    (None if every eps is 0: c = 1, e.g. a learned q at its start). ``c`` is clamped (to 0 here, to
    machine epsilon in the backward) only if some ``|eps|`` could make it small given
    ``d >= EXP_LOW``, e.g. never for float32 at the default ``taylor_eps``."""
    e = exp_flush_(d.clamp_(min=EXP_LOW[d.dtype]).clone())
    if not bool(torch.as_tensor(eps).any()):
        return e, (d, None)
    corr = torch.mul(d, d).mul_(-0.5 * eps).add_(1)
    return e.mul_(corr.clamp(min=0) if _taylor_clamps(eps, d.dtype) else corr), (d, corr)


def _taylor_clamps(eps, dtype):
    return float(torch.as_tensor(eps).abs().max()) * EXP_LOW[dtype] ** 2 / 2 >= 1 - torch.finfo(dtype).eps


def _taylor_grads(r, d, corr, eps, need_q):
    """Taylor branch, ``r`` overwritten: ``d log e / dx = 1 - eps d / c``, ``d log e / d eps = -d^2 / (2 c)``."""
    if corr is None:
        return r, _sum_to((r * d).mul_(d), eps).mul_(-0.5) if need_q else None
    rc = torch.div(r, corr.clamp(min=torch.finfo(r.dtype).eps) if _taylor_clamps(eps, r.dtype) else corr)
    rcd = rc.mul_(d)  # r d / c
    grad_x = r.addcmul_(rcd, -eps) if torch.is_tensor(eps) else r.add_(rcd, alpha=-eps)
    return grad_x, _sum_to(rcd.mul_(d), eps).mul_(-0.5) if need_q else None


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
    """Per row ``t`` with ``sum_i exp_eps(x_i - t) = 1``: the edge op's search, row-wise. Every step
    writes ``x - t`` into one buffer (the search reduces each step's terms before the next)."""
    buffer = torch.empty_like(x)
    return entmax_threshold(
        x, eps, lo=_row_max(x), degree=(x > -math.inf).sum(-1, keepdim=True),
        total=lambda p: p.sum(-1, keepdim=True), diff=lambda a, t: torch.sub(a, t, out=buffer),
        check=_check_total, n_bisect=n_bisect, max_iter=max_iter, name="dense_entmax")


class _DenseEntmax(torch.autograd.Function):
    """The edge op's ``_Entmax`` with reductions over the last axis. For alpha other than 1, 1.5 and 2
    (floats) the forward keeps ``w = eps (x - t)`` and ``log1p(w)`` (see :func:`_exact_`), so the
    backward has no transcendental function."""

    @staticmethod
    def forward(ctx, x, alpha, n_bisect, max_iter):
        eps = alpha - 1
        if torch.is_tensor(eps):
            eps = eps.clamp(min=EPS_FLOOR)
        saved = ()
        if not torch.is_tensor(eps) and eps == 0:  # softmax, exactly
            p = exp_flush_(x - _row_max(x))
        elif not torch.is_tensor(eps) and eps in (1.0, 0.5):  # exact shortcuts (relu, square)
            p, _ = entmax_terms_(x - _threshold(x, eps, n_bisect, max_iter), eps, slope=False)
        elif _tiny(eps, x.dtype):
            d = x - _threshold(x, eps, n_bisect, max_iter)
            p, saved = entmax_terms_(d.clone(), eps, slope=False)[0], (d,)
        else:
            p, saved = _exact_(x - _threshold(x, eps, n_bisect, max_iter), eps)
        total = p.sum(-1, keepdim=True)
        _check_total(total)
        p = p.div_(torch.where(total > 0, total, 1.0))  # a row without keys stays 0
        ctx.eps = eps
        ctx.save_for_backward(p, *saved)
        return p

    @staticmethod
    def backward(ctx, grad):
        eps = ctx.eps
        p, *saved = ctx.saved_tensors
        need_alpha = ctx.needs_input_grad[1]
        if len(saved) == 2:  # w and log1p(w): (g - gbar) p is q-softmax's d loss / d log e, and the
            w, log1p_w = saved  # x- and alpha-gradients are q-softmax's (1 / (1 + w) = s / p)
            gbar = _mean_grad(torch.add(w, 1).reciprocal_().mul_(p), grad)
            return (*_exact_grads(torch.sub(grad, gbar).mul_(p), w, log1p_w, eps, need_alpha), None, None)
        dlog = None
        if saved:  # x - t, for a tiny alpha - 1: the edge op's helper
            rho, dlog = expq_log_grads_(eps, saved[0].clone(), need_alpha)
            s = rho.mul_(p)  # p / (1 + eps (x - t))
        else:
            s = p if eps == 0 else p.sign() if eps == 1 else p.sqrt()
        r = grad - _mean_grad(s, grad)
        grad_alpha = None if dlog is None else _sum_to(dlog.mul_(r * p), eps)
        return r.mul_(s), grad_alpha, None, None


def _mean_grad(s, grad):
    """``sum s g / sum s`` per row (0 for a row without keys)."""
    norm = s.sum(-1, keepdim=True)
    return (s * grad).sum(-1, keepdim=True).div_(torch.where(norm > 0, norm, 1.0))
