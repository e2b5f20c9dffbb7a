"""GPSLayer: structure, padding invariance, norms, gradients and parameter counts."""
import math

import dgl
import pytest
import torch
from torch.nn import functional as F

from zoo.nn.gps_layer import GPSLayer

DIM, HEADS = 16, 4


def random_graph(n, m, seed):
    gen = torch.Generator().manual_seed(seed)
    return dgl.graph((torch.randint(0, n, (m,), generator=gen), torch.randint(0, n, (m,), generator=gen)), num_nodes=n)


def inputs(graphs, seed=0):
    g = dgl.batch(graphs)
    gen = torch.Generator().manual_seed(seed)
    h = torch.randn(g.num_nodes(), DIM, dtype=torch.float64, generator=gen)
    e = torch.randn(g.num_edges(), DIM, dtype=torch.float64, generator=gen)
    return g, h, e


def trained_stats(layer):
    """Give every norm non-trivial running statistics and affine parameters."""
    torch.manual_seed(3)
    with torch.no_grad():
        for m in layer.modules():
            if isinstance(m, (torch.nn.BatchNorm1d, torch.nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.2)
            if isinstance(m, torch.nn.BatchNorm1d):
                m.running_mean.normal_(0, 0.2)
                m.running_var.uniform_(0.5, 1.5)
    return layer


@pytest.mark.parametrize("local", ["gatedgcn", "gine", "none"])
@pytest.mark.parametrize("gate", ["none", "output"])
def test_shapes_and_edge_features(local, gate):
    g, h, e = inputs([random_graph(4, 9, 1), random_graph(7, 15, 2)])
    layer = GPSLayer(DIM, HEADS, local=local, gate=gate).double()
    h_out, e_out = layer(g, h, e)
    assert h_out.shape == h.shape and e_out.shape == e.shape
    if local == "gatedgcn":
        assert not torch.allclose(e_out, e)
    else:
        assert e_out is e  # GINE and attention-only layers pass edges through


def test_attention_only_layer_accepts_no_edges():
    g, h, _ = inputs([random_graph(5, 8, 1)])
    h_out, e_out = GPSLayer(DIM, HEADS, local="none").double()(g, h)
    assert h_out.shape == h.shape and e_out is None


def test_gatedgcn_layer_follows_graphgps_formula():
    """Eval mode, dropout inactive: the documented parallel form, built from the layer's parts."""
    g, h, e = inputs([random_graph(5, 12, 1), random_graph(3, 4, 2)])
    layer = trained_stats(GPSLayer(DIM, HEADS, local="gatedgcn", gate="output", dropout=0.3).double()).eval()
    conv = layer.local
    with g.local_scope():  # DGL's GatedGCN message passing, written out
        g.ndata["Dh"], g.ndata["Eh"], g.ndata["Bh"] = conv.D(h), conv.E(h), conv.B(h)
        g.apply_edges(dgl.function.u_add_v("Dh", "Eh", "DEh"))
        e_hat = g.edata["DEh"] + conv.C(e)
        sigma = torch.sigmoid(e_hat)
        src, dst = g.edges()
        num = torch.zeros_like(h).index_add_(0, dst, sigma * g.ndata["Bh"][src])
        den = torch.zeros_like(h).index_add_(0, dst, sigma)
    h_local = F.relu(conv.bn_node(conv.A(h) + num / (den + 1e-6)))
    e_want = e + F.relu(conv.bn_edge(e_hat))
    mixed = layer.norm_local(h + h_local) + layer.norm_attn(h + layer.attn(g, h))
    h_want = layer.norm_ffn(mixed + layer.ffn(mixed))
    h_out, e_out = layer(g, h, e)
    torch.testing.assert_close(h_out, h_want)
    torch.testing.assert_close(e_out, e_want)


@pytest.mark.parametrize("local", ["gatedgcn", "gine"])
def test_padding_and_order_do_not_change_a_graph(local):
    layer = trained_stats(GPSLayer(DIM, HEADS, local=local, gate="output").double()).eval()
    small, big = random_graph(3, 5, 1), random_graph(10, 25, 2)
    g, h, e = inputs([small, big])
    h_pair, e_pair = layer(g, h, e)
    g_rev = dgl.batch([big, small])
    h_rev, e_rev = layer(g_rev, torch.cat([h[3:], h[:3]]), torch.cat([e[5:], e[:5]]))
    h_alone, e_alone = layer(dgl.batch([small]), h[:3], e[:5])
    torch.testing.assert_close(h_pair[:3], h_alone, atol=1e-10, rtol=0)
    torch.testing.assert_close(e_pair[:5], e_alone, atol=1e-10, rtol=0)
    torch.testing.assert_close(h_rev, torch.cat([h_pair[3:], h_pair[:3]]), atol=1e-10, rtol=0)
    torch.testing.assert_close(e_rev, torch.cat([e_pair[5:], e_pair[:5]]), atol=1e-10, rtol=0)


def test_layer_norm_is_per_graph_in_training_and_batch_norm_is_not():
    small, big = random_graph(3, 5, 1), random_graph(8, 20, 2)
    g, h, _ = inputs([small, big])
    for norm, independent in [("layer", True), ("batch", False)]:
        torch.manual_seed(0)
        layer = GPSLayer(DIM, HEADS, local="none", norm=norm).double().train()
        norm_type = torch.nn.LayerNorm if norm == "layer" else torch.nn.BatchNorm1d
        assert isinstance(layer.norm_attn, norm_type) and isinstance(layer.norm_ffn, norm_type)
        together = layer(g, h)[0][:3]
        alone = layer(dgl.batch([small]), h[:3])[0]
        assert torch.allclose(together, alone, atol=1e-10) == independent


@pytest.mark.parametrize("local", ["gatedgcn", "gine", "none"])
def test_gradients_reach_every_parameter(local):
    g, h, e = inputs([random_graph(5, 12, 1), random_graph(6, 14, 2)])
    layer = GPSLayer(DIM, HEADS, local=local, gate="output", dropout=0.1, attn_dropout=0.1).double()
    h_out, e_out = layer(g, h, e)
    gen = torch.Generator().manual_seed(9)
    loss = (h_out * torch.randn(h_out.shape, dtype=h.dtype, generator=gen)).sum()
    loss = loss + (e_out * torch.randn(e_out.shape, dtype=e.dtype, generator=gen)).sum()
    loss.backward()
    for name, p in layer.named_parameters():
        assert p.grad is not None and torch.isfinite(p.grad).all() and p.grad.abs().sum() > 0, name


def test_output_gate_adds_d_squared_plus_d_parameters():
    def count(**kw):
        return sum(p.numel() for p in GPSLayer(DIM, HEADS, local="gatedgcn", **kw).parameters())

    assert count(gate="output") - count(gate="none") == DIM * DIM + DIM
    assert count(gate="output", gate_per_head=False) - count(gate="none") == DIM * (DIM // HEADS) + DIM // HEADS


def test_unit_gate_layer_equals_ungated_layer():
    g, h, e = inputs([random_graph(4, 9, 1), random_graph(6, 11, 2)])
    plain = GPSLayer(DIM, HEADS, gate="none").double().eval()
    gated = GPSLayer(DIM, HEADS, gate="value", gate_activation="twice_sigmoid", gate_bias_init=0.0).double().eval()
    missing, unexpected = gated.load_state_dict(plain.state_dict(), strict=False)
    assert sorted(missing) == ["attn.gate_proj.bias", "attn.gate_proj.weight"] and not unexpected
    assert all(torch.equal(a, b) for a, b in zip(gated(g, h, e), plain(g, h, e)))


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="'gcn'"):
        GPSLayer(DIM, HEADS, local="gcn")
    with pytest.raises(ValueError, match="'graph'"):
        GPSLayer(DIM, HEADS, norm="graph")
    with pytest.raises(ValueError, match="1.5"):
        GPSLayer(DIM, HEADS, ffn_ratio=1.5)
    with pytest.raises(ValueError, match="dim=16, heads=3"):
        GPSLayer(DIM, 3)
    g, h, _ = inputs([random_graph(4, 6, 1)])
    with pytest.raises(ValueError, match="needs edge features"):
        GPSLayer(DIM, HEADS, local="gine").double()(g, h)


def test_ffn_activation_gelu_is_the_papers_and_relu_stays_the_default():
    """The SigGate-GT paper's FFN uses GELU (Section 6.2); GraphGPS's and this layer's default is
    ReLU. The activation has no parameters: the state dict is the same either way, and the
    FFN is Linear -> act -> dropout -> Linear -> dropout, checked in float64 on one input."""
    torch.manual_seed(0)
    relu = GPSLayer(DIM, HEADS, local="gine")
    torch.manual_seed(0)
    gelu = GPSLayer(DIM, HEADS, local="gine", ffn_activation="gelu")
    assert isinstance(relu.ffn[1], torch.nn.ReLU) and isinstance(gelu.ffn[1], torch.nn.GELU)
    assert {k: v.shape for k, v in relu.state_dict().items()} == {k: v.shape for k, v in gelu.state_dict().items()}
    x = torch.randn(7, DIM, dtype=torch.float64)
    ffn = gelu.ffn.double().eval()
    lin1, lin2 = ffn[0], ffn[3]
    hidden = x @ lin1.weight.T + lin1.bias
    exact_gelu = 0.5 * hidden * (1 + torch.erf(hidden / math.sqrt(2)))
    torch.testing.assert_close(ffn(x), exact_gelu @ lin2.weight.T + lin2.bias, atol=1e-12, rtol=0)
    with pytest.raises(ValueError, match="ffn_activation must be one of"):
        GPSLayer(DIM, HEADS, ffn_activation="swish")


NORMALISERS = [dict(normaliser="qsoftmax", q_mode="head"), dict(normaliser="qsoftmax", q_mode="layer"),
               dict(normaliser="entmax", alpha=1.5), dict(normaliser="entmax", alpha_mode="head", alpha=1.3),
               dict(normaliser="sparsemax")]


def moved_indices(layer, seed=4):
    """Learned q / alpha away from their initial values (q = 1 would hide a wrong normaliser)."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in layer.index_parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype))
    return layer


@pytest.mark.parametrize("local", ["gatedgcn", "ltga", "none"])
@pytest.mark.parametrize("options", NORMALISERS, ids=lambda o: "-".join(map(str, o.values())))
def test_padding_and_order_do_not_change_a_graph_for_every_normaliser(options, local):
    layer = moved_indices(trained_stats(GPSLayer(DIM, HEADS, local=local, gate="output", **options).double()).eval())
    small, big = random_graph(3, 5, 1), random_graph(10, 25, 2)
    g, h, e = inputs([small, big])
    h_pair, e_pair = layer(g, h, e)
    h_rev, e_rev = layer(dgl.batch([big, small]), torch.cat([h[3:], h[:3]]), torch.cat([e[5:], e[:5]]))
    h_alone, _ = layer(dgl.batch([small]), h[:3], e[:5])
    torch.testing.assert_close(h_pair[:3], h_alone, atol=1e-10, rtol=0)
    torch.testing.assert_close(h_rev, torch.cat([h_pair[3:], h_pair[:3]]), atol=1e-10, rtol=0)
    if e is not None and local != "none":
        torch.testing.assert_close(e_rev, torch.cat([e_pair[5:], e_pair[:5]]), atol=1e-10, rtol=0)
    # relabelling the nodes inside a graph permutes its rows
    perm = torch.randperm(13, generator=torch.Generator().manual_seed(0))
    inverse = torch.empty_like(perm)
    inverse[perm] = torch.arange(13)
    src, dst = g.edges()
    shuffled = dgl.graph((inverse[src], inverse[dst]), num_nodes=13)  # node perm[i] of g is node i here
    h_perm, _ = layer(shuffled, h[perm], e)
    torch.testing.assert_close(h_perm, layer(dgl.graph((src, dst), num_nodes=13), h, e)[0][perm], atol=1e-10, rtol=0)


def test_ltga_local_branch_is_ltgaconv_on_the_graph_with_self_loops():
    """local="ltga": LTGAConv (heads of dim / heads, edge features in the score) on the graph with one
    self-loop per node whose edge features are zero (DGL's add_self_loop with fill_data=0), heads
    concatenated, in the GraphGPS parallel form; q per head learned as 1 + delta tanh(a)."""
    g, h, e = inputs([random_graph(5, 12, 1), random_graph(3, 4, 2), dgl.graph(([], []), num_nodes=1)])
    layer = GPSLayer(DIM, HEADS, local="ltga", gate="output", normaliser="qsoftmax", delta=1.5)
    layer = moved_indices(trained_stats(layer.double()).eval())
    conv = layer.local
    assert (conv.num_heads, conv.out_feats, conv.fc_edge.in_features, conv.q_mode) == (HEADS, DIM // HEADS, DIM, "head")
    with g.local_scope():
        g.edata["feat"] = e
        looped = dgl.add_self_loop(g, fill_data=0.0)
        h_local = conv(looped, h, looped.edata["feat"]).flatten(1)
    mixed = layer.norm_local(h + h_local) + layer.norm_attn(h + layer.attn(g, h))
    h_out, e_out = layer(g, h, e)
    torch.testing.assert_close(h_out, layer.norm_ffn(mixed + layer.ffn(mixed)), atol=1e-12, rtol=0)
    assert e_out is e
    (a,) = conv.index_parameters()
    assert [p is a for p in layer.index_parameters()] == [False, True]  # the attention's q, then the branch's
    torch.testing.assert_close(layer.q_values()[1], (1 + 1.5 * torch.tanh(a)).clamp_min(0.05))  # LTGAConv's Q_MIN
    assert not GPSLayer(DIM, HEADS, local="gine").index_parameters()
    with pytest.raises(ValueError, match="local_q_mode must be one of"):
        GPSLayer(DIM, HEADS, local="ltga", local_q_mode="global")
