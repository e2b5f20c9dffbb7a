"""edge_entmax against entmax.entmax_bisect per neighbourhood, gradcheck, limits and errors."""
import dgl
import pytest
import torch
from dgl.nn.functional import edge_softmax

from tests.ops.graphs import make_graph, per_node
from zoo.ops import ZooOpError, edge_entmax

pytestmark = pytest.mark.usefixtures("op_path")  # fused kernels and pure torch alike

entmax = pytest.importorskip("entmax")


def logits_for(graph, heads=2, seed=1, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(graph.num_edges(), heads, generator=gen, dtype=dtype) * 2


BIG = make_graph([1, 500, 0, 2, 37, 3, 120, 0, 1, 9, 260, 4], seed=2)


@pytest.mark.parametrize("alpha", [1.2, 1.5, 1.8, 2.0, 3.0])
def test_matches_entmax_bisect_values_and_gradients(alpha):
    z = logits_for(BIG).requires_grad_()
    a = torch.tensor([alpha, 1 + (alpha - 1) / 2], dtype=z.dtype, requires_grad=True)
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(3))
    out = edge_entmax(BIG, z, a)
    ref = per_node(BIG, z, lambda s: entmax.entmax_bisect(s, a.view(-1, 1), dim=-1, n_iter=80))
    torch.testing.assert_close(out, ref, atol=1e-6, rtol=0)
    got = torch.autograd.grad((out * w).sum(), (z, a))
    want = torch.autograd.grad((ref * w).sum(), (z, a))
    for g, r in zip(got, want):
        torch.testing.assert_close(g, r, atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("alpha", [1.3, 1.5, 2.0, 2.5])
def test_float_alpha_matches_tensor_alpha(alpha):
    """The float shortcuts (alpha = 1.5, 2, other) agree with the generic per-head path."""
    z = logits_for(BIG).requires_grad_()
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(5))
    outs = [edge_entmax(BIG, z, a) for a in (alpha, torch.tensor([alpha, alpha], dtype=z.dtype))]
    torch.testing.assert_close(outs[0], outs[1], atol=1e-12, rtol=0)
    grads = [torch.autograd.grad((out * w).sum(), z)[0] for out in outs]
    torch.testing.assert_close(grads[0], grads[1], atol=1e-10, rtol=0)


def test_alpha_two_is_sparsemax():
    z = logits_for(BIG)
    ref = per_node(BIG, z, lambda s: entmax.sparsemax(s, dim=-1))
    torch.testing.assert_close(edge_entmax(BIG, z, 2.0), ref, atol=1e-12, rtol=0)


def test_alpha_one_is_softmax_and_limit():
    z = logits_for(BIG)
    soft = edge_softmax(BIG, z)
    torch.testing.assert_close(edge_entmax(BIG, z, 1.0), soft, atol=1e-12, rtol=0)
    torch.testing.assert_close(edge_entmax(BIG, z, torch.ones(2)), soft, atol=1e-12, rtol=0)
    errors = [float((edge_entmax(BIG, z, 1 + eps) - soft).abs().max()) for eps in (1e-1, 1e-2, 1e-3, 1e-5)]
    assert errors == sorted(errors, reverse=True) and errors[-1] < 1e-4


def test_alpha_gradient_at_one_matches_one_sided_difference():
    z = logits_for(BIG)
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(4))
    a = torch.ones(2, dtype=z.dtype, requires_grad=True)
    grad = torch.autograd.grad((edge_entmax(BIG, z, a) * w).sum(), a)[0]
    h = 1e-6
    loss = lambda alpha: (edge_entmax(BIG, z, alpha) * w).sum(0)  # noqa: E731 - per head
    fd = (loss(torch.full((2,), 1 + h, dtype=z.dtype)) - loss(a.detach())) / h
    torch.testing.assert_close(grad, fd, rtol=1e-3, atol=1e-6)


@pytest.mark.parametrize("alpha", [[1.3, 1.7], [2.0, 2.5], [1.5, 1.5]])
def test_gradcheck(alpha):
    graph = make_graph([2, 0, 4, 1, 6, 3], seed=4)
    z = logits_for(graph, seed=6).requires_grad_()
    a = torch.tensor(alpha, dtype=z.dtype, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, y: edge_entmax(graph, x, y), (z, a), atol=1e-8, rtol=1e-6)


