"""The synthetic stable-rank study against quadrature, SVD and the paper's Section 5 claims."""
import math

import pytest
import torch
from scipy import integrate, stats

from zoo.analysis.gate_diagnostics import stable_rank
from zoo.analysis.synthetic_rank import calibrate_gate, gate_moments, rank_study, rank_trial


def _quad_moments(scale, bias):
    f = lambda z, k: (1 / (1 + math.exp(-(bias + scale * z)))) ** k * stats.norm.pdf(z)  # noqa: E731
    m1 = integrate.quad(f, -12, 12, args=(1,), epsabs=1e-13)[0]
    m2 = integrate.quad(f, -12, 12, args=(2,), epsabs=1e-13)[0]
    return m1, math.sqrt(m2 - m1**2)


@pytest.mark.parametrize("scale, bias", [(0.9, 0.4), (2.5, -1.0), (0.1, 3.0)])
def test_gate_moments_match_quadrature(scale, bias):
    assert gate_moments(scale, bias) == pytest.approx(_quad_moments(scale, bias), abs=1e-9)


def test_calibration_hits_the_targets_and_refuses_impossible_ones():
    scale, bias = calibrate_gate(0.58, 0.19)
    assert _quad_moments(scale, bias) == pytest.approx((0.58, 0.19), abs=1e-8)
    with pytest.raises(ValueError, match="cannot have mean 0.5 and sd 0.6"):
        calibrate_gate(0.5, 0.6)


def test_a_constant_gate_leaves_the_stable_rank_unchanged():
    """A gate equal on every coordinate rescales Y: its stable rank cannot move (Prop. 5.2's premise)."""
    for gate in [(0.0, 0.3), (0.0, 40.0)]:
        trial = rank_trial(1, gate=gate)
        assert trial["gated"] == pytest.approx(trial["ungated"], rel=1e-12)
        assert trial["gate_sd"] < 1e-12


def test_stable_rank_is_the_svd_ratio():
    m = torch.randn(64, 32, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    s = torch.linalg.svdvals(m)
    assert stable_rank(m) == pytest.approx(float((s**2).sum() / s[0] ** 2), rel=1e-12)


def test_gate_raises_the_stable_rank_in_every_seed_as_the_paper_reports():
    """Table 1: 'gating increases the stable rank in every seed'; the attained gate statistics
    match the calibration targets."""
    study = rank_study(range(5))
    assert all(g > u for g, u in zip(study["gated"], study["ungated"]))
    assert study["gate_mean"] == pytest.approx(0.58, abs=0.01) and study["gate_sd"] == pytest.approx(0.19, abs=0.01)


def test_the_rank_bound_of_prop_5_1_does_not_hold_in_general():
    """srank(AV) <= srank(V) is stated as Proposition 5.1; a 2 x 2 row-stochastic A breaks it,
    which is why the study measures the gate's effect instead of citing the bound."""
    v = torch.tensor([[10.0, 0.0], [0.0, 1.0]], dtype=torch.float64)
    a = torch.tensor([[0.05, 0.95], [0.0, 1.0]], dtype=torch.float64)
    assert stable_rank(a @ v) > stable_rank(v) + 0.05


def test_bad_settings_are_named():
    with pytest.raises(ValueError, match="dim 100 is not divisible by heads 8"):
        rank_trial(0, dim=100)
    with pytest.raises(ValueError, match=r"masked is 1.0; it must be in \[0, 1\)"):
        rank_trial(0, masked=1.0)
