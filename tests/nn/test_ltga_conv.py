"""LTGAConv against dgl.nn.GATv2Conv and hand-built cases."""
import dgl
import pytest
import torch
from dgl.nn import GATv2Conv

from zoo.nn import LTGAConv


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
    with pytest.raises(ValueError, match="delta=2"):
        LTGAConv(4, 2, 1, delta=2)
    with pytest.raises(ValueError, match="self-loops"):
        LTGAConv(4, 2, 1)(dgl.graph(([0], [1]), num_nodes=2), torch.randn(2, 4))
