"""``edge_entmax``: alpha-entmax over the incoming edges of each destination node."""

import dgl.ops as F
import torch

from . import _fused
from ._common import (check_finite_sum, check_param, edge_param, edge_scores, entmax_terms_, entmax_threshold,
                      exp_flush_, expq_log_grads_, reduce_to, warn_not_converged)

EPS_FLOOR = 1e-30  # a tensor alpha of exactly 1 is evaluated at alpha = 1 + EPS_FLOOR


def edge_entmax(graph, logits, alpha, *, n_bisect=4, max_iter=50):
    r"""alpha-entmax (Peters et al., 2019) over the incoming edges of each destination node.

    For the edges ``i`` entering a node (and each head), with ``eps = alpha - 1``::

        p_i = [1 + eps (z_i - t)]_+ ^ (1 / eps),   t such that sum_i p_i = 1

    which equals ``entmax.entmax_bisect(z, alpha)`` on each neighbourhood. alpha = 1 is
    softmax exactly, alpha = 2 is sparsemax; alpha > 1 gives exact zeros.

    Threshold, per destination and head in a fused kernel on CPU float32/float64 (see
    ``zoo/ops/_fused.py``), else for all destinations at once on DGL's sparse primitives (the
    convergence tests below then apply to all destinations together): ``n_bisect`` bisection
    steps on ``[max z, max z + (1 - deg^-eps) / eps]``, then Newton steps from the lower end.
    For alpha <= 2 the sum is convex in ``t``, so Newton increases monotonically to the root;
    for alpha = 2 each step is the closed-form sparsemax threshold of the current support.
    It stops once the step is below ``machine_eps^(2/3)`` (relative) and no alpha = 2 support
    changed, or below ``8 machine_eps``; the last step is applied, so ``t`` is exact to rounding
    (at most ``max_iter`` steps, else a RuntimeWarning). For alpha > 2 (not convex) bisection
    alone runs to machine precision (at most ``max_iter`` steps). ``p`` is finally divided by
    its sum; weights below ~1e-37 (float32) / ~1e-307 (float64) are flushed to 0. A tensor
    alpha of exactly 1 is evaluated at 1 + 1e-30 (softmax to rounding); a float 1 is softmax.

    Shapes: ``logits`` ``[E]``, ``[E, H]`` or ``[E, H, 1]``; ``alpha`` a float >= 1, a tensor with
    one value or ``[H]`` (per head). Output has the shape of ``logits``. float32 or float64 logits,
    finite or -inf (a masked edge: weight 0), not all -inf into one node. Nodes without incoming
    edges, self-loops, multi-edges, blocks and bipartite graphs are handled like edge_softmax.

    Gradients: to ``logits`` through the entmax Jacobian, ``s = p^(2 - alpha)`` on the support,
    ``dz = s g - s (sum s g) / (sum s)``; to a tensor ``alpha`` by ``dalpha = sum_i (g_i - gbar)
    p_i dlog p_i / deps`` with ``gbar = (sum s g) / (sum s)`` (same as the entmax package's formula,
    written without its 1/(alpha - 1)^2 cancellation; finite at alpha = 1). Iterations are not
    differentiated. Raises ``ZooOpError`` for bad shapes, alpha < 1 or NaN/+inf logits.

    Example::

        >>> import dgl, torch
        >>> from zoo.ops import edge_entmax
        >>> g = dgl.graph(([0, 1, 2], [2, 2, 2]))
        >>> edge_entmax(g, torch.tensor([1.0, 0.5, -2.0]), alpha=1.5)
        tensor([0.6740, 0.3260, 0.0000])
    """
    x, shape = edge_scores(graph, logits)
    alpha = edge_param(alpha, "alpha", x, shape, per_edge=False)
    check_param(alpha, "alpha", 1.0, low_ok=True)
    if x.numel() == 0:
        return logits.clone()
    if _fused.usable(x):
        return _FusedEntmax.apply(graph, x, alpha, int(n_bisect), int(max_iter)).reshape(shape)
    return _Entmax.apply(graph, x, alpha, int(n_bisect), int(max_iter)).reshape(shape)


def _eval(graph, x, t, eps, slope):
    """``p = exp_eps(x - t)`` and, if ``slope``, ``s = p / (1 + eps (x - t))`` (else None)."""
    return entmax_terms_(F.e_sub_v(graph, x, t), eps, slope)


