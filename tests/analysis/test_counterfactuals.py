"""Counterfactuals A-C and label agreement on hand-built graphs."""
import dgl
import pytest
import torch

from zoo.analysis.counterfactuals import UndefinedCounterfactual, label_agreement, ltga_diagnostics, random_prune
from zoo.models import create_model


def _data(q_graph_nodes=12):
    gen = torch.Generator().manual_seed(0)
    n = q_graph_nodes
    g = dgl.add_self_loop(dgl.graph((torch.randint(0, n, (40,), generator=gen), torch.randint(0, n, (40,), generator=gen)), num_nodes=n))
    g = dgl.add_self_loop(dgl.remove_self_loop(g))
    labels = torch.randint(0, 3, (n,), generator=gen)
    return type("Data", (), dict(graph=g, features=torch.randn(n, 6, generator=gen), labels=labels,
                                 train_mask=torch.ones(n, dtype=torch.bool)))


def _model(q, seed=0):
    torch.manual_seed(seed)
    return create_model("ltga", in_feats=6, num_classes=3, hidden=4, heads=2, q_mode="fixed", q=q,
                        dropout=0.0, attn_dropout=0.0)


def test_counterfactuals_against_models_built_with_that_q():
    data = _data()
    score = lambda logits: float(logits.sum())  # any exact function of the logits
    sparse = ltga_diagnostics(_model(2.0), data, score)["counterfactual"]
    with torch.no_grad():
        assert sparse["A_softmax"] == pytest.approx(score(_model(1.0)(data.graph, data.features)))
        assert sparse["C_clamp_q"] == pytest.approx(sparse["trained"])  # q = 2 already >= 1
        heavy = ltga_diagnostics(_model(0.5), data, score)["counterfactual"]
        assert heavy["C_clamp_q"] == pytest.approx(heavy["A_softmax"])  # q = 0.5 clamped to 1
    assert sparse["A_softmax"] != pytest.approx(sparse["trained"])


def test_random_prune_keeps_the_learned_zero_counts():
    g = dgl.graph((torch.tensor([0, 1, 2, 3, 1, 2]), torch.tensor([0, 0, 0, 0, 1, 1])), num_nodes=4)
    learned = torch.tensor([[0.5], [0.5], [0.0], [0.0], [1.0], [0.0]])
    softmax = torch.tensor([[0.25], [0.25], [0.25], [0.25], [0.5], [0.5]])
    pruned = random_prune([learned], torch.Generator().manual_seed(1))(g, softmax)
    zeros = dgl.ops.copy_e_sum(g, (pruned == 0).double())
    assert zeros[:2, 0].tolist() == [2.0, 1.0]
    assert torch.allclose(dgl.ops.copy_e_sum(g, pruned)[:2], torch.ones(2, 1))


def test_label_agreement_counts_training_edges_only():
    g = dgl.graph((torch.tensor([1, 2, 3, 0]), torch.tensor([0, 0, 0, 0])), num_nodes=4)
    labels = torch.tensor([0, 0, 1, 0])
    attention = torch.tensor([[0.0], [0.0], [0.5], [0.5]])  # last edge is a self-loop: ignored
    train = torch.tensor([True, True, True, False])  # edge 3 -> 0 has a non-training endpoint
    got = label_agreement(g, attention, labels, train)
    assert got["pruned"] == {"agreement": 0.5, "n": 2}  # 1 -> 0 agrees, 2 -> 0 does not
    assert got["kept"] == {"agreement": None, "n": 0}


def test_label_agreement_both_definitions_by_hand():
    # Edges into node 0 from 1, 2, 3 (labels 0, 1, 0 against node 0's 0) and a self-loop; two heads.
    # 1 -> 0: zero in both heads (pruned by every head), agrees.
    # 2 -> 0: zero in head 0 only, disagrees.     3 -> 0: kept by both heads, agrees.
    g = dgl.graph((torch.tensor([1, 2, 3, 0]), torch.tensor([0, 0, 0, 0])), num_nodes=4)
    labels, train = torch.tensor([0, 0, 1, 0]), torch.ones(4, dtype=torch.bool)
    attention = torch.tensor([[0.0, 0.0], [0.0, 0.4], [0.7, 0.6], [0.3, 0.0]])
    pairs = label_agreement(g, attention, labels, train, "pairs")
    # pairs pruned: (1, h0) agree, (1, h1) agree, (2, h0) disagree -> 2/3; kept: (2, h1) no, (3, h0), (3, h1) yes
    assert pairs["pruned"] == {"agreement": pytest.approx(2 / 3), "n": 3}
    assert pairs["kept"] == {"agreement": pytest.approx(2 / 3), "n": 3}
    every = label_agreement(g, attention, labels, train, "every_head")
    assert every["pruned"] == {"agreement": 1.0, "n": 1}  # only 1 -> 0
    assert every["kept"] == {"agreement": 0.5, "n": 2}    # 2 -> 0 (kept by head 1) and 3 -> 0
    assert label_agreement(g, attention, labels, train) == pairs  # the default stays the pairs count
    with pytest.raises(ValueError, match="definition 'all_heads' is not one of \\('pairs', 'every_head'\\)"):
        label_agreement(g, attention, labels, train, "all_heads")


def test_diagnostics_record_both_label_agreements():
    data = _data()
    report = ltga_diagnostics(_model(2.0), data, lambda logits: 0.0)
    assert len(report["label_agreement"]) == len(report["label_agreement_every_head"]) == 2
    for pairs, every in zip(report["label_agreement"], report["label_agreement_every_head"]):
        assert every["pruned"]["n"] + every["kept"]["n"] == (pairs["pruned"]["n"] + pairs["kept"]["n"]) // 2  # 2 heads
        assert every["pruned"]["n"] <= pairs["pruned"]["n"] // 2
    assert any(layer["pruned"]["n"] for layer in report["label_agreement_every_head"])  # q = 2 prunes some edges


def test_random_prune_that_keeps_only_underflowed_weights_is_undefined_not_nan():
    # 8 nodes, each with in-edges from two sources: softmax gave one of them all the weight (the
    # other underflowed to exactly 0) and the learned attention pruned one edge, so the random
    # prune keeps one edge: where that is the zero-weight one, renormalising would be 0 / 0.
    dst = torch.arange(8).repeat_interleave(2)
    g = dgl.graph((torch.arange(16) + 8, dst), num_nodes=24)
    softmax = torch.tensor([[1.0], [0.0]]).repeat(8, 1)
    learned = torch.tensor([[0.0], [1.0]]).repeat(8, 1)
    with pytest.raises(UndefinedCounterfactual, match="underflow"):
        random_prune([learned], torch.Generator().manual_seed(0))(g, softmax)


def test_diagnostics_name_an_undefined_counterfactual_and_keep_the_others():
    data = _data()
    model = _model(2.0)
    with torch.no_grad():
        for conv in model.ltga_layers():
            for p in conv.parameters():
                p.mul_(1e3)  # logit gaps of ~1e4: softmax (counterfactual B's start) underflows
    diagnostics = ltga_diagnostics(model, data, lambda logits: float(logits.argmax(1).sum()))
    assert set(diagnostics["counterfactual"]) == {"trained", "A_softmax", "C_clamp_q"}
    assert "softmax underflow" in diagnostics["undefined"]["B_random_prune"]
