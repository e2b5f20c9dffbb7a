"""The dense, masked twins (zoo.ops.dense) against the edge ops on the equivalent graph, in float64:
the same weights, the same gradients for scores and for q / alpha; masked keys get exactly 0 and
change nothing; a row without keys is 0; plain formulas and gradcheck."""
import math

import dgl
import pytest
import torch

from zoo.ops import ZooOpError, edge_entmax, edge_qsoftmax, edge_sparsemax
from zoo.ops.dense import dense_entmax, dense_qsoftmax, dense_sparsemax

B, H, L = 3, 2, 6
SIZES = [6, 3, 1]  # real keys per block row; the rest is padding


def block(seed=0, dtype=torch.float64):
    """Scores [B, H, L, L] with -inf at padded keys, and the key mask [B, L]."""
    gen = torch.Generator().manual_seed(seed)
    scores = torch.randn(B, H, L, L, generator=gen, dtype=dtype) * 2
    mask = torch.arange(L)[None] < torch.tensor(SIZES)[:, None]
    return scores.masked_fill(~mask[:, None, None, :], -math.inf), mask


def as_edges(scores, mask):
    """The graph whose real node (b, i) has in-edges from its block row's real keys (a complete graph
    per block row), and the scores on it."""
    b, i, j = torch.nonzero(mask[:, :, None] & mask[:, None, :], as_tuple=True)
    graph = dgl.graph((b * L + j, b * L + i), num_nodes=B * L)
    return graph, scores.permute(0, 2, 3, 1)[b, i, j], (b, i, j)


def to_block(values, index):
    out = values.new_zeros(B, L, L, H)
    out[index] = values
    return out.permute(0, 3, 1, 2)


