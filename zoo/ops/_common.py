"""Input checks and small numerical helpers shared by the edge normalisers."""
import math
import warnings

import torch

_FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
EXP_LOW = {dtype: math.log(torch.finfo(dtype).tiny) + 2 for dtype in _FLOATS}  # exp_flush_ cut-off


class ZooOpError(ValueError):
    """Invalid input to a ``zoo.ops`` function (shape, domain or non-finite value)."""


class NonFiniteScores(ZooOpError):
    """Scores that hold NaN or +inf, or an index (q, alpha) that is NaN or infinite: a learned one,
    such as LTGA-Edge's per-edge q, is computed from the same inputs as the scores. In training,
    after the inputs were finite at the start, it means the weights diverged (the trainers report
    it as ``zoo.engine.divergence.TrainingDiverged``)."""


def edge_scores(graph, logits, name="logits"):
    """Check ``logits`` against ``graph`` and view it as ``[E, H]``.

    Accepts ``[E]``, ``[E, H]`` and ``[E, H, 1]`` (like ``edge_softmax``).
    Returns the ``[E, H]`` view and the original shape.
    """
    if len(graph.canonical_etypes) != 1:
        raise ZooOpError(
            f"graph has edge types {graph.canonical_etypes}; only graphs with one edge type "
            "are supported: pass dgl.to_homogeneous(graph) or one relation, e.g. graph['follows']")
    if not torch.is_tensor(logits) or logits.dtype not in _FLOATS:
        raise ZooOpError(f"{name} must be a floating-point tensor, got "
                         f"{getattr(logits, 'dtype', type(logits).__name__)}")
    check_cpu_half(logits, name)
    num_edges = graph.num_edges()
    shape = tuple(logits.shape)
    ok = (logits.dim() in (1, 2) or (logits.dim() == 3 and shape[2] == 1))
    if not ok or shape[0] != num_edges:
        raise ZooOpError(
            f"{name} has shape {list(shape)} but the graph has {num_edges} edges: "
            f"expected [{num_edges}], [{num_edges}, H] or [{num_edges}, H, 1]")
    if logits.device != graph.device:
        raise ZooOpError(f"{name} is on {logits.device} but the graph is on {graph.device}: "
                         "move one of them, e.g. graph.to(logits.device)")
    return logits.reshape(num_edges, shape[1] if len(shape) > 1 else 1), shape


def check_cpu_half(tensor, name):
    """DGL 2.1's CPU kernels have no float16: refuse it with the fix instead of a C++ error."""
    if tensor.dtype == torch.float16 and tensor.device.type == "cpu":
        raise ZooOpError(f"{name} is float16 on the CPU, where DGL's sparse kernels support only bfloat16, "
                         f"float32 and float64: cast it, e.g. {name}.float(), or run on a GPU")


def edge_param(value, name, x, shape, per_edge):
    """Normalise ``q`` / ``alpha`` to a float or a tensor broadcastable to ``x`` (``[E, H]``).

    Floats stay floats. Tensors become ``[1, 1]`` (one value), ``[1, H]`` (per head) or,
    when ``per_edge``, ``[E, 1]`` / ``[E, H]`` (per edge), cast to ``x``'s dtype.
    """
    if not torch.is_tensor(value):
        try:
            return float(value)
        except (TypeError, ValueError):
            raise ZooOpError(f"{name} must be a float or a tensor, got {value!r}") from None
    num_edges, heads = x.shape
    qshape = tuple(value.shape)
    if value.numel() == 1:
        out = value.reshape(1, 1)
    elif len(shape) > 1 and qshape in ((heads,), (heads, 1)):
        out = value.reshape(1, heads)
    elif per_edge and qshape[:1] == (num_edges,) and value.numel() in (num_edges, x.numel()) \
            and (len(shape) == 1 or value.dim() > 1):
        out = value.reshape(num_edges, -1)
    else:
        edge = f" or per edge {list(shape)}" if per_edge else ""
        raise ZooOpError(
            f"{name} has shape {list(qshape)}, which does not fit logits of shape {list(shape)}: "
            f"expected a float, a tensor with one value, per head [{heads}]{edge}")
    return out.to(device=x.device, dtype=x.dtype)


