"""The SigGate-GT paper's synthetic stable-rank study (Section 5.4-5.5, Tables 1-2).

One trial: ``n`` nodes with unit-variance hidden states ``X`` [n, d], random per-head Q/K/V
projections (entries N(0, 1/d), so projected features have unit variance), masked softmax
attention with logits ``c * q k^T / sqrt(d_k)`` and a fraction ``rho`` of the off-diagonal
(query, key) pairs masked (every node keeps itself, so no row is empty), per-head outputs
``Y_h = A_h V_h`` and the output gate ``g = sigmoid(X W_g + b)`` whose scale and bias are
calibrated so that the gate's marginal mean and sd match the trained-model targets
(0.58, 0.19, the paper's Section 8). The result is the stable rank
``||M||_F^2 / ||M||_2^2`` of ``Y_h`` and of ``Y_h * g_h``, averaged over heads.

The paper does not state the projection scale or how the mask is drawn; the choices above are
ours, so absolute stable ranks may differ from its Table 1 while the comparison (gated against
ungated on the same draw) is what the study measures. Everything runs in float64.

>>> trial = rank_trial(seed=0)
>>> trial["gated"] > trial["ungated"]
True
"""
from __future__ import annotations

import math

import numpy as np
import torch
from scipy import optimize

from zoo.analysis.gate_diagnostics import stable_rank

GATE_TARGET = (0.58, 0.19)
"""Mean and sd of trained gate activations the paper calibrates to (its Section 8)."""

_NODES, _WEIGHTS = np.polynomial.hermite_e.hermegauss(128)  # E[f(Z)], Z ~ N(0, 1)
_WEIGHTS = _WEIGHTS / _WEIGHTS.sum()


def gate_moments(scale: float, bias: float) -> tuple[float, float]:
    """Mean and sd of ``sigmoid(bias + scale * Z)`` for ``Z ~ N(0, 1)`` (Gauss-Hermite, 128 nodes)."""
    values = 1 / (1 + np.exp(-(bias + scale * _NODES)))
    mean = float(_WEIGHTS @ values)
    return mean, math.sqrt(max(float(_WEIGHTS @ values**2) - mean**2, 0.0))


def calibrate_gate(mean: float = GATE_TARGET[0], sd: float = GATE_TARGET[1]) -> tuple[float, float]:
    """``(scale, bias)`` with ``gate_moments(scale, bias) == (mean, sd)``.

    >>> scale, bias = calibrate_gate()
    >>> [round(m, 6) for m in gate_moments(scale, bias)]
    [0.58, 0.19]
    """
    if not (0 < mean < 1 and 0 < sd < math.sqrt(mean * (1 - mean))):
        raise ValueError(f"a sigmoid gate cannot have mean {mean} and sd {sd}: need 0 < mean < 1 and "
                         f"0 < sd < sqrt(mean (1 - mean)) = {math.sqrt(mean * (1 - mean)):.3f}")
    logit = math.log(mean / (1 - mean))
    solution = optimize.root(lambda p: np.subtract(gate_moments(*p), (mean, sd)), x0=[1.0, logit], tol=1e-12)
    if not solution.success:
        raise RuntimeError(f"gate calibration did not converge: {solution.message}")
    scale, bias = solution.x
    return float(abs(scale)), float(bias)


def rank_trial(seed: int, *, nodes: int = 64, dim: int = 256, heads: int = 8, concentration: float = 1.0,
               masked: float = 0.2, gate: tuple[float, float] | None = None) -> dict:
    """One draw of the study: mean stable rank over heads without and with the gate, and the
    attained gate mean and sd. ``gate`` is a calibrated ``(scale, bias)`` (default: the targets)."""
    if dim % heads:
        raise ValueError(f"dim {dim} is not divisible by heads {heads}")
    if not 0 <= masked < 1:
        raise ValueError(f"masked is {masked}; it must be in [0, 1)")
    scale, bias = gate if gate is not None else calibrate_gate()
    gen = torch.Generator().manual_seed(seed)
    d_k = dim // heads

    def projection(width):
        return torch.randn(dim, width, generator=gen, dtype=torch.float64) / math.sqrt(dim)

    x = torch.randn(nodes, dim, generator=gen, dtype=torch.float64)
    q, k, v = (x @ projection(dim) for _ in range(3))
    split = lambda t: t.reshape(nodes, heads, d_k).transpose(0, 1)  # noqa: E731  [H, n, d_k]
    logits = concentration * split(q) @ split(k).transpose(1, 2) / math.sqrt(d_k)
    drop = torch.rand(heads, nodes, nodes, generator=gen, dtype=torch.float64) < masked
    drop &= ~torch.eye(nodes, dtype=torch.bool)
    y = torch.softmax(logits.masked_fill(drop, -math.inf), dim=-1) @ split(v)
    g = split(torch.sigmoid(bias + scale * (x @ projection(dim))))
    return {"ungated": sum(stable_rank(h) for h in y) / heads,
            "gated": sum(stable_rank(h) for h in y * g) / heads,
            "gate_mean": float(g.mean()), "gate_sd": float(g.std())}


def rank_study(seeds=range(5), **setting) -> dict:
    """Trials over ``seeds`` with the same setting; ``gain`` is the relative change of the mean
    stable rank in percent, as the paper reports it."""
    gate = calibrate_gate()
    trials = [rank_trial(seed, gate=gate, **setting) for seed in seeds]
    ungated = [t["ungated"] for t in trials]
    gated = [t["gated"] for t in trials]
    return {"seeds": list(seeds), "trials": trials, "ungated": ungated, "gated": gated,
            "gain": 100 * (np.mean(gated) / np.mean(ungated) - 1),
            "gate_mean": float(np.mean([t["gate_mean"] for t in trials])),
            "gate_sd": float(np.mean([t["gate_sd"] for t in trials]))}
