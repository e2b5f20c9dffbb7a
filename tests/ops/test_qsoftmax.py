"""edge_qsoftmax against edge_softmax, a dense per-node reference, gradcheck and its error messages."""
import dgl
import pytest
import torch
from dgl.nn.functional import edge_softmax

from tests.ops.graphs import make_graph
from zoo.ops import NonFiniteScores, ZooOpError, edge_qsoftmax

pytestmark = pytest.mark.usefixtures("op_path")  # fused kernels and pure torch alike

H = 3


def reference(graph, z, q):
    """Dense q-softmax per destination node, written plainly; z [E, H], q broadcastable to [E, H]."""
    q = torch.as_tensor(q, dtype=z.dtype).expand_as(z)
    dst = graph.edges()[1]
    out = torch.zeros_like(z)
    for v in range(graph.num_nodes()):
        idx = (dst == v).nonzero().flatten()
        if len(idx) == 0:
            continue
        x = z[idx] - z[idx].max(0).values
        qv = q[idx]
        exact = torch.clamp(1 + (qv - 1) * x, min=0) ** (1 / (qv - 1))
        e = torch.where(qv == 1, torch.exp(x), exact)
        out = out.index_put((idx,), e / e.sum(0))
    return out


@pytest.fixture
def graph():
    return make_graph([3, 0, 1, 7, 2, 0, 12, 5, 1, 4])


def logits_for(graph, heads=H, seed=1, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(graph.num_edges(), heads, generator=gen, dtype=dtype) * 2


def test_q_one_is_edge_softmax(graph):
    z = logits_for(graph)
    torch.testing.assert_close(edge_qsoftmax(graph, z, 1.0), edge_softmax(graph, z), atol=1e-12, rtol=0)


@pytest.mark.parametrize("q", [0.5, 0.8, 1.2, 1.5, 2.0, 3.0])
def test_matches_dense_reference(graph, q):
    z = logits_for(graph)
    torch.testing.assert_close(edge_qsoftmax(graph, z, q), reference(graph, z, q), atol=1e-12, rtol=0)


def test_per_head_and_per_edge_q(graph):
    z = logits_for(graph)
    q_head = torch.tensor([0.6, 1.0, 1.7], dtype=z.dtype)
    torch.testing.assert_close(edge_qsoftmax(graph, z, q_head), reference(graph, z, q_head))
    q_edge = 0.5 + torch.rand(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(3))
    torch.testing.assert_close(edge_qsoftmax(graph, z, q_edge), reference(graph, z, q_edge))


@pytest.mark.parametrize("q", [1.2, 1.5, 2.0, 4.0])
def test_prop1_exact_zeros(graph, q):
    z = logits_for(graph)
    p = edge_qsoftmax(graph, z, q)
    cutoff = dgl.ops.copy_e_max(graph, z)[graph.edges()[1]] - 1 / (q - 1)
    zero = z <= cutoff
    assert zero.any() and (p[zero] == 0).all()
    assert (p[~zero] > 0).all()


def test_shapes_1d_and_trailing_one(graph):
    z = logits_for(graph, heads=1)
    ref = edge_qsoftmax(graph, z, 1.5)
    torch.testing.assert_close(edge_qsoftmax(graph, z[:, 0], 1.5), ref[:, 0])
    z3 = logits_for(graph).unsqueeze(-1)
    assert edge_qsoftmax(graph, z3, torch.tensor([1.2, 1.5, 2.0])).shape == z3.shape
    q_edge = torch.full((graph.num_edges(),), 1.5, dtype=z.dtype)
    torch.testing.assert_close(edge_qsoftmax(graph, z[:, 0], q_edge), ref[:, 0])


def test_float32_matches_float64(graph):
    z = logits_for(graph)
    for q in (0.7, 1.0, 1.5):
        out = edge_qsoftmax(graph, z.float(), q)
        assert out.dtype == torch.float32
        torch.testing.assert_close(out.double(), edge_qsoftmax(graph, z, q), atol=1e-6, rtol=0)


def test_gradients_match_reference_with_empty_nodes(graph):
    """Gradient of the max shift flows; zero-in-degree nodes leak nothing into edge 0."""
    z = logits_for(graph).requires_grad_()
    q = torch.tensor([0.6, 1.3, 1.9], dtype=z.dtype, requires_grad=True)
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(5))
    got = torch.autograd.grad((edge_qsoftmax(graph, z, q) * w).sum(), (z, q))
    want = torch.autograd.grad((reference(graph, z, q) * w).sum(), (z, q))
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=0)


@pytest.mark.parametrize("kind", ["scalar", "head", "edge", "taylor", "mixed"])
def test_gradcheck(kind):
    graph = make_graph([2, 0, 4, 1, 6, 3], seed=4)
    z = logits_for(graph, seed=6).requires_grad_()
    gen = torch.Generator().manual_seed(7)
    q = {"scalar": torch.tensor(1.4, dtype=z.dtype),
         "head": torch.tensor([0.6, 1.3, 1.7], dtype=z.dtype),
         "edge": 0.6 + torch.rand(z.shape, generator=gen, dtype=z.dtype),
         "taylor": torch.tensor([1 + 5e-5, 1 - 3e-5, 1.0], dtype=z.dtype),
         "mixed": torch.tensor([1 + 5e-5, 0.8, 1.5], dtype=z.dtype)}[kind].requires_grad_()
    assert torch.autograd.gradcheck(lambda a, b: edge_qsoftmax(graph, a, b), (z, q), atol=1e-9, rtol=1e-7)


