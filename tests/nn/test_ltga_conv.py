"""LTGAConv against dgl.nn.GATv2Conv, a dense float64 reference and hand-built cases."""
import math

import dgl
import pytest
import torch
from dgl.nn import GATv2Conv
from torch.nn import functional as F

from zoo.nn import EdgeGate, LTGAConv
from zoo.nn.ltga_conv import Q_MIN
from zoo.ops import edge_qsoftmax


def _graph(seed=0, nodes=30, edges=120):
    gen = torch.Generator().manual_seed(seed)
    g = dgl.graph((torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)),
                  num_nodes=nodes)
    return dgl.add_self_loop(dgl.remove_self_loop(g))


@pytest.mark.parametrize("options", [dict(normaliser="softmax"), dict(normaliser="qsoftmax", q_mode="fixed", q=1.0),
                                     dict(normaliser="qsoftmax", q_mode="head"), dict(normaliser="qsoftmax", q_mode="layer")])
def test_equals_gatv2conv_at_q_one(options):
    torch.manual_seed(0)
    g, x = _graph(), torch.randn(30, 12)
    reference = GATv2Conv(12, 5, 4)
    conv = LTGAConv(12, 5, 4, **options)
    missing = conv.load_state_dict(reference.state_dict(), strict=False)
    assert missing.unexpected_keys == [] and set(missing.missing_keys) <= {"q_logit"}
    expected = reference(g, x)
    assert torch.allclose(conv(g, x), expected, atol=1e-5)
    assert torch.allclose(conv(g, x).mean(1), expected.mean(1), atol=1e-5)  # mean-of-heads output layer
    extra = 4 if options.get("q_mode") == "head" else 1 if options.get("q_mode") == "layer" else 0
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(conv) == count(reference) + extra


def test_fixed_q_two_prunes_on_a_hand_graph():
    # node 0 receives from itself, 1 and 2; dot scores 1, 0.5, -2 -> shifted 0, -0.5, -3;
    # exp_2(x) = [1 + x]_+ = 1, 0.5, 0 -> weights 2/3, 1/3, 0 (Prop. 1: zero below max - 1)
    graph = dgl.add_self_loop(dgl.graph(([1, 2], [0, 0]), num_nodes=3))
    conv = LTGAConv(2, 1, 1, q_mode="fixed", q=2.0, scoring="dot")
    with torch.no_grad():
        for linear in (conv.fc_src, conv.fc_dst):
            linear.weight.copy_(torch.tensor([[1.0, 0.0]]))
            linear.bias.zero_()
    x = torch.tensor([[1.0, 0.0], [0.5, 0.0], [-2.0, 0.0]])
    _, attention = conv(graph, x, get_attention=True)
    src, dst = graph.edges()
    weights = {int(s): float(a) for s, d, a in zip(src, dst, attention[:, 0]) if int(d) == 0}
    assert weights == pytest.approx({0: 2 / 3, 1: 1 / 3, 2: 0.0})
    assert weights[2] == 0.0


@pytest.mark.parametrize("control", ["edge_bias", "edge_scale", "head_temperature"])
def test_controls_start_as_gatv2(control):
    torch.manual_seed(0)
    g, x = _graph(), torch.randn(30, 12)
    reference = GATv2Conv(12, 5, 4)
    conv = LTGAConv(12, 5, 4, normaliser="softmax", control=control)
    conv.load_state_dict(reference.state_dict(), strict=False)
    assert torch.allclose(conv(g, x), reference(g, x), atol=1e-5)
    assert conv.index_parameters()


def test_bad_options_name_the_value():
    with pytest.raises(ValueError, match="normaliser='soft'"):
        LTGAConv(4, 2, 1, normaliser="soft")
    with pytest.raises(ValueError, match="shared_q_logit"):
        LTGAConv(4, 2, 1, q_mode="global")
    with pytest.raises(ValueError, match=r"delta=2.5 must be in \(0, 2\]"):
        LTGAConv(4, 2, 1, delta=2.5)
    with pytest.raises(ValueError, match="edge_mlp='narrow'"):
        LTGAConv(4, 2, 1, q_mode="edge", edge_mlp="narrow")
    with pytest.raises(ValueError, match="edge_feats=3 enter the GATv2 score; set scoring='gatv2'"):
        LTGAConv(4, 2, 1, scoring="dot", edge_feats=3)
    with pytest.raises(ValueError, match="self-loops"):
        LTGAConv(4, 2, 1)(dgl.graph(([0], [1]), num_nodes=2), torch.randn(2, 4))
    g = dgl.add_self_loop(dgl.graph(([0], [1]), num_nodes=2))
    with pytest.raises(ValueError, match=r"built with edge_feats=3: pass edge_feat \[E, 3\] or set graph.edata"):
        LTGAConv(4, 2, 1, edge_feats=3)(g, torch.randn(2, 4))
    with pytest.raises(ValueError, match="has no W_e: build it with edge_feats=3"):
        LTGAConv(4, 2, 1)(g, torch.randn(2, 4), torch.randn(3, 3))


