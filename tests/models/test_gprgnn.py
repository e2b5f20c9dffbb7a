"""GPR-GNN against Chien et al.'s propagation computed densely in float64, and against DGL's APPNPConv
(its PPR initialisation) and SGConv (a one-hot gamma)."""
import dgl
import pytest
import torch
from dgl.nn import APPNPConv, SGConv

from zoo.models import create_model
from zoo.models.gprgnn import ppr_coefficients

# the path 0-1-2-3, both directions, with the loader's self-loops (A + I)
SRC, DST = [0, 1, 1, 2, 2, 3], [1, 0, 2, 1, 3, 2]


def _graph():
    return dgl.add_self_loop(dgl.graph((SRC, DST), num_nodes=4))


def _mlp(model, x):
    first, second = model.linears
    return second(torch.relu(first(x)))


def _model(**kwargs):
    torch.manual_seed(0)
    return create_model("gprgnn", in_feats=5, num_classes=3, hidden=6, **kwargs).double().eval()


def test_forward_is_a_learned_polynomial_of_the_normalised_adjacency():
    model, x = _model(hops=3), torch.randn(4, 5, dtype=torch.float64)
    with torch.no_grad():
        model.gamma.copy_(torch.tensor([0.7, -0.4, 0.2, 0.5], dtype=torch.float64))
    a = torch.eye(4, dtype=torch.float64)
    a[DST, SRC] = 1
    d = a.sum(1).rsqrt()
    a_sym = d[:, None] * a * d[None, :]
    h = _mlp(model, x)
    expected = sum(g * torch.linalg.matrix_power(a_sym, k) @ h for k, g in enumerate([0.7, -0.4, 0.2, 0.5]))
    torch.testing.assert_close(model(_graph(), x), expected, rtol=1e-12, atol=1e-12)


def test_ppr_initialisation_is_appnp():
    """Chien et al.: with gamma_k = alpha (1 - alpha)^k (last (1 - alpha)^K), GPR-GNN is APPNP."""
    # float32: DGL's APPNPConv builds its edge weights in float32 (10 steps: errors ~1e-7 relative)
    model, x = _model(hops=10, alpha=0.1).float(), torch.randn(4, 5)
    appnp = APPNPConv(k=10, alpha=0.1)
    torch.testing.assert_close(model(_graph(), x), appnp(_graph(), _mlp(model, x)), rtol=1e-5, atol=1e-6)
    assert ppr_coefficients(10, 0.1).sum().item() == pytest.approx(1.0, abs=1e-6)


def test_one_hot_gamma_is_k_step_propagation():
    """gamma = [0, ..., 0, 1] leaves only A_sym^K H^(0): DGL's SGConv with an identity weight."""
    model, x = _model(hops=4), torch.randn(4, 5, dtype=torch.float64)
    with torch.no_grad():
        model.gamma.copy_(torch.tensor([0.0, 0.0, 0.0, 0.0, 1.0], dtype=torch.float64))
    sgc = SGConv(3, 3, k=4, bias=False).double()
    with torch.no_grad():
        sgc.fc.weight.copy_(torch.eye(3))
    torch.testing.assert_close(model(_graph(), x), sgc(_graph(), _mlp(model, x)), rtol=1e-10, atol=1e-12)


def test_gradients_reach_gamma_and_the_mlp():
    torch.manual_seed(0)
    model = create_model("gprgnn", in_feats=5, num_classes=3, hidden=6, hops=3, dropout=0.0, prop_dropout=0.0)
    loss = torch.nn.functional.cross_entropy(model(_graph(), torch.randn(4, 5)), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    for name, param in model.named_parameters():
        assert torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0, name


def test_a_sampled_block_is_refused_with_the_fix():
    model = create_model("gprgnn", in_feats=5, num_classes=3)
    block = dgl.to_block(_graph(), dst_nodes=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="GPR-GNN trains full-batch only .* remove train.sampler"):
        model(block, torch.randn(block.num_src_nodes(), 5))