def _loss_and_dq(graph, z, w, q):
    q = torch.tensor(q, dtype=z.dtype, requires_grad=True)
    loss = (edge_qsoftmax(graph, z, q) * w).sum()
    return loss.detach(), torch.autograd.grad(loss, q)[0]


@pytest.mark.parametrize("side", [1.0, -1.0])
def test_taylor_branch_is_continuous(graph, side):
    z = logits_for(graph).clamp(-3, 3)
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(8))
    inside = _loss_and_dq(graph, z, w, 1 + side * 1e-4 * (1 - 1e-9))
    outside = _loss_and_dq(graph, z, w, 1 + side * 1e-4 * (1 + 1e-9))
    torch.testing.assert_close(inside[0], outside[0], atol=1e-7, rtol=0)
    torch.testing.assert_close(inside[1], outside[1], atol=5e-3 * abs(float(inside[1])), rtol=0)


def test_dq_at_one_matches_finite_differences(graph):
    """Regression against a silent sign flip: exact formula at 1 +- h, outside the Taylor branch."""
    z = logits_for(graph)
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(9))
    h = 1e-3
    fd = ((reference(graph, z, 1 + h) - reference(graph, z, 1 - h)) * w).sum() / (2 * h)
    _, dq = _loss_and_dq(graph, z, w, 1.0)
    assert abs(float(fd)) > 1e-3 and torch.sign(dq) == torch.sign(fd)
    torch.testing.assert_close(dq, fd, rtol=1e-4, atol=0)


def test_errors(graph):
    z = logits_for(graph)
    with pytest.raises(ZooOpError, match=r"q must be finite and > 0; got q = \[0.0\]"):
        edge_qsoftmax(graph, z, 0.0)
    with pytest.raises(ZooOpError, match=r"q = \[-0.5\]"):
        edge_qsoftmax(graph, z, torch.tensor([1.0, -0.5, 2.0]))
    with pytest.raises(ZooOpError, match=r"q = \[nan\]"):
        edge_qsoftmax(graph, z, float("nan"))
    # a NaN in a learned per-edge q (computed from the inputs, as LTGA-Edge's) is an overflow, as NaN scores are
    q = torch.full((graph.num_edges(), 3), 1.5)
    q[4, 1] = float("nan")
    with pytest.raises(NonFiniteScores, match=r"q = \[nan\]"):
        edge_qsoftmax(graph, z, q)
    with pytest.raises(ZooOpError) as domain:
        edge_qsoftmax(graph, z, q.nan_to_num(-0.5))
    assert not isinstance(domain.value, NonFiniteScores)  # finite but outside the domain: the caller's error
    with pytest.raises(ZooOpError, match=r"logits has shape \[5, 3\] but the graph has 35 edges"):
        edge_qsoftmax(graph, z[:5], 1.5)
    with pytest.raises(ZooOpError, match=r"q has shape \[4\], which does not fit logits of shape \[35, 3\]"):
        edge_qsoftmax(graph, z, torch.ones(4))
    bad = z.clone()
    bad[graph.in_edges(6, form="eid")[0], 1] = float("nan")
    with pytest.raises(ZooOpError, match=r"logits contain NaN or \+inf \(or only -inf\) on edges into \D+ \[6\]"):
        edge_qsoftmax(graph, bad, 1.5)
    with pytest.raises(ZooOpError, match="floating-point"):
        edge_qsoftmax(graph, z.long(), 1.5)


def test_blocks_and_empty_graphs(graph):
    z = logits_for(graph)
    block = dgl.to_block(graph, dst_nodes=(graph.in_degrees() > 0).nonzero().flatten())
    eid = block.edata[dgl.EID]
    torch.testing.assert_close(edge_qsoftmax(block, z[eid], 1.5), edge_qsoftmax(graph, z, 1.5)[eid])
    empty = torch.zeros(0, H, requires_grad=True)
    out = edge_qsoftmax(dgl.graph(([], []), num_nodes=2), empty, torch.full((H,), 1.5))
    out.sum().backward()
    assert out.shape == empty.grad.shape == (0, H)


@pytest.mark.parametrize("q", [0.5, 1.0, 1.5, [1 + 5e-5, 1 - 5e-5, 1.0], [1 + 5e-5, 0.7, 1.6]])
def test_minus_inf_masks_an_edge(graph, q):
    """-inf logits get weight 0; head 0 equals the op on the graph without its masked edges."""
    q = torch.tensor(q, dtype=torch.float64, requires_grad=True) if isinstance(q, list) else q
    z = logits_for(graph)
    masked = torch.zeros(z.shape, dtype=torch.bool)
    masked[graph.in_edges(6, form="eid")[:4], 0] = masked[graph.in_edges(3, form="eid")[1], 2] = True
    zm = z.masked_fill(masked, float("-inf")).requires_grad_()
    out = edge_qsoftmax(graph, zm, q)
    assert (out[masked] == 0).all()
    (out * torch.arange(out.numel(), dtype=out.dtype).view(out.shape)).sum().backward()
    assert torch.isfinite(zm.grad).all() and (zm.grad[masked] == 0).all()
    assert not torch.is_tensor(q) or torch.isfinite(q.grad).all()
    keep = (~masked[:, 0]).nonzero().flatten()
    sub = dgl.edge_subgraph(graph, keep, relabel_nodes=False)
    q0 = q.detach()[0] if torch.is_tensor(q) else q
    torch.testing.assert_close(out[keep, 0], edge_qsoftmax(sub, z[keep, 0], q0), atol=1e-12, rtol=0)
