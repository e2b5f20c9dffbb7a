"""Gated multi-head attention against torch.nn.MultiheadAttention and a dense per-graph loop."""
import math

import dgl
import pytest
import torch

from zoo.nn.gated_attention import GATE_ACTIVATIONS, GatedMultiheadAttention, to_dense_batch

DIM, HEADS = 12, 3
HEAD_DIM = DIM // HEADS


def batch_of(sizes):
    """A batch of edgeless graphs (attention ignores edges) with the given node counts."""
    return dgl.batch([dgl.graph(([], []), num_nodes=n) for n in sizes])


def make_attn(seed=0, **kwargs):
    torch.manual_seed(seed)
    attn = GatedMultiheadAttention(DIM, HEADS, **kwargs).double()
    with torch.no_grad():  # non-trivial biases so every term of the formulas is exercised
        attn.in_proj.bias.normal_(0, 0.3)
        attn.out_proj.bias.normal_(0, 0.3)
        if attn.gate_proj is not None:
            attn.gate_proj.weight.normal_(0, 0.4)
            attn.gate_proj.bias.normal_(0, 0.4)
    return attn.eval()


def copy_projections(dst, src):
    with torch.no_grad():
        dst.in_proj.load_state_dict(src.in_proj.state_dict())
        dst.out_proj.load_state_dict(src.out_proj.state_dict())


def features(n, seed=1):
    return torch.randn(n, DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(seed))


def reference(attn, x):
    """Eq. 3-4 of SigGate-GT written out for one graph ``x`` [n, D], head by head."""
    wq, wk, wv = attn.in_proj.weight.split(DIM)
    bq, bk, bv = attn.in_proj.bias.split(DIM)
    act = GATE_ACTIVATIONS[attn.gate_activation]
    gate_all = act(x @ attn.gate_proj.weight.T + attn.gate_proj.bias) if attn.gate != "none" else None
    heads = []
    for k in range(HEADS):
        s = slice(k * HEAD_DIM, (k + 1) * HEAD_DIM)
        q, key, v = x @ wq[s].T + bq[s], x @ wk[s].T + bk[s], x @ wv[s].T + bv[s]
        logits = q @ key.T / math.sqrt(HEAD_DIM)
        if attn.gate == "none":
            heads.append(torch.softmax(logits, 1) @ v)
            continue
        width = 1 if attn.gate == "logit" else HEAD_DIM
        gk = gate_all[:, k * width:(k + 1) * width] if attn.gate_per_head else gate_all[:, :width]
        if attn.gate == "output":
            heads.append((torch.softmax(logits, 1) @ v) * gk)
        elif attn.gate == "value":
            heads.append(torch.softmax(logits, 1) @ (v * gk))
        else:
            heads.append(torch.softmax(logits * gk, 1) @ v)
    return torch.cat(heads, 1) @ attn.out_proj.weight.T + attn.out_proj.bias


def test_to_dense_batch_round_trip_with_empty_graph():
    h = torch.arange(7.0)[:, None]
    dense, mask = to_dense_batch(h, torch.tensor([2, 0, 4, 1]))
    assert dense.shape == (4, 4, 1)
    assert mask.sum(1).tolist() == [2, 0, 4, 1]
    assert dense[2, :, 0].tolist() == [2.0, 3.0, 4.0, 5.0]
    assert torch.equal(dense[mask], h)
    with pytest.raises(ValueError, match="sums to 6"):
        to_dense_batch(h, torch.tensor([2, 4]))


