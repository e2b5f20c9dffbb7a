"""gated_gcn_messages: a hand-computed case, float64 gradients against finite differences (on the
path this machine runs), DGL's GatedGCNConv message passing, and the errors it raises."""
import math

import dgl
import dgl.function as fn
import pytest
import torch

from zoo.ops import ZooOpError
from zoo.ops.gated_gcn import gated_gcn_messages


def graph_and_inputs(dim=3, seed=0):
    gen = torch.Generator().manual_seed(seed)
    graph = dgl.graph(([0, 1, 2, 2, 3, 0], [1, 2, 0, 1, 1, 0]), num_nodes=5)  # node 4: no edges; 0->0 a loop
    proj = torch.randn(5, 4 * dim, generator=gen, dtype=torch.float64)
    ce = torch.randn(graph.num_edges(), dim, generator=gen, dtype=torch.float64)
    return graph, proj, ce


def test_a_hand_computed_node():
    """Node 1 has in-edges from 0, 2 and 3; with D h = E h = 0 and C e = log 3, 0, -log 3 on them the
    gates are 3/4, 1/2, 1/4, so h'_1 = A h_1 + (3/4 * 4 + 1/2 * 8 + 1/4 * 16) / (3/2 + 1e-6)."""
    graph = dgl.graph(([0, 2, 3], [1, 1, 1]), num_nodes=4)
    proj = torch.tensor([[0.0, 4, 0, 0], [1, 0, 0, 0], [0, 8, 0, 0], [0, 16, 0, 0]], dtype=torch.float64)
    ce = torch.tensor([[math.log(3)], [0.0], [-math.log(3)]], dtype=torch.float64)
    h_new, e_new = gated_gcn_messages(graph, proj, ce)
    assert float(h_new[1]) == pytest.approx(1 + 11 / (1.5 + 1e-6), rel=1e-14)
    assert h_new[[0, 2, 3], 0].tolist() == [0.0, 0.0, 0.0]  # no in-edges: A h alone
    assert torch.equal(e_new, ce)


def test_gradients_match_finite_differences():
    graph, proj, ce = graph_and_inputs()
    assert torch.autograd.gradcheck(lambda p, c: gated_gcn_messages(graph, p, c),
                                    (proj.requires_grad_(), ce.requires_grad_()))


def test_matches_dgl_message_passing():
    """DGL's own GatedGCNConv message passing, written with its built-in functions."""
    graph, proj, ce = graph_and_inputs(dim=4, seed=1)
    ah, bh, dh, eh = proj.split(4, -1)
    with graph.local_scope():
        graph.ndata.update({"Bh": bh, "Dh": dh, "Eh": eh})
        graph.apply_edges(fn.u_add_v("Dh", "Eh", "DEh"))
        e_want = graph.edata["DEh"] + ce
        graph.edata["sigma"] = torch.sigmoid(e_want)
        graph.update_all(fn.u_mul_e("Bh", "sigma", "m"), fn.sum("m", "num"))
        graph.update_all(fn.copy_e("sigma", "m"), fn.sum("m", "den"))
        h_want = ah + graph.ndata["num"] / (graph.ndata["den"] + 1e-6)
    h_new, e_new = gated_gcn_messages(graph, proj, ce)
    torch.testing.assert_close(h_new, h_want, rtol=1e-14, atol=1e-14)
    torch.testing.assert_close(e_new, e_want, rtol=0, atol=0)


@pytest.mark.parametrize("case, match", [
    ("block", r"source and \d+ destination nodes"), ("proj", r"one graph.s \[N, 4D\] node rows"),
    ("ce", r"ce has shape \[6, 2\]"), ("dtype", "cast one of them")])
def test_bad_inputs_name_the_problem(case, match):
    graph, proj, ce = graph_and_inputs()
    if case == "block":
        graph = dgl.to_block(graph, dst_nodes=torch.tensor([0, 1]))
    elif case == "proj":
        proj = proj[:4]
    elif case == "ce":
        ce = ce[:, :2]
    else:
        ce = ce.float()
    with pytest.raises(ZooOpError, match=match):
        gated_gcn_messages(graph, proj, ce)
