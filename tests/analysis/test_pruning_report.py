"""pruning_table / render_pruning (the paper's Table 5 layout) on hand-written LTGA diagnostics."""
import math

import pytest

from tests.analysis.test_diagnostics_report import write_run
from zoo.analysis.pruning_report import pruning_table, render_pruning
from zoo.analysis.runs import ReportError, collect_runs


def test_table_5_layout_by_hand(tmp_path):
    # seed 0: sparsity (10 + 30) / 2 = 20 %; every-head pruned pooled over layers (0 edges, then 4 at 0.25) = 25 %,
    #         kept (10 at 0.4, 6 at 0.6) = 7.6 / 16 = 47.5 %
    # seed 1: sparsity 30 %; pruned (2 at 0.5, 2 at 1.0) = 75 %; kept (8 at 0.25, 8 at 0.5) = 37.5 %
    write_run(tmp_path, "roman_empire", "ltga_head", 0, q=[1.8], zeros=[0.1, 0.3],
              cf={"trained": 0.72, "A_softmax": 0.65, "B_random_prune": 0.59, "C_clamp_q": 0.72},
              agreement=[0.1, 0.1], every_head=[(None, 0, 0.4, 10), (0.25, 4, 0.6, 6)])
    write_run(tmp_path, "roman_empire", "ltga_head", 1, q=[1.8], zeros=[0.2, 0.4],
              cf={"trained": 0.74, "A_softmax": 0.66, "B_random_prune": 0.60, "C_clamp_q": 0.74},
              agreement=[0.1, 0.1], every_head=[(0.5, 2, 0.25, 8), (1.0, 2, 0.5, 8)])
    write_run(tmp_path, "roman_empire", "gat", 0, q=[], zeros=[], cf={"trained": 0.5}, agreement=[], diagnostics=False)
    table = pruning_table(collect_runs(tmp_path))
    assert list(table.index) == [("ltga_head", "roman_empire")]
    row = table.loc[("ltga_head", "roman_empire")]
    assert row.n == 2 and row.sparsity == pytest.approx(25.0) and row.sparsity_sd == pytest.approx(math.sqrt(50))
    assert (row.learned, row.all_edges, row.random) == pytest.approx((73.0, 65.5, 59.5))
    assert row.agree_pruned == pytest.approx(50.0) and row.agree_kept == pytest.approx((47.5 + 37.5) / 2)
    text = render_pruning(table)
    assert "| ltga_head | roman_empire | 2 | 25.0 ± 7.1 | 73.0 ± 1.4 | 65.5 ± 0.7 | 59.5 ± 0.7 | 50.0 ± 35.4 | " \
           "42.5 ± 7.1 |" in text
    assert "pruned by every head / kept by at least one" in text


def test_runs_without_every_head_agreement_show_none(tmp_path):
    write_run(tmp_path, "texas", "ltga_edge", 0, q=[1.0], zeros=[0.0, 0.0],
              cf={"trained": 0.5, "A_softmax": 0.5, "B_random_prune": 0.5}, agreement=[None, None])
    text = render_pruning(pruning_table(collect_runs(tmp_path)))
    assert "| ltga_edge | texas | 1 | 0.0 | 50.0 | 50.0 | 50.0 | - | - |" in text


def test_no_counterfactuals_is_a_clear_error(tmp_path):
    write_run(tmp_path, "texas", "ltga_head", 0, q=[1.0], zeros=[0.0], cf={"trained": 0.5}, agreement=[None])
    with pytest.raises(ReportError, match="no run has the pruning counterfactuals"):
        pruning_table(collect_runs(tmp_path))