def test_ungated_matches_torch_multihead_attention():
    sizes = [3, 7, 1, 5]
    attn = make_attn(gate="none")
    mha = torch.nn.MultiheadAttention(DIM, HEADS, batch_first=True).double().eval()
    with torch.no_grad():
        mha.in_proj_weight.copy_(attn.in_proj.weight)
        mha.in_proj_bias.copy_(attn.in_proj.bias)
        mha.out_proj.weight.copy_(attn.out_proj.weight)
        mha.out_proj.bias.copy_(attn.out_proj.bias)
    h = features(sum(sizes))
    got = attn(batch_of(sizes), h)
    want = torch.cat([mha(x[None], x[None], x[None], need_weights=False)[0][0] for x in h.split(sizes)])
    torch.testing.assert_close(got, want, atol=1e-10, rtol=0)
    # the padded path with torch's key padding mask agrees too
    dense, mask = to_dense_batch(h, torch.tensor(sizes))
    padded = mha(dense, dense, dense, key_padding_mask=~mask, need_weights=False)[0][mask]
    torch.testing.assert_close(got, padded, atol=1e-10, rtol=0)


@pytest.mark.parametrize("gate", ["output", "value", "logit"])
def test_unit_gate_reduces_to_ungated_exactly(gate):
    plain = make_attn(gate="none")
    gated = make_attn(seed=5, gate=gate, gate_activation="twice_sigmoid")
    copy_projections(gated, plain)
    with torch.no_grad():  # 2 * sigmoid(0) = 1 everywhere
        gated.gate_proj.weight.zero_()
        gated.gate_proj.bias.zero_()
    g, h = batch_of([4, 6]), features(10)
    assert torch.equal(gated(g, h), plain(g, h))


@pytest.mark.parametrize("gate", ["output", "value"])
@pytest.mark.parametrize("per_head", [True, False])
def test_constant_gate_scales_heads(gate, per_head):
    gated, plain = _constant_gate(3.0, gate=gate, gate_per_head=per_head)
    torch.testing.assert_close(gated, torch.sigmoid(torch.tensor(3.0)) * plain)


def _constant_gate(bias, **gate):
    """Outputs (minus the output bias) of a gated module with W_g = 0 and gate bias ``bias``, and
    of the ungated module with the same projections."""
    plain = make_attn(gate="none")
    gated = make_attn(seed=5, **gate)
    copy_projections(gated, plain)
    with torch.no_grad():
        gated.gate_proj.weight.zero_()
        gated.gate_proj.bias.fill_(bias)
    g, h = batch_of([4, 6]), features(10)
    out_bias = plain.out_proj.bias
    return gated(g, h) - out_bias, plain(g, h) - out_bias


def test_constant_logit_gate_is_a_temperature():
    c = 1.7
    plain = make_attn(gate="none")
    gated = make_attn(seed=5, gate="logit", gate_activation="relu")
    copy_projections(gated, plain)
    with torch.no_grad():
        gated.gate_proj.weight.zero_()
        gated.gate_proj.bias.fill_(c)
        plain.in_proj.weight[:DIM] *= c  # scaling Q by c scales every logit by c
        plain.in_proj.bias[:DIM] *= c
    g, h = batch_of([4, 6]), features(10)
    torch.testing.assert_close(gated(g, h), plain(g, h))


def test_zero_logit_gate_averages_values_over_own_graph():
    attn = make_attn(gate="logit", gate_activation="relu")
    with torch.no_grad():
        attn.gate_proj.weight.zero_()
        attn.gate_proj.bias.fill_(-1.0)  # relu(-1) = 0: all logits 0, uniform weights
    sizes = [2, 5]
    h = features(7)
    values = h @ attn.in_proj.weight[2 * DIM:].T + attn.in_proj.bias[2 * DIM:]
    mean = torch.cat([v.mean(0, keepdim=True).expand(len(v), -1) for v in values.split(sizes)])
    torch.testing.assert_close(attn(batch_of(sizes), h), attn.out_proj(mean))


@pytest.mark.parametrize(
    "gate,per_head,act",
    [("output", True, "sigmoid"), ("output", False, "tanh"), ("value", True, "twice_sigmoid"),
     ("output", True, "sigmoid_squared"), ("logit", True, "sigmoid_squared"), ("output", True, "sigmoid2"),
     ("value", False, "sigmoid"), ("logit", True, "sigmoid"), ("logit", False, "relu"), ("none", True, "sigmoid")],
)
def test_matches_dense_per_graph_reference(gate, per_head, act):
    sizes = [5, 1, 8, 3]
    attn = make_attn(gate=gate, gate_per_head=per_head, gate_activation=act)
    h = features(sum(sizes))
    want = torch.cat([reference(attn, x) for x in h.split(sizes)])
    torch.testing.assert_close(attn(batch_of(sizes), h), want, atol=1e-10, rtol=0)


