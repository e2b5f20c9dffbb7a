"""edge_weighted_sum, on the fused kernels and on the pure-torch path, against a dense float64 sum
and DGL's update_all(u_mul_e, sum)."""
import dgl
import dgl.function as fn
import pytest
import torch

from tests.ops.graphs import make_graph
from zoo.ops import ZooOpError, edge_weighted_sum


def dense_adjacency(graph, weights):
    """A[j, i, h] = sum of weights[e, h] over the edges i -> j (multi-edges add up)."""
    src, dst = graph.edges()
    adj = torch.zeros(graph.num_dst_nodes(), graph.num_src_nodes(), weights.shape[1], dtype=weights.dtype)
    return adj.index_put((dst, src), weights, accumulate=True)


def dense_reference(graph, weights, feat):
    """out[j, h] = sum_i A[j, i, h] feat[i, h]."""
    return torch.einsum("jih,ihf->jhf", dense_adjacency(graph, weights), feat)


def dgl_reference(graph, weights, feat):
    with graph.local_scope():
        graph.srcdata["h"] = feat
        graph.edata["a"] = weights.unsqueeze(-1)
        graph.update_all(fn.u_mul_e("h", "a", "m"), fn.sum("m", "out"))
        return graph.dstdata["out"]


def test_matches_dense_float64_with_gradients(op_path):
    graph = make_graph([3, 0, 5, 1, 7, 2, 4], seed=1)  # multi-edges, self-loops, a node with none in
    gen = torch.Generator().manual_seed(0)
    weights = torch.rand(graph.num_edges(), 3, dtype=torch.float64, generator=gen).requires_grad_()
    feat = torch.randn(graph.num_nodes(), 3, 4, dtype=torch.float64, generator=gen).requires_grad_()
    out = edge_weighted_sum(graph, weights, feat)
    torch.testing.assert_close(out, dense_reference(graph, weights, feat), rtol=1e-12, atol=1e-12)
    assert torch.all(out[1] == 0)
    assert torch.autograd.gradcheck(lambda w, x: edge_weighted_sum(graph, w, x), (weights, feat))


def float32_sum_bound(abs_sums, terms):
    """Worst-case float32 error of a sum of ``terms`` rounded products (Higham, Theorem 3.1).

    A sum of n products computed in any order in precision u = 2^-24 is within
    gamma_(n+1) * sum |products| of the exact value, gamma_k = k u / (1 - k u).
    """
    k = terms + 1
    u = 2.0 ** -24
    return k * u / (1 - k * u) * abs_sums


@pytest.mark.parametrize("block", [False, True])
def test_matches_dgl_in_float32_within_summation_error(block, op_path):
    """Ours and DGL's update_all add the same products in different orders, so they agree to the
    float32 summation bound, not bit for bit: the order, and so the last bits, depend on the
    CPU's vector kernels. Both are also held to that bound around the exact float64 result."""
    graph = make_graph([4, 2, 6, 3, 1, 5, 2, 8, 3], seed=2)
    if block:  # fewer destination than source nodes, as in sampled mini-batches
        dst = torch.tensor([0, 2, 7])
        graph = dgl.to_block(dgl.in_subgraph(graph, dst), dst_nodes=dst)
    gen = torch.Generator().manual_seed(3)
    weights = torch.rand(graph.num_edges(), 2, generator=gen)
    feat = torch.randn(graph.num_src_nodes(), 2, 5, generator=gen)
    upstream = torch.randn(graph.num_dst_nodes(), 2, 5, generator=gen)

    w64, x64 = weights.double().requires_grad_(), feat.double().requires_grad_()
    dense_reference(graph, w64, x64).backward(upstream.double())
    exact = (dense_reference(graph, w64, x64).detach(), w64.grad, x64.grad)
    src, dst = graph.edges()
    in_deg = graph.in_degrees().double()[:, None, None]
    out_deg = graph.out_degrees().double()[:, None, None]
    w_abs, x_abs, g_abs = weights.double().abs(), feat.double().abs(), upstream.double().abs()
    adj_abs = dense_adjacency(graph, w_abs)
    bounds = (float32_sum_bound(torch.einsum("jih,ihf->jhf", adj_abs, x_abs), in_deg),
              float32_sum_bound((x_abs[src] * g_abs[dst]).sum(-1), feat.shape[-1]),
              float32_sum_bound(torch.einsum("jih,jhf->ihf", adj_abs, g_abs), out_deg))
    results = []
    for op in (edge_weighted_sum, dgl_reference):
        w, x = weights.clone().requires_grad_(), feat.clone().requires_grad_()
        out = op(graph, w, x)
        out.backward(upstream)
        results.append((out, w.grad, x.grad))
    for name, ours, theirs, want, bound in zip(("out", "grad weights", "grad feat"), *results, exact, bounds):
        assert ours.dtype == theirs.dtype == torch.float32, name
        assert torch.all((ours.double() - want).abs() <= bound), name
        assert torch.all((theirs.double() - want).abs() <= bound), name
        assert torch.all((ours.double() - theirs.double()).abs() <= 2 * bound), name


def test_bad_shapes_are_named():
    graph = make_graph([2, 3, 1])
    with pytest.raises(ZooOpError, match=r"weights has shape \[5\]; expected \[6, H\]"):
        edge_weighted_sum(graph, torch.rand(5), torch.rand(3, 1, 4))
    with pytest.raises(ZooOpError, match=r"feat has shape \[3, 2, 4\]; expected \[3, 1, F\]"):
        edge_weighted_sum(graph, torch.rand(6, 1), torch.rand(3, 2, 4))
    with pytest.raises(ZooOpError, match="float64"):
        edge_weighted_sum(graph, torch.rand(6, 1), torch.rand(3, 1, 4, dtype=torch.float64))