def _dense_conv(conv, x, adjacency, edge_x=None, gate_input="paper"):
    """LTGAConv densely in float64 over every (source i, destination j) pair: GATv2 logits (with
    ``W_e x_ij`` if given), q from the layer's q-logit or from its per-edge gate, the q-softmax
    ``[1 + (q-1)(e - max)]_+^(1/(q-1))`` over the in-neighbours of j, ``sum_i a_ij W_l x_i``, bias.
    ``gate_input``: "paper" feeds head m's pair to the gate and reads output m; "wide" feeds the
    concatenation of every head's pair."""
    heads, width = conv.num_heads, conv.out_feats
    src = (x @ conv.fc_src.weight.T + conv.fc_src.bias).view(-1, heads, width)
    dst = (x @ conv.fc_dst.weight.T + conv.fc_dst.bias).view(-1, heads, width)
    scores = src[:, None] + dst[None, :]                                          # [i, j, H, F]
    if edge_x is not None:
        scores = scores + (edge_x @ conv.fc_edge.weight.T).view(*edge_x.shape[:2], heads, width)
    logits = (F.leaky_relu(scores, 0.2) * conv.attn[0]).sum(-1)                   # [i, j, H]
    if conv.edge_gate is not None:
        gate = conv.edge_gate
        if gate_input == "paper":
            pair = torch.cat([src[:, None].expand(-1, len(x), -1, -1), dst[None, :].expand(len(x), -1, -1, -1)], -1)
            w1 = torch.cat([gate.src.weight, gate.dst.weight], 1)                 # [hidden, 2F]
            hidden = torch.relu(pair @ w1.T + gate.src.bias)                      # [i, j, H, hidden]
            a = torch.einsum("ijhk,hk->ijh", hidden, gate.out.weight) + gate.out.bias
        else:
            pair = torch.cat([src.flatten(1)[:, None].expand(-1, len(x), -1),
                              dst.flatten(1)[None, :].expand(len(x), -1, -1)], -1)
            w1 = torch.cat([gate.src.weight, gate.dst.weight], 1)
            a = torch.relu(pair @ w1.T + gate.src.bias) @ gate.out.weight.T + gate.out.bias
        q = (1 + conv.delta * torch.tanh(a)).clamp_min(Q_MIN)
    else:
        q = (1 + conv.delta * torch.tanh(conv.q_logit)).clamp_min(Q_MIN)
    mask = adjacency[..., None].expand_as(logits)
    shifted = logits - logits.masked_fill(~mask, -math.inf).amax(0, keepdim=True)
    weights = ((1 + (q - 1) * shifted).clamp_min(0) ** (1 / (q - 1))).masked_fill(~mask, 0)
    out = torch.einsum("ijh,ihf->jhf", weights / weights.sum(0, keepdim=True), src)
    return out + conv.bias if conv.bias is not None else out


def _randomise(conv, generator):
    """Non-zero values in every parameter (the gate's output and the biases start at 0)."""
    with torch.no_grad():
        for p in conv.parameters():
            p.copy_(torch.randn(p.shape, generator=generator, dtype=p.dtype) * 0.7)


def _adjacency(g):
    adjacency = torch.zeros(g.num_nodes(), g.num_nodes(), dtype=torch.bool)
    adjacency[g.edges()] = True
    return adjacency


@pytest.mark.parametrize("layout", ["paper", "wide"])
def test_per_edge_q_matches_a_dense_reference(layout):
    """The paper's gate feeds each head its own endpoint pair and reads that head's output; the
    wide one feeds all heads' pairs; both against the dense computation, with delta = 2."""
    g = dgl.to_simple(_graph(nodes=10, edges=30))
    conv = LTGAConv(5, 3, 2, q_mode="edge", delta=2.0, edge_mlp=layout).double()
    _randomise(conv, torch.Generator().manual_seed(1))
    x = torch.randn(10, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(2))
    expected = _dense_conv(conv, x, _adjacency(g), gate_input=layout)
    torch.testing.assert_close(conv(g, x), expected, rtol=1e-10, atol=1e-12)
    assert conv.last_q.shape == (g.num_edges(), 2) and float(conv.last_q.max()) > 2.0  # beyond delta = 1's reach


