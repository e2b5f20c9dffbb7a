"""Attention statistics on a hand-built graph with hand-computed values."""
import math

import dgl
import pytest
import torch

from zoo.analysis.attention import attention_statistics, segment_rank


def test_statistics_match_hand_computation():
    # node 0 receives from 0, 1, 2 with weights 0.5, 0.5, 0; node 1 from itself with weight 1
    g = dgl.graph((torch.tensor([0, 1, 2, 1]), torch.tensor([0, 0, 0, 1])), num_nodes=3)
    stats = attention_statistics(g, torch.tensor([0.5, 0.5, 0.0, 1.0]))
    assert stats["exact_zero"] == pytest.approx(0.25)
    assert stats["entropy"] == pytest.approx(math.log(2) / 2)  # node 2 has no in-edges: skipped
    assert stats["top1"] == pytest.approx(0.75)
    assert stats["effective_size"] == pytest.approx(1.5)
    assert stats["gini"] == pytest.approx((1 / 3 + 0) / 2)  # sum |a_i - a_j| / (2 n) = 2 / 6 for node 0


def test_heads_are_averaged_and_uniform_has_zero_gini():
    g = dgl.graph((torch.tensor([0, 1, 2, 3]), torch.tensor([0, 0, 0, 0])), num_nodes=4)
    uniform, peaked = torch.full((4,), 0.25), torch.tensor([1.0, 0.0, 0.0, 0.0])
    stats = attention_statistics(g, torch.stack([uniform, peaked], 1))
    assert stats["gini"] == pytest.approx((0 + 0.75) / 2)  # one-hot over n: (n - 1) / n
    assert stats["effective_size"] == pytest.approx((4 + 1) / 2)
    assert stats["exact_zero"] == pytest.approx(3 / 8)


def test_segment_rank_breaks_ties_stably():
    assert segment_rank(torch.tensor([1, 1, 0, 1]), torch.tensor([0.2, 0.2, 5.0, 0.1])).tolist() == [1, 2, 0, 0]
