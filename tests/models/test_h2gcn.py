"""H2GCN against Zhu et al.'s equations computed densely in float64 on a 5-node graph, and its
neighbourhoods against a hand count."""
import dgl
import pytest
import torch

from zoo.models import create_model
from zoo.models.h2gcn import hop_graphs

# a triangle 0-1-2 with a tail 2-3-4, both directions; the loader adds one self-loop per node
SRC = [0, 1, 1, 2, 2, 0, 2, 3, 3, 4]
DST = [1, 0, 2, 1, 0, 2, 3, 2, 4, 3]


def _graph():
    return dgl.add_self_loop(dgl.graph((SRC, DST), num_nodes=5))


def _edges(graph):
    return sorted(zip(*(t.tolist() for t in graph.edges())))


def _normalised(adjacency):
    """D^-1/2 A D^-1/2 with 0 for a node without neighbours."""
    degree = adjacency.sum(1)
    inv = torch.where(degree > 0, degree.clamp(min=1).rsqrt(), torch.zeros_like(degree))
    return inv[:, None] * adjacency * inv[None, :]


def _dense_hops():
    a = torch.zeros(5, 5, dtype=torch.float64)
    a[DST, SRC] = 1
    two = ((a @ a) > 0) & (a == 0) & ~torch.eye(5, dtype=torch.bool)
    return _normalised(a), _normalised(two.double())


def test_hop_graphs_are_the_neighbours_at_distance_one_and_exactly_two():
    one, two = hop_graphs(_graph())
    assert _edges(one) == sorted(zip(SRC, DST))
    # by hand: 0 and 1 reach 3 in two steps, 2 reaches 4, and back; 0-1-2 is a triangle, so no pair of it
    assert _edges(two) == [(0, 3), (1, 3), (2, 4), (3, 0), (3, 1), (4, 2)]


@pytest.mark.parametrize("rounds", [1, 2])
def test_forward_is_the_papers_embed_aggregate_combine(rounds):
    torch.manual_seed(0)
    x = torch.randn(5, 4, dtype=torch.float64)
    model = create_model("h2gcn", in_feats=4, num_classes=3, hidden=3, layers=rounds).double().eval()
    p1, p2 = _dense_hops()
    r = [torch.relu(x @ model.embed.weight.T)]
    for _ in range(rounds):
        r.append(torch.cat([p1 @ r[-1], p2 @ r[-1]], 1))
    expected = torch.cat(r, 1) @ model.classify.weight.T
    assert model.classify.in_features == 3 * (2 ** (rounds + 1) - 1)
    torch.testing.assert_close(model(_graph(), x), expected, rtol=1e-12, atol=1e-12)


def test_self_loops_and_repeated_edges_are_ignored():
    """Ego and neighbour stay apart (design D1): the input's self-loops and a doubled edge change nothing."""
    torch.manual_seed(0)
    x = torch.randn(5, 4, dtype=torch.float64)
    model = create_model("h2gcn", in_feats=4, num_classes=3, hidden=3).double().eval()
    plain = dgl.graph((SRC, DST), num_nodes=5)
    doubled = dgl.add_self_loop(dgl.graph((SRC + [0], DST + [1]), num_nodes=5))
    first = model(_graph(), x)
    torch.testing.assert_close(model(plain, x), first, rtol=1e-12, atol=1e-12)
    torch.testing.assert_close(model(doubled, x), first, rtol=1e-12, atol=1e-12)


def test_gradients_reach_every_parameter():
    torch.manual_seed(0)
    model = create_model("h2gcn", in_feats=4, num_classes=3, hidden=3, dropout=0.0)
    loss = torch.nn.functional.cross_entropy(model(_graph(), torch.randn(5, 4)), torch.tensor([0, 1, 2, 0, 1]))
    loss.backward()
    for name, param in model.named_parameters():
        assert torch.isfinite(param.grad).all() and param.grad.abs().sum() > 0, name


def test_a_sampled_block_is_refused_with_the_fix():
    model = create_model("h2gcn", in_feats=4, num_classes=3)
    block = dgl.to_block(_graph(), dst_nodes=torch.tensor([0, 1]))
    with pytest.raises(ValueError, match="H2GCN trains full-batch only .* remove train.sampler"):
        model(block, torch.randn(block.num_src_nodes(), 4))
