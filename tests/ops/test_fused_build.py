"""Building the fused CPU kernels (zoo/ops/_fused.py): they build where g++ and ninja exist, and
without a compiler the ops fall back to the pure-torch path after one warning; $ZOO_FUSED_ISA picks
the build's flags and folder (test_fused_portable.py tests the portable build). Kept apart from
test_fused.py, whose tests skip when the kernels cannot be built."""
import shutil
from pathlib import Path

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


def test_an_unknown_isa_raises_naming_it_and_the_choices(monkeypatch):
    monkeypatch.setattr(_fused, "_state", {"ops": None, "tried": False, "enabled": True})
    monkeypatch.setattr(shutil, "which", lambda name: None)  # so that nothing is built if it does not raise
    monkeypatch.setenv("ZOO_FUSED_ISA", "avx512")
    with pytest.raises(ValueError, match=r"ZOO_FUSED_ISA='avx512' is not one of 'auto', 'default'"):
        _fused.kernels()


def test_the_isa_picks_the_flags_and_the_build_folder(monkeypatch):
    """auto follows the CPU torch finds (not faked here); default drops every AVX2 flag, in its own folder."""
    monkeypatch.delenv("ZOO_FUSED_ISA", raising=False)
    avx2 = torch.backends.cpu.get_cpu_capability() in ("AVX2", "AVX512")
    assert _fused.isa() == ("avx2" if avx2 else "default")
    monkeypatch.setenv("ZOO_FUSED_ISA", "default")
    assert _fused.isa() == "default"
    assert not any("avx" in flag.lower() or "fma" in flag for flag in _fused.FLAGS["default"])
    assert _fused.build_name("default") != _fused.build_name("avx2")


def test_this_process_loaded_the_build_its_isa_names():
    """The kernels the suite runs are the build named for $ZOO_FUSED_ISA (auto unless set)."""
    if _fused.kernels() is None:
        pytest.skip("the fused kernels could not be built here (see the RuntimeWarning)")
    loaded = [Path(path).parent.name for path in torch.ops.loaded_libraries if "zoo_edge_ops" in path]
    assert loaded == [_fused.build_name(_fused.isa())]