def check_param(value, name, low, low_ok):
    """Raise unless every entry of ``value`` is finite and ``> low`` (``>= low`` if ``low_ok``):
    :class:`NonFiniteScores` if an entry is NaN or infinite, else :class:`ZooOpError`."""
    vals = value.detach() if torch.is_tensor(value) else torch.tensor([value])
    finite = torch.isfinite(vals)
    bad = ~finite | ((vals < low) if low_ok else (vals <= low))
    if bool(bad.any()):
        sign = ">=" if low_ok else ">"
        error = ZooOpError if bool(finite.all()) else NonFiniteScores
        raise error(f"{name} must be finite and {sign} {low:g}; got {name} = "
                    f"{vals[bad].flatten()[:5].tolist()} (first bad values)")


def check_finite_sum(graph, total, name="logits"):
    """Raise if a per-destination sum ``[N, H]`` is not finite (NaN or +inf in ``name``)."""
    bad = ~torch.isfinite(total)
    if bool(bad.any()):
        nodes = bad.any(1).nonzero().flatten()[:5].tolist()
        raise NonFiniteScores(
            f"{name} contain NaN or +inf (or only -inf) on edges into destination node(s) {nodes}: "
            "scores must be finite, or -inf to mask an edge (check the layer producing them)")


def reduce_to(grad, like):
    """Sum an ``[E, H]`` gradient down to the broadcast shape of the parameter ``like``."""
    if like.shape[0] == 1:
        grad = grad.sum(0, keepdim=True)
    if like.shape[1] == 1:
        grad = grad.sum(1, keepdim=True)
    return grad


def expq_log_grads_(eps, d, need_eps):
    """Log-derivatives of ``exp_eps`` at ``d`` (``d`` is overwritten): ``(d/dd, d/d eps or None)``.

    With ``w = eps d``: ``d log exp_eps / dd = 1 / (1 + w)`` and ``d log exp_eps / d eps =
    [w / (1 + w) - log1p(w)] / eps^2``. The latter has an absolute rounding error of about
    ``machine_eps |d| / |eps|``, so where some ``|eps| < 0.05`` its series in ``w`` is used for
    ``|w| < 1e-2`` (limit ``-d^2 / 2`` at eps = 0). Off the support (``w <= -1``) both are large
    but finite, so a zero weight times them stays zero.
    """
    w = (d * eps).clamp_(min=-1 + torch.finfo(d.dtype).eps)
    rho = torch.add(w, 1).reciprocal_()
    if not need_eps:
        return rho, None
    series = None
    if bool((torch.as_tensor(eps).abs() < 0.05).any()):
        series = torch.zeros_like(w)
        for k in range(7, 1, -1):  # Horner on -d^2 sum_{k>=2} (-1)^k (k-1)/k w^(k-2)
            series.mul_(w).add_((-1) ** k * (k - 1) / k)
        series.mul_(d).mul_(d).neg_()
    small = None if series is None else w.abs() < 1e-2
    dlog = torch.mul(w, rho, out=d).sub_(w.log1p_())  # w / (1 + w) - log1p(w)
    eps2 = eps * eps
    dlog.div_(torch.where(eps2 == 0, 1.0, eps2) if torch.is_tensor(eps) else eps2)
    return rho, dlog if series is None else torch.where(small, series, dlog, out=dlog)


def log_bracket(eps, degree):
    """``(1 - degree^-eps) / eps`` (``log degree`` at eps = 0): the width of the threshold bracket."""
    logd = degree.log()
    if not torch.is_tensor(eps):
        return logd if eps == 0 else torch.expm1(-eps * logd).neg_().div_(eps)
    eps_safe = torch.where(eps == 0, 1.0, eps)
    return torch.where(eps == 0, logd, torch.expm1(-eps_safe * logd).neg_() / eps_safe)


def exp_flush_(y):
    """In place ``exp``; results below ~7.4x the smallest normal number become exactly 0.

    Subnormal results make ``exp`` some 50x slower on CPU, so the exponent is clamped first.
    """
    low = EXP_LOW[y.dtype]
    return torch.nn.functional.threshold_(y.clamp_(min=low).exp_(), math.exp(low) * 1.01, 0.0)


