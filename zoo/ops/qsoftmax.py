"""``edge_qsoftmax``: Tsallis q-softmax over the incoming edges of each destination node."""
import dgl.ops as F
import torch

from . import _fused
from ._common import (EXP_LOW, check_finite_sum, check_param, edge_param, edge_scores, exp_flush_, expq_,
                      expq_log_grads_, reduce_to)


def edge_qsoftmax(graph, logits, q, *, taylor_eps=1e-4):
    r"""Normalise edge scores with the q-exponential over each destination's incoming edges.

    For the edges ``i`` entering a node ``v`` (and each head)::

        x_i = z_i - max_j z_j,    e_i = exp_q(x_i) = [1 + (q - 1) x_i]_+ ^ (1 / (q - 1)),
        p_i = e_i / sum_j e_j

    q = 1 is ``dgl.nn.functional.edge_softmax``; q > 1 gives exact zeros for
    ``z_i <= max - 1 / (q - 1)``; 0 < q < 1 gives heavier tails than softmax.
    For ``|q - 1| < taylor_eps`` ``exp_q`` is replaced by its first-order expansion
    ``exp(x) [1 - (q - 1) x^2 / 2]_+``, which keeps the value and the q-gradient continuous.

    Shapes: ``logits`` ``[E]``, ``[E, H]`` or ``[E, H, 1]``; ``q`` a float, a tensor with one
    value, ``[H]`` (per head) or ``[E, H]`` (per edge; ``[E]`` for 1-d logits). Output has the
    shape of ``logits``. Domain: finite ``q > 0``; float32 or float64 logits, finite or -inf
    (a masked edge: weight exactly 0), not all -inf into one node. Weights below ~1e-37
    (float32) / ~1e-307 (float64) are flushed to 0. Nodes without incoming edges are absent
    from the output; self-loops and multi-edges are ordinary edges; blocks and bipartite
    graphs work. Normalisation is always over incoming edges (dst).

    Gradients flow to ``logits`` and to ``q`` if it is a tensor requiring grad. For q != 1
    the result is not shift invariant, so the max shift is part of the function and its
    gradient flows: the gradient is the exact derivative of the function computed. On exact
    ties at the max it goes to the first tied in-edge (in-CSR order), on every path and CPU
    (DGL's own max backward would not do: its AVX-512 float32 kernel, libxsmm, picks another).
    On CPU float32/float64 both directions run as one fused kernel each (``zoo/ops/_fused.py``;
    same function); elsewhere on DGL's sparse primitives.

    Raises ``ZooOpError`` (a ``ValueError``) for a shape that does not fit the graph, a q
    outside the domain, or NaN/+inf logits (naming the destination nodes).

    Example (three edges into node 2; the last is beyond max - 1/(q-1) = -1)::

        >>> import dgl, torch
        >>> from zoo.ops import edge_qsoftmax
        >>> g = dgl.graph(([0, 1, 2], [2, 2, 2]))
        >>> edge_qsoftmax(g, torch.tensor([0.0, -0.5, -3.0]), q=2.0)
        tensor([0.6667, 0.3333, 0.0000])
    """
    x, shape = edge_scores(graph, logits)
    q = edge_param(q, "q", x, shape, per_edge=True)
    check_param(q, "q", 0.0, low_ok=False)
    if x.numel() == 0:  # DGL's max backward fails on a graph without edges
        return logits.clone()
    if _fused.usable(x):
        return _FusedQSoftmax.apply(graph, x, q, float(taylor_eps)).reshape(shape)
    m = F.copy_e_max(graph, x.detach())
    return _QSoftmax.apply(graph, x, m, q, float(taylor_eps)).reshape(shape)


def _taylor(eps, taylor_eps):
    """Where the Taylor branch is used: a bool, or a bool tensor shaped like ``eps``."""
    return eps.abs() < taylor_eps if torch.is_tensor(eps) else abs(eps) < taylor_eps


def _taylor_(d, eps):
    """In place: ``d <- exp(d) [1 - eps d^2 / 2]_+``."""
    if not torch.is_tensor(eps) and eps == 0:
        return exp_flush_(d)
    d.clamp_(min=EXP_LOW[d.dtype])  # exp is 0 below; keeps the factor finite for d = -inf
    corr = (d * d).mul_(eps).mul_(-0.5).add_(1).clamp_(min=0)
    return exp_flush_(d).mul_(corr)


def _exp_q_(d, eps, taylor):
    """In place: ``d <- exp_q(d)`` with ``eps = q - 1``, Taylor branch where ``taylor``."""
    if not torch.is_tensor(taylor):
        return _taylor_(d, eps) if taylor else expq_(d, eps)
    if not taylor.any():
        return expq_(d, eps)
    if taylor.all():
        return _taylor_(d, eps)
    exact = expq_(d.clone(), torch.where(taylor, 1.0, eps))
    return torch.where(taylor, _taylor_(d, eps), exact, out=d)


