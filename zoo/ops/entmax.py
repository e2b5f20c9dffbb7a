"""``edge_entmax``: alpha-entmax over the incoming edges of each destination node."""
import warnings

import dgl.ops as F
import torch

from ._common import check_finite_sum, check_param, dlog_expq, edge_param, edge_scores, expq_, log_bracket, reduce_to

EPS_FLOOR = 1e-30  # a tensor alpha of exactly 1 is evaluated at alpha = 1 + EPS_FLOOR


def edge_entmax(graph, logits, alpha, *, n_bisect=8, max_iter=50):
    r"""alpha-entmax (Peters et al., 2019) over the incoming edges of each destination node.

    For the edges ``i`` entering a node (and each head), with ``eps = alpha - 1``::

        p_i = [1 + eps (z_i - t)]_+ ^ (1 / eps),   t such that sum_i p_i = 1

    which equals ``entmax.entmax_bisect(z, alpha)`` on each neighbourhood. alpha = 1 is
    softmax exactly, alpha = 2 is sparsemax; alpha > 1 gives exact zeros.

    Threshold: ``n_bisect`` bisection steps on ``[max z, max z + (1 - deg^-eps) / eps]`` for all
    destinations at once, then safeguarded Newton steps from the lower end (for alpha <= 2
    they increase monotonically to the root; for alpha = 2 each step is the closed-form
    sparsemax threshold of the current support) until the step is below ``sqrt(machine eps)``
    and the support no longer changes, at most ``max_iter`` steps. The last step is applied,
    so ``t`` is exact to rounding; ``p`` is finally divided by its sum.

    Shapes: ``logits`` ``[E]``, ``[E, H]`` or ``[E, H, 1]``; ``alpha`` a float >= 1, a tensor with
    one value or ``[H]`` (per head). Output has the shape of ``logits``. Finite logits; float32 or
    float64; nodes without incoming edges, self-loops and multi-edges are handled like edge_softmax.

    Gradients: to ``logits`` through the entmax Jacobian, ``s = p^(2 - alpha)`` on the support,
    ``dz = s g - s (sum s g) / (sum s)``; to a tensor ``alpha`` by ``dalpha = sum_i (g_i - gbar)
    p_i dlog p_i / deps`` with ``gbar = (sum s g) / (sum s)`` (same as the entmax package's formula,
    written without its 1/(alpha - 1)^2 cancellation; finite at alpha = 1). Iterations are not
    differentiated. Raises ``ZooOpError`` for bad shapes, alpha < 1 or NaN/+inf logits.

    Example::

        >>> g = dgl.graph(([0, 1, 2], [2, 2, 2]))
        >>> edge_entmax(g, torch.tensor([1.0, 0.5, -2.0]), alpha=1.5)
        tensor([0.6740, 0.3260, 0.0000])
    """
    x, shape = edge_scores(graph, logits)
    alpha = edge_param(alpha, "alpha", x, shape, per_edge=False)
    check_param(alpha, "alpha", 1.0, low_ok=True)
    return _Entmax.apply(graph, x, alpha, int(n_bisect), int(max_iter)).reshape(shape)


def _eval(graph, x, t, eps, slope):
    """``p = exp_eps(x - t)`` and, if ``slope``, ``s = p / (1 + eps (x - t))`` (else None)."""
    d = F.e_sub_v(graph, x, t)
    if not slope:
        return expq_(d, eps), None
    if not torch.is_tensor(eps) and eps in (1.0, 0.5):
        u = d.mul_(eps).add_(1).relu_()
        return (u, (u > 0).to(u.dtype)) if eps == 1 else (u.square(), u)
    w = d.mul_(eps)
    p = w.clamp(min=-1).log1p_().div_(eps).exp_()
    s = w.add_(1).clamp_(min=torch.finfo(w.dtype).tiny)
    return p, torch.div(p, s, out=s)


def _threshold(graph, x, eps, n_bisect, max_iter):
    """Per destination and head ``t`` with ``sum_i exp_eps(x_i - t) = 1`` (``[N, H]``)."""
    degree = graph.in_degrees().unsqueeze(1)
    lo = torch.where(degree > 0, F.copy_e_max(graph, x), 0.0)
    width = log_bracket(eps, degree.clamp(min=1).to(x.dtype)).expand_as(lo)
    for _ in range(n_bisect):
        width = width / 2
        mid = lo + width
        p, _ = _eval(graph, x, mid, eps, slope=False)
        lo = torch.where(F.copy_e_sum(graph, p) >= 1, mid, lo)
    hi, t = lo + width, lo
    tol, support = torch.finfo(x.dtype).eps ** 0.5, -1
    for _ in range(max_iter):
        p, s = _eval(graph, x, t, eps, slope=True)
        f = F.copy_e_sum(graph, p).sub_(1)
        check_finite_sum(graph, f)
        lo, hi = torch.where(f >= 0, t, lo), torch.where(f < 0, t, hi)
        new = t + f / F.copy_e_sum(graph, s)
        new = torch.where((new >= lo) & (new <= hi), new, (lo + hi) / 2)
        done = bool(((new - t).abs() <= tol * (1 + t.abs())).all())
        support, last = int((p > 0).sum()), support
        t = new
        if done and support == last:
            return t
    warnings.warn(f"edge_entmax: threshold not converged in max_iter={max_iter} Newton steps",
                  RuntimeWarning)
    return t


def _slope(p, eps):
    """``s = p^(1 - eps)`` on the support, 0 elsewhere (new tensor unless eps == 0)."""
    if not torch.is_tensor(eps):
        if eps in (0.0, 1.0, 0.5):
            return p if eps == 0 else (p > 0).to(p.dtype) if eps == 1 else p.sqrt()
        if eps < 1:
            return p.pow(1 - eps)
    return torch.where(p > 0, p.pow(1 - eps), 0.0)


class _Entmax(torch.autograd.Function):
    """alpha-entmax; saves logits, threshold ``[N, H]`` and output only."""

    @staticmethod
    def forward(ctx, graph, x, alpha, n_bisect, max_iter):
        eps = alpha - 1
        if torch.is_tensor(eps):
            eps = eps.clamp(min=EPS_FLOOR)
        if not torch.is_tensor(eps) and eps == 0:  # softmax, exactly
            m = torch.where(graph.in_degrees().unsqueeze(1) > 0, F.copy_e_max(graph, x), 0.0)
            p = F.e_sub_v(graph, x, m).exp_()
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
        s = _slope(p, eps)
        gbar = F.copy_e_sum(graph, s * grad).div_(F.copy_e_sum(graph, s))
        r = F.e_sub_v(graph, grad, gbar)  # g - gbar
        grad_alpha = None
        if ctx.needs_input_grad[2]:
            dq = dlog_expq(eps, F.e_sub_v(graph, x, t))
            grad_alpha = reduce_to(dq.mul_(r).mul_(p), eps)
        return None, r.mul_(s), grad_alpha, None, None
