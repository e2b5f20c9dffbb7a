"""Shared by the ops tests: one torch thread while they run."""
import pytest
import torch


@pytest.fixture(autouse=True)
def one_thread():
    """Tiny graphs: one thread, so that OpenMP waits cannot dominate on a loaded machine."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)
