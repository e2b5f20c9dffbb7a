"""The optimised GPS layer and SignNet against straightforward float64 references.

The references below are written independently of the zoo's code: a per-graph loop for the
attention, index_add message passing for GatedGCN, batch norm from its formula, and SignNet's
BatchNorm on ``x[present]`` scattered back into zeros. Forward outputs and every gradient must
agree to float rounding (1e-10 in float64).
"""
from __future__ import annotations

import copy
import math

import dgl
import pytest
import torch
from torch.nn import functional as F

from zoo.nn.gated_attention import GatedMultiheadAttention
from zoo.nn.gps_layer import GPSLayer
from zoo.nn.positional_encoders import SignNetLapPE

TOL = 1e-10


def _graphs(seed: int = 0) -> dgl.DGLGraph:
    gen = torch.Generator().manual_seed(seed)
    graphs = []
    for n in (5, 9, 3, 7):
        src = torch.randint(0, n, (2 * n,), generator=gen)
        dst = torch.randint(0, n, (2 * n,), generator=gen)
        graphs.append(dgl.graph((src, dst), num_nodes=n))
    return dgl.batch(graphs)


def _lin(module, x):
    return x @ module.weight.T + module.bias


def _bn(module, x):
    """Training-mode batch norm from its formula (biased batch variance)."""
    mean = x.mean(0)
    var = ((x - mean) ** 2).mean(0)
    return (x - mean) / torch.sqrt(var + module.eps) * module.weight + module.bias


def _attention(attn: GatedMultiheadAttention, g, h):
    dk, outs, start = attn.head_dim, [], 0
    for n in g.batch_num_nodes().tolist():
        x = h[start:start + n]
        start += n
        q, k, v = _lin(attn.in_proj, x).split(attn.dim, -1)
        gate = None if attn.gate_proj is None else torch.sigmoid(_lin(attn.gate_proj, x))
        heads = []
        for i in range(attn.heads):
            cols = slice(i * dk, (i + 1) * dk)
            head = torch.softmax(q[:, cols] @ k[:, cols].T / math.sqrt(dk), -1) @ v[:, cols]
            heads.append(head if gate is None else head * gate[:, cols])
        outs.append(_lin(attn.out_proj, torch.cat(heads, 1)))
    return torch.cat(outs)


def _gatedgcn(conv, g, h, e):
    src, dst = g.edges()
    e_new = _lin(conv.D, h)[src] + _lin(conv.E, h)[dst] + _lin(conv.C, e)
    sigma = torch.sigmoid(e_new)
    num = h.new_zeros(h.shape[0], e_new.shape[1]).index_add(0, dst, sigma * _lin(conv.B, h)[src])
    den = h.new_zeros(h.shape[0], e_new.shape[1]).index_add(0, dst, sigma)
    h_new = _lin(conv.A, h) + num / (den + 1e-6)
    return torch.relu(_bn(conv.bn_node, h_new)), torch.relu(_bn(conv.bn_edge, e_new))


def _layer(layer: GPSLayer, g, h, e):
    out = _bn(layer.norm_attn, h + _attention(layer.attn, g, h))
    h_local, e_local = _gatedgcn(layer.local, g, h, e)
    out = out + _bn(layer.norm_local, h + h_local)
    act = F.gelu if layer.ffn_activation == "gelu" else torch.relu
    ffn = _lin(layer.ffn[3], act(_lin(layer.ffn[0], out)))
    return _bn(layer.norm_ffn, out + ffn), e + e_local


def _grads(outputs, leaves):
    loss = sum((torch.sin(o) * torch.arange(o.numel(), dtype=o.dtype).view(o.shape).cos()).sum() for o in outputs)
    return torch.autograd.grad(loss, leaves)


@pytest.mark.parametrize("gate", ["output", "none"])
def test_gps_layer_matches_float64_reference(gate):
    torch.manual_seed(0)
    g = _graphs()
    layer = GPSLayer(16, heads=4, local="gatedgcn", gate=gate, ffn_activation="gelu").double().train()
    with torch.no_grad():  # move every parameter off its initial value (zero gate weight, unit BN scale)
        for p in layer.parameters():
            p.add_(0.3 * torch.randn_like(p))
    h = torch.randn(g.num_nodes(), 16, dtype=torch.float64, requires_grad=True)
    e = torch.randn(g.num_edges(), 16, dtype=torch.float64, requires_grad=True)
    leaves = [h, e, *layer.parameters()]
    got, want = layer(g, h, e), _layer(layer, g, h, e)
    for a, b in zip(got, want):
        assert (a - b).abs().max() < TOL
    for a, b in zip(_grads(got, leaves), _grads(want, leaves)):
        assert (a - b).abs().max() < TOL


def test_attention_index_follows_the_batch():
    """The per-batch index is reused on the same graph and rebuilt for another batch structure."""
    torch.manual_seed(0)
    attn = GatedMultiheadAttention(8, heads=2, gate="output").double()
    g = _graphs()
    h = torch.randn(g.num_nodes(), 8, dtype=torch.float64)
    first = attn(g, h)
    assert (attn(g, h) - first).abs().max() == 0
    assert (first - _attention(attn, g, h)).abs().max() < TOL
    g.set_batch_num_nodes(torch.tensor([14, 10]))
    g.set_batch_num_edges(torch.tensor([28, 20]))
    assert (attn(g, h) - _attention(attn, g, h)).abs().max() < TOL
    other = _graphs(seed=1)
    with pytest.raises(ValueError):
        attn(other, torch.randn(other.num_nodes() + 1, 8, dtype=torch.float64))


def _signnet_phi_reference(self, g, x, present):
    for i, conv in enumerate(self.convs):
        if i:
            normed = x.new_zeros(x.shape)
            normed[present] = torch.relu(self.norms[i - 1](x[present]))
            x = normed
        x = conv(g, x)
    return x, None  # phi's whole output; no Linear left for forward to apply after the sum


@pytest.mark.parametrize("missing", [True, False])
def test_signnet_matches_masked_reference(missing):
    torch.manual_seed(0)
    g = _graphs()
    model = SignNetLapPE(8).double().train()
    reference = copy.deepcopy(model)
    reference._phi = _signnet_phi_reference.__get__(reference)
    eigvec = torch.randn(g.num_nodes(), 6, dtype=torch.float64)
    if missing:  # graphs smaller than k have NaN-padded eigenvectors
        eigvec[14:17, 3:] = float("nan")
        eigvec[:5, 5:] = float("nan")
    got, want = model(g, eigvec), reference(g, eigvec)
    assert (got - want).abs().max() < TOL
    for a, b in zip(_grads([got], list(model.parameters())), _grads([want], list(reference.parameters()))):
        assert (a - b).abs().max() < TOL
    for a, b in zip(model.state_dict().values(), reference.state_dict().values()):  # running statistics too
        assert (a.double() - b.double()).abs().max() < TOL
