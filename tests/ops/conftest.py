"""Shared by the ops tests: one torch thread while they run; the normaliser tests run on both paths."""
import pytest
import torch

from zoo.ops import _fused


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny graphs: one thread, so that OpenMP waits cannot dominate on a loaded machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(params=["fused", "pure"])
def op_path(request):
    """Run a test once on the fused CPU kernels and once on the pure-torch path (zoo/ops/_fused.py)."""
    if request.param == "pure":
        with _fused.disabled():
            yield request.param
        return
    if _fused.kernels() is None:
        pytest.skip("the fused kernels could not be built here (see the RuntimeWarning)")
    yield request.param
