"""FAGCN against Bo et al.'s layer computed densely in float64, and its constant-gate reduction
against DGL's GraphConv."""
import math

import dgl
import pytest
import torch
from dgl.nn import GraphConv

from zoo.models import create_model

# the path 0-1-2-3 both ways and one directed edge 0 -> 3 (pins which end is i = destination)
SRC, DST = [0, 1, 1, 2, 2, 3, 0], [1, 0, 2, 1, 3, 2, 3]


def _graph():
    return dgl.add_self_loop(dgl.graph((SRC, DST), num_nodes=4))


def _dense_layer(layer, h):
    """sum_j tanh(g^T [h_i || h_j] + b) / sqrt(d_i d_j) h_j over in-edges j -> i, d the in-degree."""
    g_dst, g_src = layer.gate.weight[0].chunk(2)
    out = torch.zeros_like(h)
    degree = torch.bincount(torch.tensor(DST), minlength=4).double()
    for j, i in zip(SRC, DST):
        alpha = torch.tanh(h[i] @ g_dst + h[j] @ g_src + layer.gate.bias[0])
        out[i] += alpha / math.sqrt(degree[i] * degree[j]) * h[j]
    return out


def test_forward_matches_the_papers_layers():
    torch.manual_seed(0)
    x = torch.randn(4, 5, dtype=torch.float64)
    model = create_model("fagcn", in_feats=5, num_classes=3, hidden=6, layers=2, eps=0.3).double().eval()
    raw = h = torch.relu(model.input(x))
    for layer in model.layers:
        h = _dense_layer(layer, h) + 0.3 * raw
    torch.testing.assert_close(model(_graph(), x), model.output(h), rtol=1e-12, atol=1e-12)


def test_a_constant_gate_is_a_signed_gcn_filter():
    """With g = 0 every coefficient is tanh(b): the layer is tanh(b) D^-1/2 A D^-1/2 h, low-pass for
    b > 0 and high-pass for b < 0 (Bo et al.'s F_L and F_H, without their eps I term)."""
    torch.manual_seed(0)
    model = create_model("fagcn", in_feats=5, num_classes=3, hidden=6).double().eval()
    layer, h = model.layers[0], torch.randn(4, 6, dtype=torch.float64)
    graph = dgl.graph((SRC[:-1], DST[:-1]), num_nodes=4)  # undirected, as in the paper: in- = out-degree
    smooth = GraphConv(6, 6, weight=False, bias=False, norm="both")(graph, h)
    for coefficient in (0.5, -0.8):
        with torch.no_grad():
            layer.gate.weight.zero_()
            layer.gate.bias.fill_(math.atanh(coefficient))
        torch.testing.assert_close(layer(graph, h), coefficient * smooth, rtol=1e-12, atol=1e-12)


def test_self_loops_in_the_input_are_ignored():
    torch.manual_seed(0)
    x = torch.randn(4, 5, dtype=torch.float64)
    model = create_model("fagcn", in_feats=5, num_classes=3, hidden=6).double().eval()
    torch.testing.assert_close(model(dgl.graph((SRC, DST), num_nodes=4), x), model(_graph(), x), rtol=1e-12, atol=1e-12)


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = create_model("fagcn", in_feats=5, num_classes=3, hidden=6, dropout=0.0)
    loss = torch.nn.functional.cross_entropy(model(_graph(), torch.randn(4, 5)), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    for name, param in model.named_parameters():
        assert torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0, name


def test_a_sampled_block_is_refused_with_the_fix():
    model = create_model("fagcn", in_feats=5, num_classes=3)
    block = dgl.to_block(_graph(), dst_nodes=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="FAGCN trains full-batch only .* remove train.sampler"):
        model(block, torch.randn(block.num_src_nodes(), 5))