def _threshold(graph, x, eps, n_bisect, max_iter):
    """Per destination and head ``t`` with ``sum_i exp_eps(x_i - t) = 1`` (``[N, H]``)."""
    degree = graph.in_degrees().unsqueeze(1)
    return entmax_threshold(
        x, eps, lo=torch.where(degree > 0, F.copy_e_max(graph, x), 0.0), degree=degree,
        total=lambda p: F.copy_e_sum(graph, p), diff=lambda a, t: F.e_sub_v(graph, a, t),
        check=lambda f: check_finite_sum(graph, f), n_bisect=n_bisect, max_iter=max_iter, name="edge_entmax")


def _slope(graph, x, t, p, eps, need_alpha):
    """``s = p^(1 - eps)`` (0 off the support) and, if ``need_alpha``, ``d log p / d eps``."""
    if not torch.is_tensor(eps) and eps in (0.0, 1.0, 0.5):
        return (p if eps == 0 else p.sign() if eps == 1 else p.sqrt()), None
    rho, dlog = expq_log_grads_(eps, F.e_sub_v(graph, x, t), need_alpha)
    return rho.mul_(p), dlog  # p / (1 + eps (x - t))


class _Entmax(torch.autograd.Function):
    """alpha-entmax; saves logits, threshold ``[N, H]`` and output only."""

    @staticmethod
    def forward(ctx, graph, x, alpha, n_bisect, max_iter):
        eps = alpha - 1
        if torch.is_tensor(eps):
            eps = eps.clamp(min=EPS_FLOOR)
        if not torch.is_tensor(eps) and eps == 0:  # softmax, exactly
            m = torch.where(graph.in_degrees().unsqueeze(1) > 0, F.copy_e_max(graph, x), 0.0)
            p = exp_flush_(F.e_sub_v(graph, x, m))
            total = F.copy_e_sum(graph, p)
            t = m + total.log()
        else:
            t = _threshold(graph, x, eps, n_bisect, max_iter)
            p, _ = _eval(graph, x, t, eps, slope=False)
            total = F.copy_e_sum(graph, p)
        check_finite_sum(graph, total)
        p = F.e_div_v(graph, p, total)
        ctx.graph, ctx.eps = graph, eps
        ctx.save_for_backward(x, t, p)
        return p

    @staticmethod
    def backward(ctx, grad):
        graph, eps = ctx.graph, ctx.eps
        x, t, p = ctx.saved_tensors
        grad = grad.contiguous()
        s, dlog = _slope(graph, x, t, p, eps, ctx.needs_input_grad[2])
        gbar = F.copy_e_sum(graph, s * grad).div_(F.copy_e_sum(graph, s))
        r = F.e_sub_v(graph, grad, gbar)  # g - gbar
        grad_x = s.mul_(r) if s is not p else r * s
        grad_alpha = None if dlog is None else reduce_to(dlog.mul_(r.mul_(p)), eps)
        return None, grad_x, grad_alpha, None, None


class _FusedEntmax(torch.autograd.Function):
    """alpha-entmax in one fused CPU kernel per direction (``zoo/ops/csrc``); saves logits, threshold, output."""

    @staticmethod
    def forward(ctx, graph, x, alpha, n_bisect, max_iter):
        x = x.contiguous()
        eps = alpha - 1
        if torch.is_tensor(eps):
            eps = eps.clamp(min=EPS_FLOOR)
        mode = _fused.GENERAL if torch.is_tensor(eps) else _fused.float_mode(eps)
        indptr, _, eids = _fused.adjacency(graph, "in")
        param = _fused.param(eps, x)
        p, t, total, stuck = _fused.kernels().entmax_forward(indptr, eids, x, param, mode, n_bisect, max_iter)
        check_finite_sum(graph, total)
        if stuck:
            warn_not_converged("edge_entmax", max_iter)
        ctx.mode, ctx.series = mode, _fused.needs_series(eps)
        ctx.save_for_backward(indptr, eids, x, t, p, param)
        return p

    @staticmethod
    def backward(ctx, grad):
        need_alpha = ctx.needs_input_grad[2]
        indptr, eids, x, t, p, param = ctx.saved_tensors
        grad_x, grad_eps = _fused.kernels().entmax_backward(
            indptr, eids, x, t, p, grad.contiguous(), param, ctx.mode, need_alpha, need_alpha and ctx.series)
        return None, grad_x, grad_eps if need_alpha else None, None, None