@pytest.mark.parametrize("gate", ["none", "output", "value", "logit"])
def test_padding_and_graph_order_are_invisible(gate):
    attn = make_attn(gate=gate)
    small, big, mid = features(3, seed=2), features(9, seed=3), features(5, seed=4)
    alone = attn(batch_of([3]), small)
    padded = attn(batch_of([3, 9]), torch.cat([small, big]))[:3]  # padded up to 9 nodes
    torch.testing.assert_close(padded, alone, atol=1e-10, rtol=0)
    forward = attn(batch_of([3, 9, 5]), torch.cat([small, big, mid]))
    permuted = attn(batch_of([5, 3, 9]), torch.cat([mid, small, big]))
    torch.testing.assert_close(permuted, torch.cat([forward[12:], forward[:12]]), atol=1e-10, rtol=0)


def test_record_keeps_gate_and_weights():
    attn = make_attn(gate="output", record=True)
    sizes = [2, 4]
    attn(batch_of(sizes), features(6))
    assert attn.last_gate.shape == (6, HEADS, HEAD_DIM) and not attn.last_gate.requires_grad
    assert attn.last_attn.shape == (2, HEADS, 4, 4)
    torch.testing.assert_close(attn.last_attn.sum(-1), torch.ones(2, HEADS, 4, dtype=torch.float64))
    assert attn.last_attn[0, :, :, 2:].abs().max() == 0  # padded keys get no weight
    logit = make_attn(gate="logit", gate_per_head=False, record=True)
    logit(batch_of(sizes), features(6))
    assert logit.last_gate.shape == (6, HEADS, 1)
    assert torch.equal(logit.last_gate[:, 0], logit.last_gate[:, 2])  # shared over heads
    silent = make_attn(gate="output")
    silent(batch_of(sizes), features(6))
    assert silent.last_gate is None and silent.last_attn is None


@pytest.mark.parametrize(
    "gate,per_head,extra",
    [("none", True, 0), ("output", True, DIM * DIM + DIM), ("value", True, DIM * DIM + DIM),
     ("output", False, DIM * HEAD_DIM + HEAD_DIM), ("logit", True, DIM * HEADS + HEADS), ("logit", False, DIM + 1)],
)
def test_gate_parameter_count(gate, per_head, extra):
    count = sum(p.numel() for p in GatedMultiheadAttention(DIM, HEADS, gate=gate, gate_per_head=per_head).parameters())
    assert count == 4 * DIM * DIM + 4 * DIM + extra


def test_default_gate_init_and_gradients():
    attn = GatedMultiheadAttention(DIM, HEADS, gate="output")
    assert attn.gate_proj.weight.abs().max() == 0 and torch.all(attn.gate_proj.bias == 0.5)
    out = attn(batch_of([3, 4]), torch.randn(7, DIM))
    (out * torch.randn_like(out)).sum().backward()
    for name, p in attn.named_parameters():
        assert p.grad is not None and p.grad.abs().sum() > 0, name


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="dim=10, heads=3"):
        GatedMultiheadAttention(10, 3)
    with pytest.raises(ValueError, match="'gated'"):
        GatedMultiheadAttention(12, 3, gate="gated")
    with pytest.raises(ValueError, match="'softplus'"):
        GatedMultiheadAttention(12, 3, gate="output", gate_activation="softplus")
    with pytest.raises(ValueError, match=r"\[N, 12\]"):
        GatedMultiheadAttention(12, 3)(batch_of([2]), torch.randn(2, 8))


