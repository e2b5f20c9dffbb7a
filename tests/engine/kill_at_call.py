"""Kill a training run at one call of a trainer's function, then resume it, counting the calls."""
import pytest
import torch


class KillAtCall:
    """Call ``real``, counting calls in ``calls``; raise KeyboardInterrupt instead at call number ``at``."""

    def __init__(self, real, at: int | None = None):
        self.real, self.at, self.calls = real, at, 0

    def __call__(self, *args):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.real(*args)


def kill_then_resume(monkeypatch, module, name: str, at: int, train, run_dir):
    """``train(run_dir, checkpoint_every=0)`` killed at call ``at`` of ``module.name``, then
    ``train(run_dir)`` again. Returns the ``last.pt`` the kill left, the resumed run's result and
    how many calls the resume made."""
    real = getattr(module, name)
    monkeypatch.setattr(module, name, KillAtCall(real, at=at))
    with pytest.raises(KeyboardInterrupt):
        train(run_dir, checkpoint_every=0)
    saved = torch.load(run_dir / "last.pt", weights_only=True)
    counted = KillAtCall(real)
    monkeypatch.setattr(module, name, counted)
    return saved, train(run_dir), counted.calls
