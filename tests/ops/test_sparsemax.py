"""edge_sparsemax against entmax.sparsemax per neighbourhood, exactness, gradcheck and errors."""
import dgl
import pytest
import torch

from tests.ops.graphs import make_graph, per_node
from zoo.ops import ZooOpError, edge_sparsemax

pytestmark = pytest.mark.usefixtures("op_path")  # fused kernels and pure torch alike

entmax = pytest.importorskip("entmax")


def logits_for(graph, heads=3, seed=1, dtype=torch.float64):
    gen = torch.Generator().manual_seed(seed)
    return torch.randn(graph.num_edges(), heads, generator=gen, dtype=dtype) * 2


GRAPH = make_graph([1, 500, 0, 2, 37, 3, 120, 0, 1, 9, 260, 4], seed=2)


def test_matches_entmax_sparsemax_values_and_gradients():
    z = logits_for(GRAPH).requires_grad_()
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(3))
    out = edge_sparsemax(GRAPH, z)
    ref = per_node(GRAPH, z, lambda s: entmax.sparsemax(s, dim=-1))
    torch.testing.assert_close(out, ref, atol=1e-12, rtol=0)
    got, = torch.autograd.grad((out * w).sum(), z)
    want, = torch.autograd.grad((ref * w).sum(), z)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)


def test_threshold_is_exact_on_support():
    """p_i = z_i - tau with tau = (sum_S z - 1) / |S| to rounding, and z_j <= tau off S."""
    z = logits_for(GRAPH) * 10
    p = edge_sparsemax(GRAPH, z)
    on = (p > 0).to(z.dtype)
    tau = (dgl.ops.copy_e_sum(GRAPH, z * on) - 1) / dgl.ops.copy_e_sum(GRAPH, on)
    tau_e = tau[GRAPH.edges()[1]]
    torch.testing.assert_close(p[p > 0], (z - tau_e)[p > 0], atol=1e-12, rtol=0)
    assert (z[p == 0] <= tau_e[p == 0]).all()


def test_support_change_with_tiny_step_is_still_exact():
    """Bisection ends 1e-9 below tau while a third score leaves the support on the next step."""
    t0 = 100 * (2 / 3) / 256  # a lower bisection point for a degree-3 node (width 2/3, 8 steps)
    tau = t0 + 1e-9
    z = torch.tensor([0.0, 2 * tau - 1, t0 + 0.5e-9 - 1], dtype=torch.float64)
    p = edge_sparsemax(dgl.graph(([0, 0, 0], [0, 0, 0])), z, n_bisect=8)
    torch.testing.assert_close(p, torch.tensor([1 - tau, tau, 0.0], dtype=z.dtype), atol=1e-15, rtol=0)


def test_ties_degree_one_and_empty_nodes():
    graph = dgl.graph(([0, 1, 2, 2, 3], [1, 1, 1, 2, 3]), num_nodes=5)  # node 0, 4: no in-edges
    z = torch.tensor([2.0, 2.0, -5.0, 0.3, 7.0], dtype=torch.float64, requires_grad=True)
    p = edge_sparsemax(graph, z)
    torch.testing.assert_close(p, torch.tensor([0.5, 0.5, 0.0, 1.0, 1.0], dtype=z.dtype))
    p.backward(torch.arange(5.0, dtype=z.dtype))
    torch.testing.assert_close(z.grad, torch.tensor([-0.5, 0.5, 0.0, 0.0, 0.0], dtype=z.dtype))


def test_gradcheck():
    graph = make_graph([2, 0, 4, 1, 6, 3], seed=4)
    z = logits_for(graph, seed=6).requires_grad_()
    assert torch.autograd.gradcheck(lambda x: edge_sparsemax(graph, x), (z,), atol=1e-9, rtol=1e-7)


def test_float32_and_shapes():
    z = logits_for(GRAPH)
    ref = edge_sparsemax(GRAPH, z)
    out = edge_sparsemax(GRAPH, z.float())
    assert out.dtype == torch.float32
    torch.testing.assert_close(out.double(), ref, atol=1e-5, rtol=0)
    torch.testing.assert_close(edge_sparsemax(GRAPH, z[:, 1]), ref[:, 1])
    assert edge_sparsemax(GRAPH, z.unsqueeze(-1)).shape == (GRAPH.num_edges(), 3, 1)


def test_errors():
    z = logits_for(GRAPH)
    e = GRAPH.num_edges()
    with pytest.raises(ZooOpError, match=rf"logits has shape \[{e - 1}, 3\] but the graph has {e} edges"):
        edge_sparsemax(GRAPH, z[1:])
    bad = z.clone()
    bad[GRAPH.in_edges(10, form="eid")[0], 2] = float("inf")
    with pytest.raises(ZooOpError, match=r"NaN or \+inf \(or only -inf\) on edges into destination node\(s\) \[10\]"):
        edge_sparsemax(GRAPH, bad)
    hetero = dgl.heterograph({("a", "r", "b"): ([0], [0]), ("b", "s", "a"): ([0], [0])})
    with pytest.raises(ZooOpError, match="only graphs with one edge type are supported"):
        edge_sparsemax(hetero, torch.zeros(2))