def _log_grads_(d, eps, taylor, need_q):
    """``(d log e / d x, d log e / d eps)`` at ``x = d`` (overwrites ``d``); None if not needed.

    The x-derivative is None for q = 1 given as a float (it is 1).
    """
    if torch.is_tensor(taylor) and taylor.any() and not taylor.all():
        (dx, dq), (t_dx, t_dq) = expq_log_grads_(eps, d.clone(), need_q), _log_grads_(d, eps, True, need_q)
        dq = torch.where(taylor, t_dq, dq, out=dq) if need_q else None
        return torch.where(taylor, t_dx, dx, out=dx), dq
    if not (taylor.all() if torch.is_tensor(taylor) else taylor):
        return expq_log_grads_(eps, d, need_q)
    if not torch.is_tensor(eps) and eps == 0:
        return None, None
    sq = d * d  # Taylor branch: e = exp(d) c with c = 1 - eps d^2 / 2
    c = (sq * eps).mul_(-0.5).add_(1).clamp_(min=torch.finfo(d.dtype).eps)
    dq = sq.mul_(-0.5).div_(c) if need_q else None
    return d.mul_(eps).div_(c).neg_().add_(1), dq


class _QSoftmax(torch.autograd.Function):
    """q-softmax given the per-destination max ``m``; saves logits, max and output only."""

    @staticmethod
    def forward(ctx, graph, x, m, q, taylor_eps):
        eps = q - 1
        taylor = _taylor(eps, taylor_eps)
        e = _exp_q_(F.e_sub_v(graph, x, m), eps, taylor)
        total = F.copy_e_sum(graph, e)
        check_finite_sum(graph, total)
        p = F.e_div_v(graph, e, total)
        ctx.graph, ctx.eps, ctx.taylor = graph, eps, taylor
        ctx.save_for_backward(x, m, p)
        return p

    @staticmethod
    def backward(ctx, grad):
        graph, eps, taylor = ctx.graph, ctx.eps, ctx.taylor
        x, m, p = ctx.saved_tensors
        grad = grad.contiguous()
        need_q = ctx.needs_input_grad[3]
        r = F.e_sub_v(graph, grad, F.copy_e_sum(graph, grad * p))
        r.mul_(p)  # (g - <g, p>) p = d loss / d log e
        d = F.e_sub_v(graph, x, m).clamp_(min=-torch.finfo(x.dtype).max ** 0.25)  # -inf: weight 0
        dx, dq = _log_grads_(d, eps, taylor, need_q)
        grad_q = reduce_to(dq.mul_(r), eps) if need_q else None
        if dx is not None:
            r.mul_(dx)
        grad_m = F.copy_e_sum(graph, r).neg_()
        return None, r.add_(F.e_mul_v(graph, _first_at_max(graph, x, m), grad_m)), None, grad_q, None


def _first_at_max(graph, x, m):
    """1.0 on each destination's first in-edge (in-CSR order, as the fused kernel walks it) whose
    logit equals the max ``m``, per head; 0.0 elsewhere: the edge that takes the max's gradient."""
    indptr, _, eids = graph.adj_tensors("csc")
    indptr, eids = indptr.long(), eids.long()
    dst = torch.repeat_interleave(torch.arange(len(indptr) - 1, device=x.device), indptr.diff())
    position = torch.arange(len(eids), device=x.device)[:, None].expand(-1, x.shape[1])
    at_max = torch.where(x[eids] == m[dst], position, len(eids))
    first = torch.full_like(m, len(eids), dtype=torch.long).scatter_reduce(
        0, dst[:, None].expand_as(at_max), at_max, "amin")
    mask = torch.empty_like(x)
    mask[eids] = (position == first[dst]).to(x.dtype)
    return mask


def _mode(eps, taylor_eps):
    """The fused kernel's mode for ``eps = q - 1`` (the branches ``_exp_q_`` takes)."""
    taylor = _taylor(eps, taylor_eps)
    if not torch.is_tensor(eps):
        return (_fused.SOFTMAX if eps == 0 else _fused.TAYLOR) if taylor else _fused.float_mode(eps)
    return _fused.TAYLOR if taylor.all() else _fused.MIXED if taylor.any() else _fused.GENERAL


class _FusedQSoftmax(torch.autograd.Function):
    """q-softmax in one fused CPU kernel per direction (``zoo/ops/csrc``); saves logits, max and output."""

    @staticmethod
    def forward(ctx, graph, x, q, taylor_eps):
        x = x.contiguous()
        indptr, _, eids = _fused.adjacency(graph, "in")
        eps = q - 1
        mode = _mode(eps, taylor_eps)
        param = _fused.param(eps, x)
        p, m, total = _fused.kernels().qsoftmax_forward(indptr, eids, x, param, mode, taylor_eps)
        check_finite_sum(graph, total)
        ctx.mode, ctx.taylor_eps, ctx.series = mode, taylor_eps, _fused.needs_series(eps)
        ctx.save_for_backward(indptr, eids, x, p, m, param)
        return p

    @staticmethod
    def backward(ctx, grad):
        need_q = ctx.needs_input_grad[2]
        indptr, eids, x, p, m, param = ctx.saved_tensors
        grad_x, grad_q = _fused.kernels().qsoftmax_backward(
            indptr, eids, x, p, m, grad.contiguous(), param, ctx.mode, ctx.taylor_eps, need_q, need_q and ctx.series)
        return None, grad_x, grad_q if need_q else None, None
