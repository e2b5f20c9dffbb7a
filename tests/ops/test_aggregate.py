"""edge_weighted_sum against a dense float64 sum and DGL's update_all(u_mul_e, sum)."""
import dgl
import dgl.function as fn
import pytest
import torch

from tests.ops.graphs import make_graph
from zoo.ops import ZooOpError, edge_weighted_sum


def dense_reference(graph, weights, feat):
    """out[j, h] = sum_i A[j, i, h] feat[i, h], with A summed over multi-edges."""
    src, dst = graph.edges()
    adj = torch.zeros(graph.num_dst_nodes(), graph.num_src_nodes(), weights.shape[1], dtype=weights.dtype)
    adj = adj.index_put((dst, src), weights, accumulate=True)
    return torch.einsum("jih,ihf->jhf", adj, feat)


def dgl_reference(graph, weights, feat):
    with graph.local_scope():
        graph.srcdata["h"] = feat
        graph.edata["a"] = weights.unsqueeze(-1)
        graph.update_all(fn.u_mul_e("h", "a", "m"), fn.sum("m", "out"))
        return graph.dstdata["out"]


def test_matches_dense_float64_with_gradients():
    graph = make_graph([3, 0, 5, 1, 7, 2, 4], seed=1)  # multi-edges, self-loops, a node with none in
    gen = torch.Generator().manual_seed(0)
    weights = torch.rand(graph.num_edges(), 3, dtype=torch.float64, generator=gen).requires_grad_()
    feat = torch.randn(graph.num_nodes(), 3, 4, dtype=torch.float64, generator=gen).requires_grad_()
    out = edge_weighted_sum(graph, weights, feat)
    torch.testing.assert_close(out, dense_reference(graph, weights, feat), rtol=1e-12, atol=1e-12)
    assert torch.all(out[1] == 0)
    assert torch.autograd.gradcheck(lambda w, x: edge_weighted_sum(graph, w, x), (weights, feat))


@pytest.mark.parametrize("block", [False, True])
def test_bit_identical_to_dgl_in_float32(block):
    graph = make_graph([4, 2, 6, 3, 1, 5, 2, 8, 3], seed=2)
    if block:  # fewer destination than source nodes, as in sampled mini-batches
        dst = torch.tensor([0, 2, 7])
        graph = dgl.to_block(dgl.in_subgraph(graph, dst), dst_nodes=dst)
    gen = torch.Generator().manual_seed(3)
    weights = torch.rand(graph.num_edges(), 2, generator=gen)
    feat = torch.randn(graph.num_src_nodes(), 2, 5, generator=gen)
    upstream = torch.randn(graph.num_dst_nodes(), 2, 5, generator=gen)
    results = []
    for op in (edge_weighted_sum, dgl_reference):
        w, x = weights.clone().requires_grad_(), feat.clone().requires_grad_()
        out = op(graph, w, x)
        out.backward(upstream)
        results.append((out, w.grad, x.grad))
    for ours, theirs in zip(*results):
        assert torch.equal(ours, theirs)


def test_bad_shapes_are_named():
    graph = make_graph([2, 3, 1])
    with pytest.raises(ZooOpError, match=r"weights has shape \[5\]; expected \[6, H\]"):
        edge_weighted_sum(graph, torch.rand(5), torch.rand(3, 1, 4))
    with pytest.raises(ZooOpError, match=r"feat has shape \[3, 2, 4\]; expected \[3, 1, F\]"):
        edge_weighted_sum(graph, torch.rand(6, 1), torch.rand(3, 2, 4))
    with pytest.raises(ZooOpError, match="float64"):
        edge_weighted_sum(graph, torch.rand(6, 1), torch.rand(3, 1, 4, dtype=torch.float64))