CASES = {
    "qsoftmax_fixed": (dense_qsoftmax, edge_qsoftmax, 1.6),
    "qsoftmax_heavy": (dense_qsoftmax, edge_qsoftmax, 0.6),
    "qsoftmax_head": (dense_qsoftmax, edge_qsoftmax, torch.tensor([1.4, 0.7], dtype=torch.float64)),
    "qsoftmax_taylor": (dense_qsoftmax, edge_qsoftmax, torch.tensor([1 + 3e-5, 1 - 2e-5], dtype=torch.float64)),
    # so small that 1 - (q - 1) d^2 / 2 needs no clamp for any d >= EXP_LOW (as float32 at 1e-4)
    "qsoftmax_taylor_small": (dense_qsoftmax, edge_qsoftmax, torch.tensor([1 + 2e-6, 1 - 3e-6], dtype=torch.float64)),
    # the q-gradient's series (|q - 1| < 0.05) on one head, on every head; q = 1 exactly (a learned q
    # at its start); one head in the Taylor branch and one not
    "qsoftmax_series_head": (dense_qsoftmax, edge_qsoftmax, torch.tensor([1 + 1e-3, 1.4], dtype=torch.float64)),
    "qsoftmax_series": (dense_qsoftmax, edge_qsoftmax, torch.tensor([1 + 1e-3, 1 - 2e-2], dtype=torch.float64)),
    "qsoftmax_one": (dense_qsoftmax, edge_qsoftmax, torch.tensor([1.0, 1.0], dtype=torch.float64)),
    "qsoftmax_taylor_and_not": (dense_qsoftmax, edge_qsoftmax, torch.tensor([1 + 3e-5, 1.3], dtype=torch.float64)),
    "entmax_fixed": (dense_entmax, edge_entmax, 1.5),
    "entmax_head": (dense_entmax, edge_entmax, torch.tensor([1.3, 1.8], dtype=torch.float64)),
    "entmax_wide": (dense_entmax, edge_entmax, 2.5),
    "entmax_one": (dense_entmax, edge_entmax, torch.tensor([1.0, 1.3], dtype=torch.float64)),  # 1: 1 + 1e-30
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_weights_and_gradients_equal_the_edge_op(case):
    dense_op, edge_op, index = CASES[case]
    scores, mask = block()
    grad_out = torch.randn(B, H, L, L, dtype=torch.float64, generator=torch.Generator().manual_seed(5))
    x = scores.clone().requires_grad_()
    idx = index.clone().requires_grad_() if torch.is_tensor(index) else index
    got = dense_op(x, idx.view(H, 1, 1) if torch.is_tensor(idx) else idx)
    got.backward(grad_out)

    graph, edge_scores, where = as_edges(scores, mask)
    y = edge_scores.clone().requires_grad_()
    jdx = index.clone().requires_grad_() if torch.is_tensor(index) else index
    want = edge_op(graph, y, jdx)
    want.backward(grad_out.permute(0, 2, 3, 1)[where])

    real = (mask[:, None, :, None] & mask[:, None, None, :]).expand(B, H, L, L)
    torch.testing.assert_close(got[real], to_block(want, where).detach()[real], atol=1e-12, rtol=0)
    torch.testing.assert_close(x.grad[real], to_block(y.grad, where)[real], atol=1e-11, rtol=0)
    padded = ~mask[:, None, None, :].expand(B, H, L, L)
    assert torch.equal(got[padded], torch.zeros_like(got[padded]))  # exactly 0
    assert torch.equal(x.grad[padded], torch.zeros_like(x.grad[padded]))
    if torch.is_tensor(index):
        # the dense op also normalises the padded query rows (discarded by a model); give them no
        # upstream gradient to compare the index's gradient with the edge op's
        idx.grad = None
        dense_op(scores, idx.view(H, 1, 1)).backward(grad_out * real)
        torch.testing.assert_close(idx.grad, jdx.grad, atol=1e-10, rtol=1e-9)


def test_sparsemax_is_the_edge_op_and_the_closed_form():
    scores, mask = block(seed=3)
    graph, edge_scores, where = as_edges(scores, mask)
    got = dense_sparsemax(scores)
    real = (mask[:, None, :, None] & mask[:, None, None, :]).expand(B, H, L, L)
    torch.testing.assert_close(got[real], to_block(edge_sparsemax(graph, edge_scores), where)[real], atol=1e-12, rtol=0)
    z = torch.tensor([1.0, 0.5, -2.0, -math.inf], dtype=torch.float64)  # by hand: tau = 0.25
    torch.testing.assert_close(dense_sparsemax(z), torch.tensor([0.75, 0.25, 0.0, 0.0], dtype=torch.float64))


def test_plain_formulas_on_one_row():
    """q-softmax (LTGA Eq. 2) and 1.5-entmax from their definitions; masked keys do not count."""
    z = torch.tensor([0.3, -0.4, 1.1, -2.5], dtype=torch.float64)
    masked = torch.cat([z, torch.tensor([-math.inf, -math.inf], dtype=torch.float64)])
    for q in (0.5, 1.7, 2.0):
        e = torch.clamp(1 + (q - 1) * (z - z.max()), min=0) ** (1 / (q - 1))
        torch.testing.assert_close(dense_qsoftmax(masked, q)[:4], e / e.sum(), atol=1e-14, rtol=0)
    p = dense_entmax(masked, 1.5)
    t = z.max() + 2 * (1 - p[2].sqrt())  # p_i = (1 + (z_i - t) / 2)^2 on the support, i = 2 the max
    torch.testing.assert_close(p[:4], torch.clamp(1 + 0.5 * (z - t), min=0) ** 2, atol=1e-12, rtol=0)
    torch.testing.assert_close(p.sum(), torch.tensor(1.0, dtype=torch.float64))
    assert p[4:].abs().max() == 0


def test_q_one_is_softmax_and_a_row_without_keys_is_zero():
    scores, mask = block(seed=2)
    soft = torch.softmax(scores, -1)
    torch.testing.assert_close(dense_qsoftmax(scores, torch.ones(H, 1, 1, dtype=torch.float64)), soft,
                               atol=1e-15, rtol=0)
    torch.testing.assert_close(dense_entmax(scores, 1.0), soft, atol=1e-15, rtol=0)
    empty = torch.full((2, 4), -math.inf, dtype=torch.float64)
    empty[0, :2] = torch.tensor([0.2, -0.1])
    for out in (dense_qsoftmax(empty, 1.5), dense_entmax(empty, 1.5), dense_sparsemax(empty)):
        assert torch.equal(out[1], torch.zeros(4, dtype=torch.float64)) and abs(float(out[0].sum()) - 1) < 1e-12


@pytest.mark.parametrize("op,index", [(dense_qsoftmax, 1.3), (dense_qsoftmax, 0.8), (dense_entmax, 1.4)])
def test_gradcheck_scores_and_index(op, index):
    gen = torch.Generator().manual_seed(4)
    x = torch.randn(2, 5, dtype=torch.float64, generator=gen).requires_grad_()
    idx = torch.tensor([[index], [index + 0.1]], dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda a, b: op(a, b), (x, idx))


def test_bad_inputs_are_named():
    x = torch.randn(2, 3)
    with pytest.raises(ZooOpError, match="q must be finite and > 0"):
        dense_qsoftmax(x, 0.0)
    with pytest.raises(ZooOpError, match="alpha must be finite and >= 1"):
        dense_entmax(x, 0.5)
    with pytest.raises(ZooOpError, match=r"does not broadcast"):
        dense_qsoftmax(x, torch.ones(4))
    with pytest.raises(ZooOpError, match="NaN or \\+inf"):
        dense_qsoftmax(torch.tensor([[0.0, math.nan]]), 1.5)
    with pytest.raises(ZooOpError, match="float32, float64"):
        dense_entmax(torch.ones(2, 3, dtype=torch.long), 1.5)


@pytest.mark.parametrize("q", [(1 + 3e-4, 1 - 5e-4), (1 + 3e-4, 1.4)], ids=["every_head", "one_head"])
def test_float32_q_gradient_near_one_matches_the_formula(q):
    """Near q = 1 the q-gradient's direct formula cancels (error ~ 1e-7 |x| / |q - 1|, here ~1e-4);
    its series keeps float32 at rounding level (~1e-7). Reference: LTGA Eq. 2 written out in float64
    under autograd (there the cancellation costs ~1e-16 / |q - 1|, below 1e-11)."""
    scores, mask = block(seed=1, dtype=torch.float32)
    scores = scores / 2  # |q - 1| |x - max| < 1e-2: the series' range
    grad_out = torch.randn(B, H, L, L, generator=torch.Generator().manual_seed(6))
    index = torch.tensor(q)

    z = scores.double().requires_grad_()
    eps = (index.double().view(H, 1, 1) - 1).requires_grad_()
    real = mask[:, None, None, :]
    w = eps * torch.where(real, z - z.amax(-1, keepdim=True), 0.0)
    inside = real & (w > -1)  # [1 + w]_+ ^ (1 / eps), 0 off the support and at padding
    e = torch.where(inside, torch.exp(torch.log1p(torch.where(inside, w, 0.0)) / eps), 0.0)
    want = e / e.sum(-1, keepdim=True)
    want.backward(grad_out.double())

    x, idx = scores.clone().requires_grad_(), index.clone().requires_grad_()
    got = dense_qsoftmax(x, idx.view(H, 1, 1))
    got.backward(grad_out)
    torch.testing.assert_close(got.double(), want.detach(), atol=1e-6, rtol=0)
    torch.testing.assert_close(x.grad.double(), z.grad, atol=1e-6, rtol=0)
    torch.testing.assert_close(idx.grad.double(), eps.grad.flatten(), atol=5e-6, rtol=0)


def test_float32_alpha_of_one_has_the_float64_gradients():
    """A tensor alpha of exactly 1 is evaluated at 1 + 1e-30, whose square underflows in float32 (that
    case takes the edge helpers): its gradients still equal float64's, up to float32 rounding."""
    scores, _ = block(seed=2, dtype=torch.float32)
    grad_out = torch.randn(B, H, L, L, generator=torch.Generator().manual_seed(7))
    grads = []
    for dtype in (torch.float32, torch.float64):
        x = scores.to(dtype).detach().requires_grad_()
        alpha = torch.tensor([1.0, 1.3], dtype=dtype, requires_grad=True)
        dense_entmax(x, alpha.view(H, 1, 1)).backward(grad_out.to(dtype))
        grads.append((x.grad, alpha.grad))
    (x32, alpha32), (x64, alpha64) = grads
    assert torch.isfinite(alpha32).all()
    torch.testing.assert_close(x32.double(), x64, atol=1e-6, rtol=0)
    torch.testing.assert_close(alpha32.double(), alpha64, atol=1e-5, rtol=1e-5)
