"""The LTGA model against a dense float64 reference and against GATv2; its index parameters and q."""
import math

import dgl
import pytest
import torch
from torch.nn import functional as F

from zoo.models import create_model


def _graph(seed=0, nodes=30, edges=120):
    """A random simple graph with one self-loop per node."""
    gen = torch.Generator().manual_seed(seed)
    src, dst = torch.randint(0, nodes, (edges,), generator=gen), torch.randint(0, nodes, (edges,), generator=gen)
    return dgl.add_self_loop(dgl.to_simple(dgl.remove_self_loop(dgl.graph((src, dst), num_nodes=nodes))))


def _dense_layer(x, conv, adjacency, q, slope):
    """One LTGAConv, densely: GATv2 logits for every (source i, destination j) pair, the q-softmax
    ``[1 + (q-1)(e - max)]_+^(1/(q-1))`` over the in-neighbours of j, then ``sum_i a_ij W_l x_i``."""
    heads, width = conv.num_heads, conv.out_feats
    src = (x @ conv.fc_src.weight.T + conv.fc_src.bias).view(-1, heads, width)
    dst = (x @ conv.fc_dst.weight.T + conv.fc_dst.bias).view(-1, heads, width)
    logits = (F.leaky_relu(src[:, None] + dst[None, :], slope) * conv.attn[0]).sum(-1)  # [i, j, H]
    mask = adjacency[..., None].expand_as(logits)
    shifted = logits - logits.masked_fill(~mask, -math.inf).amax(0, keepdim=True)
    weights = ((1 + (q - 1) * shifted).clamp_min(0) ** (1 / (q - 1))).masked_fill(~mask, 0)
    weights = weights / weights.sum(0, keepdim=True)
    return torch.einsum("ijh,ihf->jhf", weights, src)


def test_matches_a_dense_float64_reference_with_learned_per_head_q():
    torch.manual_seed(0)
    g, x = _graph(nodes=12, edges=40), torch.randn(12, 5, dtype=torch.float64)
    model = create_model("ltga", in_feats=5, num_classes=3, hidden=4, heads=2, q_mode="head", dropout=0.0,
                         attn_dropout=0.0, negative_slope=0.1).double().eval()
    qs = [torch.tensor([0.7, 1.6], dtype=torch.float64), torch.tensor([1.3, 0.85], dtype=torch.float64)]
    with torch.no_grad():  # q = 1 + delta tanh(a), delta = 1
        for conv, q in zip(model.ltga_layers(), qs):
            conv.q_logit.copy_(torch.atanh(q - 1))
    adjacency = torch.zeros(12, 12, dtype=torch.bool)
    adjacency[g.edges()] = True
    hidden = F.elu(_dense_layer(x, model.convs[0], adjacency, qs[0], 0.1)).flatten(1)
    expected = _dense_layer(hidden, model.out, adjacency, qs[1], 0.1).mean(1)
    torch.testing.assert_close(model(g, x), expected, rtol=1e-10, atol=1e-12)
    for used, q in zip(model.q_values(), qs):
        torch.testing.assert_close(used.detach(), q)
    assert model.index_parameters() == [model.convs[0].q_logit, model.out.q_logit]


def test_global_q_is_one_parameter_shared_by_every_layer():
    torch.manual_seed(0)
    g, x = _graph(), torch.randn(30, 12)
    model = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, layers=3, q_mode="global",
                         delta=0.5, dropout=0.0, attn_dropout=0.0)
    assert model.index_parameters() == [model.shared_q_logit]
    assert all(conv.shared_q_logit is model.shared_q_logit for conv in model.ltga_layers())
    with torch.no_grad():
        model.shared_q_logit.fill_(0.8)
    model(g, x).sum().backward()
    expected = 1 + 0.5 * math.tanh(0.8)
    assert [float(q) for q in model.q_values()] == pytest.approx([expected] * 3)
    assert model.shared_q_logit.grad is not None and model.shared_q_logit.grad != 0


def test_same_seed_gives_gatv2_weights_and_loss():
    """Same seed, same weights; the losses (same dropout masks) agree in float64, where the two
    kernels' different summation orders cost ~1e-16, not float32's ~1e-7."""
    gen = torch.Generator().manual_seed(2)
    g, x, y = _graph(1), torch.randn(30, 12, generator=gen, dtype=torch.float64), torch.randint(0, 3, (30,), generator=gen)
    torch.manual_seed(3)
    gatv2 = create_model("gatv2", in_feats=12, num_classes=3, hidden=4, heads=2)
    torch.manual_seed(3)
    ltga = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, q_mode="head")
    for name, tensor in gatv2.state_dict().items():
        assert torch.equal(tensor, ltga.state_dict()[name]), name
    torch.manual_seed(5)
    a = torch.nn.functional.cross_entropy(gatv2.double()(g, x), y)
    torch.manual_seed(5)
    b = torch.nn.functional.cross_entropy(ltga.double()(g, x), y)
    assert float(a) == pytest.approx(float(b), abs=1e-10)


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


