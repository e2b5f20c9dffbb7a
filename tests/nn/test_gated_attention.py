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


# ---- normalisers other than softmax (issue 18) ----------------------------------------------------

NORMALISED = [("qsoftmax", {"q_mode": "head"}), ("qsoftmax", {"q_mode": "layer"}), ("qsoftmax", {"q_mode": "fixed", "q": 1.6}),
              ("entmax", {"alpha": 1.5}), ("entmax", {"alpha_mode": "head", "alpha": 1.3}), ("sparsemax", {})]
FROZEN_COMMIT = "6b71259eed58bfc615373b70173379402148018d"  # the last GatedMultiheadAttention before normalisers


def frozen_module():
    """The committed GatedMultiheadAttention of ``FROZEN_COMMIT``, loaded from git into a fresh module."""
    import subprocess
    import types
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    try:
        source = subprocess.run(["git", "show", f"{FROZEN_COMMIT}:zoo/nn/gated_attention.py"], cwd=root,
                                capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("needs the repository's git history (the frozen softmax module is read from it)")
    module = types.ModuleType("frozen_gated_attention")
    exec(compile(source, f"{FROZEN_COMMIT[:7]}:zoo/nn/gated_attention.py", "exec"), module.__dict__)
    return module


def with_indices(attn, seed=11):
    """Move learned q / alpha away from their initial values, so gradients and q are non-trivial."""
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in attn.index_parameters():
            p.copy_(torch.randn(p.shape, generator=gen, dtype=p.dtype) * 0.5)
    return attn


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("gate", ["none", "output", "value", "logit"])
def test_softmax_is_the_committed_module_up_to_float_rounding(gate, dtype):
    """Same weights and inputs: the output, the weights of real (query, key) pairs and every gradient
    equal the module as committed before the normalisers existed, to float rounding (training mode).

    Bit for bit until the projections moved out of the padded block and the block became
    head-major (session 32): the matmuls now run over other row counts and layouts, which changes
    the order of float sums, and dropout draws its mask in head-major order (so this runs without
    it; :func:`test_attention_dropout_keeps_the_expected_output` covers dropout)."""
    old = frozen_module().GatedMultiheadAttention(DIM, HEADS, gate=gate, record=True).to(dtype)
    new = GatedMultiheadAttention(DIM, HEADS, gate=gate, record=True).to(dtype)
    new.load_state_dict(old.state_dict())
    assert new.normaliser == "softmax" and not new.index_parameters()
    g = batch_of([5, 1, 9, 3, 0, 7])
    h = features(25).to(dtype)
    outputs, grads = [], []
    for attn in (old, new):
        x = h.clone().requires_grad_()
        out = attn(g, x)
        out.backward(torch.ones_like(out).cumsum(0))
        outputs.append((out, attn.last_attn, attn.last_gate))
        grads.append([x.grad] + [p.grad for p in attn.parameters()])
    tight = {"rtol": 1e-10, "atol": 1e-10} if dtype == torch.float64 else {"rtol": 1e-4, "atol": 1e-5}
    torch.testing.assert_close(outputs[1][0], outputs[0][0], **tight)
    mask = new.last_mask
    real = (mask[:, None, :, None] & mask[:, None, None, :]).expand_as(outputs[1][1])
    torch.testing.assert_close(outputs[1][1][real], outputs[0][1][real], **tight)
    padded_keys = (mask[:, None, :, None] & ~mask[:, None, None, :]).expand_as(real)  # of real queries
    assert bool(padded_keys.any()) and bool((outputs[1][1][padded_keys] == 0).all())
    if gate != "none":
        torch.testing.assert_close(outputs[1][2], outputs[0][2], **tight)
    for a, b in zip(grads[1], grads[0]):
        torch.testing.assert_close(a, b, **tight)


def test_attention_dropout_keeps_the_expected_output():
    """Inverted dropout on the weights: the mean output over 2000 training-mode draws (p = 0.2) is
    the eval-mode output within 5 standard errors in every entry (the largest seen is about 3;
    dropout without the 1 / (1 - p) scale misses by about 20% of each value), and single draws
    differ from it."""
    torch.manual_seed(0)
    attn = GatedMultiheadAttention(DIM, HEADS, gate="output", attn_dropout=0.2, gate_weight_init="xavier").double()
    g, h = batch_of([5, 1, 9, 3, 7]), features(25).double()
    with torch.no_grad():
        expected = attn.eval()(g, h)
        attn.train()
        draws = torch.stack([attn(g, h) for _ in range(2000)])
    assert not torch.allclose(draws[0], expected)
    standard_error = draws.std(0) / len(draws) ** 0.5
    assert bool(((draws.mean(0) - expected).abs() <= 5 * standard_error + 1e-12).all())


@pytest.mark.parametrize("gate", ["none", "output", "logit"])
@pytest.mark.parametrize("options", [{"normaliser": "qsoftmax", "q_mode": "head"}, {"normaliser": "qsoftmax", "q_mode": "layer"},
                                     {"normaliser": "qsoftmax", "q_mode": "fixed", "q": 1.0},
                                     {"normaliser": "entmax", "alpha": 1.0}])
def test_q_one_is_softmax(gate, options):
    """q = 1 (the learned index at init, a = 0, or a fixed q = 1; entmax at alpha = 1) is the softmax
    module to 1e-6 in float32, forward and input gradient."""
    torch.manual_seed(0)
    plain = GatedMultiheadAttention(DIM, HEADS, gate=gate)
    torch.manual_seed(0)
    q_one = GatedMultiheadAttention(DIM, HEADS, gate=gate, **options)
    q_one.load_state_dict(plain.state_dict(), strict=False)
    g, h = batch_of([4, 9, 2]), features(15).float()
    results = []
    for attn in (plain, q_one):
        x = h.clone().requires_grad_()
        out = attn(g, x)
        (out * torch.arange(out.numel()).view_as(out).sin()).sum().backward()
        results.append((out, x.grad))
    torch.testing.assert_close(results[1][0], results[0][0], atol=1e-6, rtol=0)
    torch.testing.assert_close(results[1][1], results[0][1], atol=1e-6, rtol=0)
    if q_one.q_logit is not None:
        assert torch.equal(q_one.current_q(), torch.ones_like(q_one.q_logit))


@pytest.mark.parametrize("gate", ["none", "output", "value", "logit"])
@pytest.mark.parametrize("normaliser,options", NORMALISED)
def test_padding_gets_exactly_zero_weight_and_changes_nothing(normaliser, options, gate):
    """A graph in a batch with a bigger graph (padded to its width) gets the same output as alone, its
    padded keys exactly zero weight; a row of real keys sums to one."""
    attn = with_indices(make_attn(gate=gate, normaliser=normaliser, record=True, **options))
    small, big = features(3, seed=2), features(13, seed=3)
    alone = attn(batch_of([3]), small)
    weights_alone = attn.last_attn[0]
    batched = attn(batch_of([3, 13]), torch.cat([small, big]))
    weights = attn.last_attn[0]  # [H, 13, 13]: graph 0 padded from 3 to 13 keys
    torch.testing.assert_close(batched[:3], alone, atol=1e-12, rtol=0)
    assert torch.equal(weights[:, :, 3:], torch.zeros_like(weights[:, :, 3:]))
    torch.testing.assert_close(weights[:, :3, :3], weights_alone, atol=1e-13, rtol=0)
    torch.testing.assert_close(weights[:, :3].sum(-1), torch.ones(HEADS, 3, dtype=torch.float64))
    empty = attn(batch_of([0, 3]), small)  # an empty graph's block row has no key at all
    torch.testing.assert_close(empty, alone, atol=1e-12, rtol=0)


def reference_q(attn, x, q):
    """Float64 q-softmax attention on one graph, head by head (LTGA Eq. 2 on Q K^T / sqrt(d_k)), q
    a tensor per head; ungated or output-gated."""
    wq, wk, wv = attn.in_proj.weight.split(DIM)
    bq, bk, bv = attn.in_proj.bias.split(DIM)
    gate = torch.sigmoid(x @ attn.gate_proj.weight.T + attn.gate_proj.bias) if attn.gate == "output" else None
    heads = []
    for k in range(HEADS):
        s = slice(k * HEAD_DIM, (k + 1) * HEAD_DIM)
        logits = (x @ wq[s].T + bq[s]) @ (x @ wk[s].T + bk[s]).T / math.sqrt(HEAD_DIM)
        z = logits - logits.max(1, keepdim=True).values
        e = torch.clamp(1 + (q[k] - 1) * z, min=0) ** (1 / (q[k] - 1))
        head = e / e.sum(1, keepdim=True) @ (x @ wv[s].T + bv[s])
        heads.append(head if gate is None else head * gate[:, s])
    return torch.cat(heads, 1) @ attn.out_proj.weight.T + attn.out_proj.bias


@pytest.mark.parametrize("gate", ["none", "output"])
@pytest.mark.parametrize("q_mode", ["head", "layer"])
def test_q_softmax_forward_and_gradients_match_a_float64_reference(q_mode, gate):
    """Output, and gradients for the input, the projections that make the logits and the index
    parameter a of q = 1 + delta tanh(a), against plain autograd on the formula per graph."""
    attn = make_attn(gate=gate, normaliser="qsoftmax", q_mode=q_mode, delta=1.5)
    with torch.no_grad():
        attn.q_logit.copy_(torch.tensor([0.6, -0.4, 0.9], dtype=torch.float64)[:attn.q_logit.numel()].reshape(attn.q_logit.shape))
    sizes = [4, 7, 2]
    h = features(sum(sizes)).requires_grad_()
    upstream = torch.randn(sum(sizes), DIM, dtype=torch.float64, generator=torch.Generator().manual_seed(8))
    (attn(batch_of(sizes), h) * upstream).sum().backward()
    got = [h.grad, attn.in_proj.weight.grad, attn.q_logit.grad]

    ref = make_attn(gate=gate, normaliser="qsoftmax", q_mode=q_mode, delta=1.5)
    ref.load_state_dict(attn.state_dict())
    x = h.detach().clone().requires_grad_()
    q = (1 + 1.5 * torch.tanh(ref.q_logit)).expand(HEADS)
    want_out = torch.cat([reference_q(ref, part, q) for part in x.split(sizes)])
    (want_out * upstream).sum().backward()
    torch.testing.assert_close(attn(batch_of(sizes), h.detach()), want_out.detach(), atol=1e-12, rtol=0)
    for a, b in zip(got, [x.grad, ref.in_proj.weight.grad, ref.q_logit.grad]):
        torch.testing.assert_close(a, b, atol=1e-10, rtol=1e-9)


@pytest.mark.parametrize("normaliser,options", [("entmax", {"alpha_mode": "head", "alpha": 1.4}),
                                                ("entmax", {"alpha": 1.7}), ("sparsemax", {})])
def test_entmax_gradients_match_finite_differences(normaliser, options):
    """Entmax and sparsemax gradients (input and learned alpha) against float64 finite differences."""
    attn = with_indices(make_attn(gate="output", normaliser=normaliser, **options))
    g = batch_of([3, 4])
    h = features(7).requires_grad_()
    index = [p.detach().clone().requires_grad_() for p in attn.index_parameters()]

    def function(h, *index):  # alpha through the module's own map b -> 1 + sigmoid(b)
        if not index:
            return attn(g, h)
        saved = attn.alpha_logit
        try:
            del attn.alpha_logit
            attn.alpha_logit = index[0]
            return attn(g, h)
        finally:
            attn.alpha_logit = saved

    assert torch.autograd.gradcheck(function, (h, *index), atol=1e-7, rtol=1e-6)


def test_entmax_and_sparsemax_prune_and_q_above_one_prunes():
    """Sparse normalisers give exact zeros on real keys (a fixed large-score gap), softmax none."""
    x = features(12, seed=4) * 3
    for normaliser, options in [("sparsemax", {}), ("entmax", {"alpha": 1.8}), ("qsoftmax", {"q_mode": "fixed", "q": 1.9})]:
        attn = make_attn(normaliser=normaliser, record=True, **options)
        attn(batch_of([12]), x)
        assert (attn.last_attn == 0).any(), normaliser
    soft = make_attn(record=True)
    soft(batch_of([12]), x)
    assert (soft.last_attn > 0).all()


def test_index_parameters_and_bad_options_are_named():
    assert [p.shape for p in GatedMultiheadAttention(DIM, HEADS, normaliser="qsoftmax").index_parameters()] == [(HEADS,)]
    assert [p.shape for p in GatedMultiheadAttention(DIM, HEADS, normaliser="qsoftmax", q_mode="layer").index_parameters()] == [()]
    assert not GatedMultiheadAttention(DIM, HEADS, normaliser="qsoftmax", q_mode="fixed", q=1.5).index_parameters()
    learned = GatedMultiheadAttention(DIM, HEADS, normaliser="entmax", alpha_mode="head", alpha=1.3)
    torch.testing.assert_close(learned.current_alpha(), torch.full((HEADS,), 1.3))
    assert not GatedMultiheadAttention(DIM, HEADS, normaliser="sparsemax").index_parameters()
    with pytest.raises(ValueError, match="'tsallis'"):
        GatedMultiheadAttention(DIM, HEADS, normaliser="tsallis")
    with pytest.raises(ValueError, match="q_mode must be one of.*'edge'"):
        GatedMultiheadAttention(DIM, HEADS, normaliser="qsoftmax", q_mode="edge")
    with pytest.raises(ValueError, match=r"delta=3 must be in \(0, 2\]"):
        GatedMultiheadAttention(DIM, HEADS, normaliser="qsoftmax", delta=3)
    with pytest.raises(ValueError, match=r"alpha=2.0 must be in \(1, 2\) when learned"):
        GatedMultiheadAttention(DIM, HEADS, normaliser="entmax", alpha_mode="layer", alpha=2.0)
    with pytest.raises(ValueError, match="alpha=0.5 must be >= 1"):
        GatedMultiheadAttention(DIM, HEADS, normaliser="entmax", alpha=0.5)


# ---- wide batches: attention in groups of similar graph size ----------------------------------------

WIDE = [5, 70, 130, 20, 200, 66, 0, 97]  # groups: <= 32 nodes, 49-72, 73-108, 109-162, 163-243


def test_wide_batches_split_into_size_groups():
    from zoo.nn.gated_attention import dense_batch_groups
    groups = dense_batch_groups(batch_of(WIDE), torch.device("cpu"))
    widths = sorted(mask.shape[1] for _, _, mask in groups)
    assert widths == [24, 72, 104, 136, 200]  # each group padded to its own largest graph (rows of 8)
    nodes = torch.cat([n for n, _, _ in groups]).sort().values
    assert torch.equal(nodes, torch.arange(sum(WIDE)))  # every node in exactly one group
    assert dense_batch_groups(batch_of([5, 32, 30]), torch.device("cpu")) is None  # narrow: one block


@pytest.mark.parametrize("gate,per_head,act", [("none", True, "sigmoid"), ("output", True, "sigmoid"),
                                               ("value", False, "tanh"), ("logit", True, "sigmoid_squared")])
def test_size_groups_match_the_per_graph_reference(gate, per_head, act):
    attn = make_attn(gate=gate, gate_per_head=per_head, gate_activation=act)
    h = features(sum(WIDE))
    want = torch.cat([reference(attn, x) if len(x) else x for x in h.split(WIDE)])
    torch.testing.assert_close(attn(batch_of(WIDE), h), want, atol=1e-10, rtol=0)


@pytest.mark.parametrize("normaliser,options", [("softmax", {})] + NORMALISED)
def test_size_groups_equal_one_padded_block_with_gradients(normaliser, options, monkeypatch):
    import zoo.nn.gated_attention as gated_attention
    attn = with_indices(make_attn(gate="output", normaliser=normaliser, **options))
    h = features(sum(WIDE))
    results = []
    for min_width in (gated_attention.GROUP_MIN_WIDTH, 10 ** 6):  # groups; then one block for the batch
        monkeypatch.setattr(gated_attention, "GROUP_MIN_WIDTH", min_width)
        attn.zero_grad()
        x = h.clone().requires_grad_()
        out = attn(batch_of(WIDE), x)
        (out * torch.arange(out.numel()).view_as(out).sin()).sum().backward()
        results.append([out, x.grad] + [p.grad for p in attn.parameters() if p.grad is not None])
    assert len(results[0]) == len(results[1])
    for grouped, single in zip(*results):
        torch.testing.assert_close(grouped, single, atol=1e-10, rtol=1e-10)


@pytest.mark.parametrize("gate, per_head, width", [("output", True, 64), ("output", False, 8), ("logit", True, 8)])
def test_gate_weight_starts_at_zero_or_xavier_uniform(gate, per_head, width):
    """``zeros`` (the default): every gate starts at act(bias), whatever the input. ``xavier`` (the
    authors' release): W_g ~ U(-b, b) with b = sqrt(6 / (fan_in + fan_out)), so its variance is
    b^2 / 3, and the gates start input-dependent around act(bias)."""
    dim, heads = 64, 8
    torch.manual_seed(0)
    zero = GatedMultiheadAttention(dim, heads, gate=gate, gate_per_head=per_head)
    assert torch.equal(zero.gate_proj.weight, torch.zeros(width, dim))
    torch.manual_seed(0)
    xavier = GatedMultiheadAttention(dim, heads, gate=gate, gate_per_head=per_head, gate_weight_init="xavier")
    w, bound = xavier.gate_proj.weight.detach().double(), math.sqrt(6 / (dim + width))
    assert w.shape == (width, dim) and w.abs().max() <= bound
    assert w.var().item() == pytest.approx(bound ** 2 / 3, rel=0.15)  # 512-4096 draws
    assert torch.equal(xavier.gate_proj.bias, torch.full((width,), 0.5))
    with pytest.raises(ValueError, match="gate_weight_init must be one of .*'normal'"):
        GatedMultiheadAttention(dim, heads, gate=gate, gate_weight_init="normal")