def test_float32_and_shapes():
    z = logits_for(BIG)
    ref = edge_entmax(BIG, z, 1.5)
    out = edge_entmax(BIG, z.float(), 1.5)
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(edge_entmax(BIG, z[:, :1], 1.5)[:, 0], edge_entmax(BIG, z[:, 0], 1.5))
    assert edge_entmax(BIG, z.unsqueeze(-1), torch.tensor([1.5, 1.2])).shape == (BIG.num_edges(), 2, 1)


def test_sums_to_one_and_empty_nodes():
    z = logits_for(BIG).requires_grad_()
    out = edge_entmax(BIG, z, 1.5)
    sums = dgl.ops.copy_e_sum(BIG, out)
    has_edges = BIG.in_degrees() > 0
    torch.testing.assert_close(sums[has_edges], torch.ones_like(sums[has_edges]), atol=1e-12, rtol=0)
    assert (sums[~has_edges] == 0).all()
    out.sum().backward()
    assert torch.isfinite(z.grad).all()


def test_errors():
    z = logits_for(BIG)
    with pytest.raises(ZooOpError, match=r"alpha must be finite and >= 1; got alpha = \[0.5\]"):
        edge_entmax(BIG, z, 0.5)
    with pytest.raises(ZooOpError, match=r"alpha = \[inf\]"):
        edge_entmax(BIG, z, torch.tensor([1.5, float("inf")]))
    e = BIG.num_edges()
    with pytest.raises(ZooOpError, match=rf"alpha has shape \[{e}, 2\], which does not fit"):
        edge_entmax(BIG, z, torch.full(z.shape, 1.5))
    with pytest.raises(ZooOpError, match=rf"logits has shape \[{e}, 2, 2\] but the graph has {e} edges"):
        edge_entmax(BIG, z.unsqueeze(-1).expand(-1, -1, 2), 1.5)
    bad = z.clone()
    bad[BIG.in_edges(4, form="eid")[3], 0] = float("nan")
    with pytest.raises(ZooOpError, match=r"NaN or \+inf \(or only -inf\) on edges into destination node\(s\) \[4\]"):
        edge_entmax(BIG, bad, 1.5)


def test_blocks_and_empty_graphs():
    z = logits_for(BIG)
    block = dgl.to_block(BIG, dst_nodes=(BIG.in_degrees() > 0).nonzero().flatten())
    eid = block.edata[dgl.EID]
    for alpha in (1.5, torch.tensor([1.2, 3.0], dtype=z.dtype)):
        torch.testing.assert_close(edge_entmax(block, z[eid], alpha), edge_entmax(BIG, z, alpha)[eid])
    empty = torch.zeros(0, 2, requires_grad=True)
    out = edge_entmax(dgl.graph(([], []), num_nodes=2), empty, torch.tensor([1.2, 3.0]))
    out.sum().backward()
    assert out.shape == empty.grad.shape == (0, 2)


@pytest.mark.parametrize("alpha", [1.0, 1.5, 2.0, [1.3, 2.6]])
def test_minus_inf_masks_an_edge(alpha):
    """-inf logits get weight 0; the rest equals the op on the graph without those edges."""
    alpha = torch.tensor(alpha, dtype=torch.float64, requires_grad=True) if isinstance(alpha, list) else alpha
    z = logits_for(BIG)
    masked = torch.zeros(z.shape[0], dtype=torch.bool)
    masked[BIG.in_edges(1, form="eid")[::3]] = masked[BIG.in_edges(4, form="eid")[0]] = True
    zm = z.masked_fill(masked[:, None], float("-inf")).requires_grad_()
    out = edge_entmax(BIG, zm, alpha)
    assert (out[masked] == 0).all()
    (out * torch.arange(out.numel(), dtype=out.dtype).view(out.shape)).sum().backward()
    assert torch.isfinite(zm.grad).all() and (zm.grad[masked] == 0).all()
    assert not torch.is_tensor(alpha) or torch.isfinite(alpha.grad).all()
    sub = dgl.edge_subgraph(BIG, (~masked).nonzero().flatten(), relabel_nodes=False)
    torch.testing.assert_close(out[~masked], edge_entmax(sub, z[~masked], alpha), atol=1e-12, rtol=0)
