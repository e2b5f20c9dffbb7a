"""Input checks shared by the ops: every bad input is a ZooOpError that names the fix."""
import dgl
import pytest
import torch

from zoo.ops import ZooOpError, edge_entmax, edge_qsoftmax, edge_sparsemax, edge_weighted_sum

GRAPH = dgl.graph(([0, 1, 2, 2], [1, 2, 0, 1]))
OPS = [lambda g, z: edge_qsoftmax(g, z, 1.5), lambda g, z: edge_entmax(g, z, 1.5), edge_sparsemax]


@pytest.mark.parametrize("op", OPS)
def test_cpu_float16_is_refused_with_the_cast(op):
    with pytest.raises(ZooOpError, match=r"logits is float16 on the CPU.*logits.float\(\)"):
        op(GRAPH, torch.randn(4, 2, dtype=torch.float16))


@pytest.mark.parametrize("op", OPS)
def test_bfloat16_runs_and_sums_to_one(op):
    out = op(GRAPH, torch.randn(4, 2, dtype=torch.bfloat16))
    sums = torch.zeros(3, 2).index_add_(0, GRAPH.edges()[1], out.float())
    torch.testing.assert_close(sums, torch.ones(3, 2), atol=2e-2, rtol=0)  # bfloat16 keeps 8 bits


def test_weighted_sum_refuses_cpu_float16():
    with pytest.raises(ZooOpError, match=r"weights is float16 on the CPU"):
        edge_weighted_sum(GRAPH, torch.rand(4, 1, dtype=torch.float16), torch.rand(3, 1, 2, dtype=torch.float16))


@pytest.mark.parametrize("bad, message", [
    (torch.arange(4), "must be a floating-point tensor, got torch.int64"),
    (torch.randn(5), r"has shape \[5\] but the graph has 4 edges"),
])
def test_bad_logits_are_named(bad, message):
    with pytest.raises(ZooOpError, match=message):
        edge_qsoftmax(GRAPH, bad, 1.5)
