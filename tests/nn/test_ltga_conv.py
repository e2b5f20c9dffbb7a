"""LTGAConv against dgl.nn.GATv2Conv and hand-built cases."""
import dgl
import pytest
import torch
from dgl.nn import GATv2Conv

from zoo.models import create_model
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


def test_same_seed_gives_gatv2_weights_and_loss():
    g, x, y = _graph(1), torch.randn(30, 12), torch.randint(0, 3, (30,))
    torch.manual_seed(3)
    gatv2 = create_model("gatv2", in_feats=12, num_classes=3, hidden=4, heads=2)
    torch.manual_seed(3)
    ltga = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, q_mode="head")
    for name, tensor in gatv2.state_dict().items():
        assert torch.equal(tensor, ltga.state_dict()[name]), name
    torch.manual_seed(5)
    a = torch.nn.functional.cross_entropy(gatv2(g, x), y)
    torch.manual_seed(5)
    b = torch.nn.functional.cross_entropy(ltga(g, x), y)
    assert float(a) == pytest.approx(float(b), abs=1e-6)


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


@pytest.mark.parametrize("q_mode", ["global", "layer", "head", "edge"])
def test_index_parameters_get_gradients(q_mode):
    torch.manual_seed(0)
    g, x, y = _graph(), torch.randn(30, 12), torch.randint(0, 3, (30,))
    model = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, q_mode=q_mode, dropout=0.0,
                         attn_dropout=0.0)
    params = model.index_parameters()
    assert params
    torch.nn.functional.cross_entropy(model(g, x), y).backward()
    q = model.q_values()
    assert q and all(torch.allclose(v, torch.ones_like(v)) for v in q)  # q = 1 at init
    gate_out = [p for p in params if p.grad is not None and p.grad.abs().sum() > 0]
    assert gate_out, "the index parameters receive no gradient at q = 1"


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


@pytest.mark.parametrize("training", [True, False])
def test_sparse_features_give_the_dense_forward_and_gradients(training):
    graph = dgl.add_self_loop(dgl.rand_graph(30, 120))
    generator = torch.Generator().manual_seed(3)
    x = torch.rand(30, 50, generator=generator) * (torch.rand(30, 50, generator=generator) < 0.1)
    outputs, grads = [], []
    for sparse in (False, True):
        torch.manual_seed(0)
        model = create_model("ltga", in_feats=50, num_classes=3, hidden=4, heads=2, dropout=0.5,
                             attn_dropout=0.0, sparse_features=sparse)
        model.train(training)
        torch.manual_seed(1)  # same dropout masks on both paths
        out = model(graph, x)
        out.square().sum().backward()
        outputs.append(out)
        grads.append(model.convs[0].fc_src.weight.grad)
    torch.testing.assert_close(outputs[1], outputs[0], rtol=1e-5, atol=1e-6)
    torch.testing.assert_close(grads[1], grads[0], rtol=1e-4, atol=1e-6)
    if training:  # dropout really acted: an eval-mode forward differs
        assert not torch.allclose(outputs[0], model.eval()(graph, x))