def test_gate_sizes_are_the_papers_and_the_wide_ones():
    # paper (Section 3.3): (2 F_h) -> 8 -> M, i.e. 2*64*8 + 8 + 8*8 + 8 = 1,104 for F_h = 64, M = 8;
    # wide: (2 M F_h) -> 8 -> M, 2*512*8 + 8 + 8*8 + 8 = 8,272
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(EdgeGate(64, 8)) == 1104 and count(EdgeGate(64, 8, layout="wide")) == 8272
    assert not any(p.any() for p in EdgeGate(64, 8).out.parameters())  # zero-initialised read-out: q = 1


def test_edge_features_enter_the_score_as_w_e_x():
    g = dgl.to_simple(_graph(nodes=9, edges=25))
    gen = torch.Generator().manual_seed(4)
    edge_x = torch.randn(g.num_edges(), 3, dtype=torch.float64, generator=gen)
    x = torch.randn(9, 5, dtype=torch.float64, generator=gen)
    conv = LTGAConv(5, 4, 2, q_mode="head", edge_feats=3).double()
    _randomise(conv, gen)
    dense_edges = torch.zeros(9, 9, 3, dtype=torch.float64)
    dense_edges[g.edges()] = edge_x
    expected = _dense_conv(conv, x, _adjacency(g), edge_x=dense_edges)
    torch.testing.assert_close(conv(g, x, edge_x), expected, rtol=1e-10, atol=1e-12)
    assert not torch.allclose(conv(g, x, torch.zeros_like(edge_x)), expected)  # the features matter


@pytest.mark.parametrize("bias, shape", [("per_head", (2, 3)), ("shared", (3,))])
def test_output_bias_is_added_before_the_activation(bias, shape):
    g = dgl.to_simple(_graph(nodes=10, edges=30))
    conv = LTGAConv(5, 3, 2, q_mode="head", output_bias=bias, activation=F.elu).double()
    assert conv.bias.shape == shape and not conv.bias.any()  # zero at init, like PyG
    _randomise(conv, torch.Generator().manual_seed(5))
    x = torch.randn(10, 5, dtype=torch.float64, generator=torch.Generator().manual_seed(6))
    torch.testing.assert_close(conv(g, x), F.elu(_dense_conv(conv, x, _adjacency(g))), rtol=1e-10, atol=1e-12)


def test_delta_two_reaches_the_clamp_only_below_q_min():
    g = _graph()
    conv = LTGAConv(12, 5, 4, q_mode="head", delta=2.0)
    with torch.no_grad():  # q = 1 + 2 tanh(a): 1 + 2 tanh(1) = 2.52, 1 + 2 tanh(-0.2) = 0.605; below 0: clamped
        conv.q_logit.copy_(torch.tensor([1.0, -0.2, -1.0, -5.0]))
    conv(g, torch.randn(30, 12))
    expected = [1 + 2 * math.tanh(1.0), 1 + 2 * math.tanh(-0.2), Q_MIN, Q_MIN]
    assert conv.last_q.tolist() == pytest.approx(expected, rel=1e-6)
    # why the clamp stays: the normaliser's domain is q > 0
    with pytest.raises(ValueError, match="q must be finite and > 0"):
        edge_qsoftmax(g, torch.zeros(g.num_edges(), 4), torch.tensor([1.0, 1.0, 1 + 2 * math.tanh(-1.0), 1.0]))


def test_edge_features_on_a_block_come_from_its_own_edges():
    """A DGL block of some destinations carries its edges' rows of edata['feat']: the layer on the
    block gives the full graph's output at those destinations."""
    g = dgl.to_simple(_graph(nodes=12, edges=40))
    gen = torch.Generator().manual_seed(7)
    g.edata["feat"] = torch.randn(g.num_edges(), 3, generator=gen)
    x = torch.randn(12, 5, generator=gen)
    conv = LTGAConv(5, 4, 2, q_mode="edge", edge_feats=3)
    _randomise(conv, gen)
    dst = torch.tensor([2, 5, 7])
    block = dgl.to_block(dgl.in_subgraph(g, dst), dst_nodes=dst)  # the edges into dst, with their edata
    out = conv(block, x[block.srcdata[dgl.NID]])
    torch.testing.assert_close(out, conv(g, x)[dst], rtol=1e-5, atol=1e-6)
    assert block.num_edges() < g.num_edges() and block.edata["feat"].shape == (block.num_edges(), 3)