def test_gate_activations_by_hand():
    """The paper's Table 11 activations, from hand-computed values: sigma(z)^2 is the square of the
    logistic sigmoid (not 2 sigma(z)); twice_sigmoid is 2 sigma(z), and its old name sigmoid2
    still means 2 sigma(z), so recipes and checkpoints written with it keep their meaning."""
    z = torch.tensor([-2.0, 0.0, 0.5, 3.0], dtype=torch.float64)
    sig = [1 / (1 + math.exp(2.0)), 0.5, 1 / (1 + math.exp(-0.5)), 1 / (1 + math.exp(-3.0))]
    want = {
        "sigmoid": sig,
        "sigmoid_squared": [s * s for s in sig],  # sigma(0) ^ 2 = 0.25, sigma(0.5) ^ 2 = 0.3874
        "twice_sigmoid": [2 * s for s in sig],
        "sigmoid2": [2 * s for s in sig],
        "tanh": [math.tanh(v) for v in (-2.0, 0.0, 0.5, 3.0)],
        "relu": [0.0, 0.0, 0.5, 3.0],
    }
    assert set(GATE_ACTIVATIONS) == set(want)
    for name, values in want.items():
        torch.testing.assert_close(GATE_ACTIVATIONS[name](z), torch.tensor(values, dtype=torch.float64),
                                   atol=1e-15, rtol=0, msg=name)
    assert abs(want["sigmoid_squared"][2] - 0.38745) < 1e-5
    assert all(0 < v < 1 for v in want["sigmoid_squared"])  # bounded like sigma, and below it
    assert all(a < b for a, b in zip(want["sigmoid_squared"], sig))


def test_sigmoid_squared_gate_starts_at_sigma_of_the_bias_squared():
    """With W_g = 0 and the paper's bias 0.5, a sigma^2 output gate scales every head by
    sigma(0.5)^2 = 0.3874 (a 2 sigma gate would scale by 1.2449)."""
    gated, plain = _constant_gate(0.5, gate="output", gate_activation="sigmoid_squared")
    scale = (1 / (1 + math.exp(-0.5))) ** 2
    torch.testing.assert_close(gated, scale * plain, atol=1e-12, rtol=0)


def test_logit_gate_is_the_papers_g3_element_by_element():
    """Table 10's G3, softmax(sigma(.) * Q K^T / sqrt(d_k)) V, written out entry by entry in float64:
    head k's gate is sigma(x_i w_k + b_k) for query node i (the paper gives the gate only node
    inputs), and the Hadamard product multiplies entry (i, j) of the scaled logits by it. Every
    row of the attention weights still sums to one (G3 keeps the conservation constraint)."""
    attn = make_attn(gate="logit", gate_per_head=True, gate_activation="sigmoid", record=True)
    x = features(5, seed=7)
    wq, wk, wv = attn.in_proj.weight.split(DIM)
    bq, bk, bv = attn.in_proj.bias.split(DIM)
    heads = []
    for k in range(HEADS):
        s = slice(k * HEAD_DIM, (k + 1) * HEAD_DIM)
        q, key, v = x @ wq[s].T + bq[s], x @ wk[s].T + bk[s], x @ wv[s].T + bv[s]
        g = [1 / (1 + math.exp(-float(x[i] @ attn.gate_proj.weight[k] + attn.gate_proj.bias[k]))) for i in range(5)]
        out = torch.zeros(5, HEAD_DIM, dtype=torch.float64)
        for i in range(5):
            logits = [g[i] * float(q[i] @ key[j]) / math.sqrt(HEAD_DIM) for j in range(5)]
            top = max(logits)
            weights = [math.exp(a - top) for a in logits]
            total = sum(weights)
            for j in range(5):
                out[i] += weights[j] / total * v[j]
        heads.append(out)
    want = torch.cat(heads, 1) @ attn.out_proj.weight.T + attn.out_proj.bias
    torch.testing.assert_close(attn(batch_of([5]), x), want, atol=1e-12, rtol=0)
    torch.testing.assert_close(attn.last_attn.sum(-1), torch.ones(1, HEADS, 5, dtype=torch.float64))