@pytest.mark.parametrize("option, value, message", [
    ("delta", 0.0, "delta is 0.0; it must be in (0, 2]"), ("delta", 2.5, "delta is 2.5; it must be in (0, 2]"),
    ("q", 0.0, "q is 0.0; it must be > 0"), ("edge_feats", -1, "edge_feats is -1; it must be >= 0"),
    ("alpha", 0.5, "alpha is 0.5; it must be >= 1"), ("layers", 0, "layers is 0; it must be >= 1"),
])
def test_declared_ranges_are_checked_on_construction(option, value, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("[", r"\[")):
        create_model("ltga", in_feats=4, num_classes=2, **{option: value})


# The paper's Table 11 (and Appendix F): trainable parameters of its Cora models, PyG layout (endpoint
# projections and output with biases), 2 layers, 8 heads of 64 (concatenated, then averaged), 1433
# features, 7 classes. Hand count: GATv2 = 2 (1433*512 + 512) + 512 + 512 [layer 1: W_l, W_r, a,
# bias] + 2 (512*56 + 56) + 56 + 7 [layer 2, bias over the head mean] = 1,526,959; + L*M = 16 q
# logits (Head); + the (2F_h) -> 8 -> M gates, 1,104 + 192 (Edge).
TABLE_11 = [
    ("GATv2", dict(normaliser="softmax"), 1_526_959),
    ("frozen q = 1", dict(q_mode="fixed", q=1.0), 1_526_959),
    ("LTGA-Head", dict(q_mode="head"), 1_526_975),
    ("temperature control", dict(normaliser="softmax", control="head_temperature"), 1_526_975),
    ("LTGA-Edge", dict(q_mode="edge"), 1_528_255),
    ("logit-bias control", dict(normaliser="softmax", control="edge_bias"), 1_528_255),
    ("logit-scale control", dict(normaliser="softmax", control="edge_scale"), 1_528_255),
]


@pytest.mark.parametrize("row, options, expected", TABLE_11, ids=[row for row, _, _ in TABLE_11])
def test_cora_parameter_counts_are_table_11s(row, options, expected):
    with torch.device("meta"):  # shapes only
        model = create_model("ltga", in_feats=1433, num_classes=7, hidden=64, heads=8, layers=2, output_bias=True,
                             **options)
    assert sum(p.numel() for p in model.parameters()) == expected


def test_without_output_bias_the_count_is_dgls_gatv2():
    with torch.device("meta"):
        ours = create_model("ltga", in_feats=1433, num_classes=7, normaliser="softmax")
        dgl_gatv2 = create_model("gatv2", in_feats=1433, num_classes=7)
        wide = create_model("ltga", in_feats=1433, num_classes=7, q_mode="edge", edge_mlp="wide")
    count = lambda m: sum(p.numel() for p in m.parameters())
    assert count(ours) == count(dgl_gatv2) == 1_526_959 - 512 - 7
    assert count(wide) - count(ours) == 9_248  # the wide gates (issue 16): 8,272 + 976


def test_output_bias_is_carried_once_by_the_head_mean():
    """PyG's averaging layer adds one [classes] bias after the mean: ours adds it to each head."""
    torch.manual_seed(0)
    g, x = _graph(), torch.randn(30, 12)
    model = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, q_mode="head", output_bias=True,
                         dropout=0.0, attn_dropout=0.0).eval()
    before = model(g, x)
    with torch.no_grad():
        model.out.bias.copy_(torch.tensor([0.5, -1.0, 2.0]))
    torch.testing.assert_close(model(g, x), before + torch.tensor([0.5, -1.0, 2.0]))


def test_edge_features_reach_every_layer_from_the_graph():
    gen = torch.Generator().manual_seed(0)
    g = _graph()
    edge_x = torch.randn(g.num_edges(), 3, generator=gen)
    torch.manual_seed(0)
    model = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, edge_feats=3, dropout=0.0,
                         attn_dropout=0.0).eval()
    x = torch.randn(30, 12, generator=gen)
    with pytest.raises(ValueError, match=r"edge_feats=3: pass edge_feat \[E, 3\] or set graph.edata\['feat'\]"):
        model(g, x)
    given = model(g, x, edge_x)
    g.edata["feat"] = edge_x
    torch.testing.assert_close(model(g, x), given)
    h = model.convs[0](g, x, edge_x).flatten(1)  # layer by layer, each with the same W_e input
    torch.testing.assert_close(given, model.out(g, h, edge_x).mean(1))
    assert all(conv.fc_edge.in_features == 3 for conv in model.ltga_layers())


def test_a_wide_gate_checkpoint_names_the_layout_to_build():
    wide = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, q_mode="edge", edge_mlp="wide")
    paper = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, q_mode="edge")
    with pytest.raises(ValueError, match="convs.0.edge_gate.src takes 8 inputs, edge_mlp='paper' takes 4: build the "
                                         "model with edge_mlp='wide'"):
        paper.load_state_dict(wide.state_dict())
    rebuilt = create_model("ltga", in_feats=12, num_classes=3, hidden=4, heads=2, q_mode="edge", edge_mlp="wide")
    rebuilt.load_state_dict(wide.state_dict())  # the named fix loads
