"""LINKX against Lim et al.'s model computed densely in float64; its adjacency branch reads
the adjacency only; its per-node weights are sized by the graph and trained by an optimiser built
before the first forward (as the node trainer does)."""
import dgl
import pytest
import torch

from zoo.models import create_model

# the path 0-1-2-3 both ways and one directed edge 0 -> 3
SRC, DST = [0, 1, 1, 2, 2, 3, 0], [1, 0, 2, 1, 3, 2, 3]


def _graph():
    return dgl.add_self_loop(dgl.graph((SRC, DST), num_nodes=4))


def _model(**kwargs):
    torch.manual_seed(0)
    model = create_model("linkx", in_feats=5, num_classes=3, hidden=6, **kwargs)
    model(_graph(), torch.randn(4, 5))  # sizes the adjacency weights
    return model.double()


def test_forward_matches_the_papers_equations():
    model, x = _model(layers=2).eval(), torch.randn(4, 5, dtype=torch.float64)
    linear, _, norm, _ = model.final[0]
    with torch.no_grad():  # running statistics other than the initial ones
        norm.running_mean.uniform_(-1, 1)
        norm.running_var.uniform_(0.5, 2)
    a = torch.zeros(4, 4, dtype=torch.float64)
    a[DST, SRC] = 1  # row i: the in-neighbours of i, no self-loop
    h_a = a @ model.adjacency.weight + model.adjacency.bias
    h_x = x @ model.features.weight.T + model.features.bias
    mixed = torch.relu(torch.cat([h_a, h_x], 1) @ model.mix.weight.T + model.mix.bias + h_a + h_x)
    hidden = torch.relu(mixed @ linear.weight.T + linear.bias)
    hidden = (hidden - norm.running_mean) / torch.sqrt(norm.running_var + norm.eps) * norm.weight + norm.bias
    expected = hidden @ model.final[1].weight.T + model.final[1].bias
    torch.testing.assert_close(model(_graph(), x), expected, rtol=1e-12, atol=1e-12)


def test_the_adjacency_branch_reads_only_the_adjacency():
    model = _model().eval()
    before = model.adjacency(_graph())
    x = torch.randn(4, 5, dtype=torch.float64)
    out = model(_graph(), x)
    assert torch.equal(model.adjacency(_graph()), before)  # features never reach it
    torch.testing.assert_close(model(dgl.graph((SRC, DST), num_nodes=4), x), out, rtol=1e-12, atol=1e-12)
    rewired = dgl.graph((SRC + [3], DST + [0]), num_nodes=4)
    changed = model.adjacency(rewired)
    torch.testing.assert_close(changed[0] - before[0], model.adjacency.weight[3], rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(changed[1:], before[1:], rtol=0, atol=0)


def test_a_graph_of_another_size_is_refused():
    model = _model()
    with pytest.raises(ValueError, match="built for .4 nodes.; this graph has 5. LINKX is transductive"):
        model(dgl.add_self_loop(dgl.graph(([0], [4]), num_nodes=5)), torch.randn(5, 5, dtype=torch.float64))


def test_an_optimiser_built_before_the_first_forward_trains_every_parameter():
    torch.manual_seed(0)
    model = create_model("linkx", in_feats=5, num_classes=3, hidden=6, dropout=0.0)
    optimizer = torch.optim.Adam(model.parameters(), lr=0.1)
    loss = torch.nn.functional.cross_entropy(model(_graph(), torch.randn(4, 5)), torch.tensor([0, 1, 2, 0]))
    loss.backward()
    before = {name: param.detach().clone() for name, param in model.named_parameters()}
    assert model.adjacency.weight.shape == (4, 6)
    for name, param in model.named_parameters():
        assert torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0, name
    optimizer.step()
    assert all(not torch.equal(param, before[name]) for name, param in model.named_parameters())


def test_a_sampled_block_is_refused_with_the_fix():
    model = create_model("linkx", in_feats=5, num_classes=3)
    block = dgl.to_block(_graph(), dst_nodes=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="LINKX trains full-batch only .* remove train.sampler"):
        model(block, torch.randn(block.num_src_nodes(), 5))
