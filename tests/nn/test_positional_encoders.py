"""LapPE (SignNet, DeepSet) and RWSE encoders: invariances, padding, hand-computed values."""
import dgl
import pytest
import torch

from zoo.nn.positional_encoders import LapPEDeepSet, RWSEEncoder, SignNetLapPE


def ring_with_chord(n):
    src = list(range(n)) + [0]
    dst = [(i + 1) % n for i in range(n)] + [n // 2]
    return dgl.to_bidirected(dgl.graph((src, dst), num_nodes=n))


def laplacian_eig(g, k):
    """Eigenpairs of the combinatorial Laplacian, NaN-padded to k columns (the data contract)."""
    n = g.num_nodes()
    adj = torch.zeros(n, n, dtype=torch.float64)
    src, dst = g.edges()
    adj[src, dst] = 1.0
    val, vec = torch.linalg.eigh(torch.diag(adj.sum(1)) - adj)
    eigvec = torch.full((n, k), float("nan"), dtype=torch.float64)
    eigval = torch.full((n, k), float("nan"), dtype=torch.float64)
    eigvec[:, : min(n, k)] = vec[:, :k]
    eigval[:, : min(n, k)] = val[:k]
    return eigvec, eigval


@pytest.mark.parametrize("train", [True, False])
def test_signnet_is_sign_invariant(train):
    g = dgl.batch([ring_with_chord(6), ring_with_chord(4)])
    vec = torch.cat([laplacian_eig(ring_with_chord(6), 5)[0], laplacian_eig(ring_with_chord(4), 5)[0]])
    torch.manual_seed(0)
    enc = SignNetLapPE(8, phi_hidden=16, phi_out=4, phi_layers=3, rho_layers=2).double().train(train)
    flipped = vec * torch.tensor([1.0, -1.0, -1.0, 1.0, -1.0], dtype=torch.float64)
    torch.testing.assert_close(enc(g, flipped), enc(g, vec), atol=1e-10, rtol=0)
    assert not torch.allclose(enc(g, vec.abs()), enc(g, vec))  # but not blind to the vectors


@pytest.mark.parametrize("train", [True, False])
def test_signnet_ignores_padded_eigenvectors(train):
    g = ring_with_chord(4)
    padded, _ = laplacian_eig(g, 7)  # 3 NaN columns
    torch.manual_seed(0)
    enc = SignNetLapPE(6, phi_hidden=8, phi_out=3).double().train(train)
    torch.testing.assert_close(enc(g, padded), enc(g, padded[:, :4]), atol=1e-10, rtol=0)


def test_deepset_matches_hand_computation_and_masks_padding():
    enc = LapPEDeepSet(5, layers=1, post_layers=0).double().eval()
    vec, val = laplacian_eig(ring_with_chord(3), 6)  # 3 present pairs, 3 NaN
    linear = enc.phi[0]
    want = sum(torch.relu(linear(torch.stack([vec[:, j], val[:, j]], 1))) for j in range(3))
    torch.testing.assert_close(enc(vec, val), want)


def test_deepset_is_invariant_to_eigenpair_order_and_flips_signs_in_training():
    torch.manual_seed(0)
    enc = LapPEDeepSet(6, layers=3, post_layers=1).double()
    vec, val = laplacian_eig(ring_with_chord(8), 8)
    enc.eval()
    assert enc(vec, val).abs().sum() > 0
    perm = torch.randperm(8)
    torch.testing.assert_close(enc(vec[:, perm], val[:, perm]), enc(vec, val))
    enc.train()
    outputs = {tuple(enc(vec, val).flatten().tolist()) for _ in range(10)}
    assert len(outputs) > 1


def test_rwse_encoder():
    rwse = torch.rand(6, 4, dtype=torch.float64)
    plain = RWSEEncoder(4, 3, batch_norm=False).double()
    torch.testing.assert_close(plain(rwse), rwse @ plain.linear.weight.T + plain.linear.bias)
    normed = RWSEEncoder(4, 3).double().train()
    z = (rwse - rwse.mean(0)) / torch.sqrt(rwse.var(0, unbiased=False) + 1e-5)
    torch.testing.assert_close(normed(rwse), normed.linear(z))


def test_gradients_and_bad_inputs():
    g = ring_with_chord(5)
    vec, val = laplacian_eig(g, 4)
    enc = SignNetLapPE(4, phi_hidden=8).double()
    enc(g, vec).sum().backward()
    assert all(p.grad is not None and torch.isfinite(p.grad).all() for p in enc.parameters())
    with pytest.raises(ValueError, match=r"lap_eigval must have the shape"):
        LapPEDeepSet(4)(vec, val[:, :2])
    with pytest.raises(ValueError, match=r"rwse must have shape \[N, 16\]"):
        RWSEEncoder(16, 4)(torch.rand(5, 8))
    with pytest.raises(ValueError, match="phi_layers"):
        SignNetLapPE(4, phi_layers=0)


def test_signnet_decides_the_fused_gin_at_construction_and_after_a_load():
    model = SignNetLapPE(8).eval()
    assert model._fused == [True, True, True]
    state = model.state_dict()
    state["convs.1.eps"] = torch.tensor([0.5])  # a nonzero eps must go through DGL's GINConv
    model.load_state_dict(state)
    assert model._fused == [True, False, True]
    g, eigvec = dgl.rand_graph(6, 14), torch.randn(6, 3)
    fused = model(g, eigvec)
    model._fused = [False] * 3  # every conv through DGL
    torch.testing.assert_close(fused, model(g, eigvec))


def test_scalar_relu_mlp_is_the_mlp_in_value_and_gradient():
    """Against the MLP itself in float64, with a unit of zero input weight (never cut), two units
    with the same cut (an empty interval) and inputs beyond every cut."""
    from torch import nn

    from zoo.nn.positional_encoders import scalar_relu_mlp

    torch.manual_seed(0)
    mlp = nn.Sequential(nn.Linear(1, 16), nn.ReLU(), nn.Linear(16, 5)).double()
    with torch.no_grad():
        mlp[0].weight[3] = 0.0
        mlp[0].weight[5], mlp[0].bias[5] = 2 * mlp[0].weight[4], 2 * mlp[0].bias[4]
    s = torch.cat([torch.randn(200, 1, dtype=torch.float64) * 3, torch.tensor([[-1e3], [1e3]], dtype=torch.float64)])
    got, want = scalar_relu_mlp(mlp, s.view(101, 2, 1)), mlp(s).view(101, 2, 5)
    torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    grads = [torch.autograd.grad(out.square().sum(), list(mlp.parameters())) for out in (got, want)]
    for a, b in zip(*grads):
        torch.testing.assert_close(a, b, atol=1e-9, rtol=1e-12)