def expq_(d, eps):
    """In place: ``d <- exp_eps(d) = [1 + eps d]_+ ^ (1 / eps)`` for eps != 0 (float or tensor).

    Computed as ``exp(log1p(eps d) / eps)`` (accurate also for small ``|eps|``, underflow
    flushed to 0 by ``exp_flush_``); eps = 1 and 0.5 use the exact shortcuts ``relu``, ``square``.
    """
    if not torch.is_tensor(eps) and eps in (1.0, 0.5):
        d.mul_(eps).add_(1).relu_()
        return d.square_() if eps == 0.5 else d
    return exp_flush_(d.mul_(eps).clamp_(min=-1).log1p_().mul_(1 / eps))



def entmax_terms_(d, eps, slope):
    """From ``d = x - t`` (overwritten): ``p = exp_eps(d)`` and, if ``slope``, ``s = p / (1 + eps d)``
    (else None), the terms of the entmax threshold equation and of its derivative in ``t``."""
    if not slope:
        return expq_(d, eps), None
    if not torch.is_tensor(eps) and eps in (1.0, 0.5):
        u = d.mul_(eps).add_(1).relu_()
        return (u, u.sign()) if eps == 1 else (u.square(), u)
    w = d.mul_(eps)
    p = exp_flush_(w.clamp(min=-1).log1p_().mul_(1 / eps))
    s = w.add_(1).clamp_(min=torch.finfo(w.dtype).tiny)
    return p, torch.div(p, s, out=s)


def entmax_threshold(x, eps, *, lo, degree, total, diff, check, n_bisect, max_iter, name):
    """The threshold ``t`` with ``total(exp_eps(x - t)) = 1`` per group of scores (a destination's
    in-edges for the edge op, a row for the dense one), given the group reduction ``total``, the
    broadcast difference ``diff(x, t)``, each group's size ``degree`` and largest score ``lo``.

    ``n_bisect`` bisection steps on ``[lo, lo + (1 - degree^-eps) / eps]``, then Newton from the
    lower end, for a convex sum (eps <= 1); bisection to machine precision otherwise (see
    :func:`zoo.ops.edge_entmax`). ``check`` raises on a non-finite sum; ``name`` is the op's, for
    the warning if ``max_iter`` Newton steps do not converge.
    """
    width = log_bracket(eps, degree.clamp(min=1).to(x.dtype)).expand_as(lo)
    convex = not bool((torch.as_tensor(eps) > 1).any())
    precision = torch.finfo(x.dtype).eps
    for _ in range(n_bisect if convex else max_iter):
        width = width / 2
        mid = lo + width
        p, _ = entmax_terms_(diff(x, mid), eps, slope=False)
        lo = torch.where(total(p) >= 1, mid, lo)
        if not convex and bool((width <= precision * (1 + lo.abs())).all()):
            return lo
    if not convex:
        return lo
    t, sizes, sparse = lo, None, torch.as_tensor(eps) == 1
    for _ in range(max_iter):  # Newton from below: monotone for a convex decreasing sum
        p, s = entmax_terms_(diff(x, t), eps, slope=True)
        f = total(p).sub_(1)
        check(f)
        slope = total(s)
        step = torch.where(slope > 0, f / slope, 0.0)
        t = t + step
        sizes, last = torch.where(sparse, slope, 0.0), sizes  # support sizes (alpha = 2 groups)
        rel = float((step.abs() / (1 + t.abs())).max())
        stable = last is not None and torch.equal(sizes, last)
        if rel <= 8 * precision or (rel <= precision ** (2 / 3) and stable):  # rounding: a
            return t  # score within an ulp of the threshold may flip in and out of the support
    warn_not_converged(name, max_iter)
    return t


def warn_not_converged(name, max_iter):
    """The RuntimeWarning of an entmax threshold search that ran out of Newton steps."""
    warnings.warn(f"{name}: threshold not converged in max_iter={max_iter} Newton steps", RuntimeWarning)
