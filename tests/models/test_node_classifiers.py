"""Baselines: registry behaviour and the backbone's head layout (concat inside, mean at the output)."""
import dgl
import pytest
import torch
from dgl.nn import GraphConv

from zoo.models import create_model, list_models, model_arguments


def _graph():
    g = dgl.graph((torch.tensor([0, 1, 2, 3, 0]), torch.tensor([1, 2, 3, 0, 2])), num_nodes=4)
    return dgl.add_self_loop(g)


def test_registry_lists_and_rejects():
    assert {"gcn", "gat", "gatv2"} <= set(list_models())
    assert set(model_arguments("gat")) == {"hidden", "heads", "layers", "dropout", "attn_dropout", "negative_slope"}
    with pytest.raises(KeyError, match="did you mean 'gatv2'"):
        create_model("gatv3", in_feats=3, num_classes=2)


@pytest.mark.parametrize("name", ["gat", "gatv2"])
def test_attention_backbone_concats_then_averages_heads(name):
    torch.manual_seed(0)
    g, x = _graph(), torch.randn(4, 5)
    model = create_model(name, in_feats=5, num_classes=3, hidden=6, heads=4, dropout=0.0, attn_dropout=0.0).eval()
    hidden = model.convs[0](g, x)
    assert hidden.shape == (4, 4, 6)
    expected = model.out(g, hidden.flatten(1)).mean(1)
    assert torch.allclose(model(g, x), expected)
    # first layer: 5*6*4 weights, two attention vectors (GAT) or W_l/W_r + a (GATv2), biases
    assert sum(p.numel() for p in model.parameters()) > 5 * 6 * 4


def test_gcn_matches_dense_symmetric_normalisation():
    torch.manual_seed(0)
    g, x = _graph(), torch.randn(4, 5, dtype=torch.float64)
    model = create_model("gcn", in_feats=5, num_classes=3, hidden=6, dropout=0.0).double().eval()
    adj = torch.zeros(4, 4, dtype=torch.float64)
    src, dst = g.edges()
    adj.index_put_((dst, src), torch.ones(len(src), dtype=torch.float64), accumulate=True)
    norm = adj.sum(1).rsqrt()[:, None] * adj * adj.sum(0).rsqrt()[None, :]
    first, second = model.convs
    h = torch.nn.functional.elu(norm @ x @ first.weight + first.bias)
    assert isinstance(first, GraphConv)
    assert torch.allclose(model(g, x), norm @ h @ second.weight + second.bias)
