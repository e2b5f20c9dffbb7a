"""edge_gatv2_logits against a per-edge float64 loop (values and gradients), on the fused kernel
and on the pure-torch path in one chunk and in many, on graphs and on DGL blocks, with and
without an edge term; and its input errors."""
import dgl
import pytest
import torch

from tests.ops.graphs import make_graph
from zoo.ops import ZooOpError, edge_gatv2_logits

SLOPE = 0.2


def per_edge(graph, feat_src, feat_dst, attn, edge_term=None):
    """logits[e, h] = sum_f attn[h, f] * LeakyReLU(...), one edge at a time."""
    src, dst = graph.edges(order="eid")
    rows = []
    for e, (i, j) in enumerate(zip(src.tolist(), dst.tolist())):
        z = feat_src[i] + feat_dst[j] + (0 if edge_term is None else edge_term[e])
        rows.append((torch.where(z > 0, z, SLOPE * z) * attn).sum(-1))
    return torch.stack(rows)


def _graph(block: bool):
    graph = make_graph([3, 1, 5, 2, 7, 2, 4, 1], seed=4)  # multi-edges and self-loops
    if block:  # fewer destination than source nodes, as in sampled mini-batches
        dst = torch.tensor([0, 2, 4, 6])
        graph = dgl.to_block(dgl.in_subgraph(graph, dst), dst_nodes=dst)
    return graph


def _inputs(graph, dtype=torch.float64, edge_term=False, heads=3, feats=4):
    gen = torch.Generator().manual_seed(7)
    make = lambda *shape: torch.randn(*shape, generator=gen).to(dtype).requires_grad_()
    tensors = [make(graph.num_src_nodes(), heads, feats), make(graph.num_dst_nodes(), heads, feats),
               make(heads, feats)]
    return tensors + [make(graph.num_edges(), heads, feats)] if edge_term else tensors


@pytest.mark.parametrize("block", [False, True])
@pytest.mark.parametrize("edge_term", [False, True])
@pytest.mark.parametrize("chunk_edges", [None, 1, 5])  # one chunk; one edge per chunk; a ragged last chunk
def test_matches_a_per_edge_float64_loop_with_gradients(block, edge_term, chunk_edges, op_path):
    graph = _graph(block)
    inputs = _inputs(graph, edge_term=edge_term)
    upstream = torch.randn(graph.num_edges(), 3, generator=torch.Generator().manual_seed(8), dtype=torch.float64)
    ours = edge_gatv2_logits(graph, *inputs[:3], SLOPE, *inputs[3:], chunk_edges=chunk_edges)
    grads = torch.autograd.grad(ours, inputs, upstream)
    reference = per_edge(graph, *inputs)
    expected = torch.autograd.grad(reference, inputs, upstream)
    torch.testing.assert_close(ours, reference, rtol=1e-12, atol=1e-12)
    for got, want in zip(grads, expected):
        torch.testing.assert_close(got, want, rtol=1e-12, atol=1e-12)


def test_gradcheck_and_a_broadcast_attn(op_path):
    graph = _graph(False)
    feat_src, feat_dst, attn = _inputs(graph)
    assert torch.autograd.gradcheck(lambda a, b, c: edge_gatv2_logits(graph, a, b, c, SLOPE, chunk_edges=4),
                                    (feat_src, feat_dst, attn))
    torch.testing.assert_close(edge_gatv2_logits(graph, feat_src, feat_dst, attn.unsqueeze(0), SLOPE),
                               per_edge(graph, feat_src, feat_dst, attn))


def test_float32_stays_within_a_sum_of_eight_products_of_float64(op_path):
    graph = _graph(False)
    inputs = _inputs(graph, torch.float32, heads=2, feats=8)
    exact = per_edge(graph, *[t.double() for t in inputs])
    ours = edge_gatv2_logits(graph, *inputs, SLOPE, chunk_edges=3).double()
    # each input rounded once, then one addition, LeakyReLU, product and an 8-term sum: far below 1e-5
    assert (ours - exact).abs().max() < 1e-5 * (1 + exact.abs().max())


def test_bad_inputs_are_named():
    graph = _graph(False)
    feat_src, feat_dst, attn = _inputs(graph)
    with pytest.raises(ZooOpError, match=r"feat_src has shape \[8, 3\]; expected \[8, H, F\]"):
        edge_gatv2_logits(graph, feat_src[:, :, 0], feat_dst, attn)
    with pytest.raises(ZooOpError, match=r"feat_dst has shape \[8, 3, 2\]; expected \[8, 3, 4\]"):
        edge_gatv2_logits(graph, feat_src, feat_dst[..., :2], attn)
    with pytest.raises(ZooOpError, match=r"attn has shape \[3, 3\]; expected \[3, 4\]"):
        edge_gatv2_logits(graph, feat_src, feat_dst, attn[:, :3])
    with pytest.raises(ZooOpError, match=r"edge_term has shape \[2, 3, 4\]; expected \[25, 3, 4\]"):
        edge_gatv2_logits(graph, feat_src, feat_dst, attn, edge_term=feat_src[:2])
    with pytest.raises(ZooOpError, match="must share a dtype, got torch.float32, torch.float64"):
        edge_gatv2_logits(graph, feat_src.float(), feat_dst, attn)
