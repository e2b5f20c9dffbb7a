"""Building the fused CPU kernels (zoo/ops/_fused.py): they build where g++ and ninja exist, and
without a compiler the ops fall back to the pure-torch path after one warning. Kept apart from
test_fused.py, whose tests skip when the kernels cannot be built."""
import shutil

import pytest
import torch

from tests.ops.test_fused import logits_for, power_law_graph
from zoo.ops import _fused, edge_entmax, edge_qsoftmax


def test_without_a_compiler_the_pure_path_runs_after_one_warning(monkeypatch):
    monkeypatch.setattr(_fused, "_state", {"ops": None, "tried": False, "enabled": True})
    monkeypatch.setattr(shutil, "which", lambda name: None)
    graph = power_law_graph(seed=8)
    z = logits_for(graph, torch.float64)
    with pytest.warns(RuntimeWarning, match=r"the C\+\+ compiler 'c\+\+' not found.*pure-torch path; install") as seen:
        outs = [edge_qsoftmax(graph, z, 1.5), edge_entmax(graph, z, 1.5)]
    assert len(seen) == 1
    with _fused.disabled():
        torch.testing.assert_close(outs[0], edge_qsoftmax(graph, z, 1.5), atol=0, rtol=0)
        torch.testing.assert_close(outs[1], edge_entmax(graph, z, 1.5), atol=0, rtol=0)


def test_kernels_build_where_a_compiler_and_ninja_exist():
    """CI has g++ and ninja: the fused path must be the one that runs there."""
    from torch.utils.cpp_extension import is_ninja_available
    if shutil.which("c++") and is_ninja_available():
        assert _fused.kernels() is not None and _fused.usable(torch.zeros(1, 1))
