"""A stand-in for a trainer's function that counts its calls and is killed (KeyboardInterrupt) at one."""


class KillAtCall:
    """Call ``real``, counting calls in ``calls``; raise KeyboardInterrupt instead at call number ``at``."""

    def __init__(self, real, at: int | None = None):
        self.real, self.at, self.calls = real, at, 0

    def __call__(self, *args):
        self.calls += 1
        if self.calls == self.at:
            raise KeyboardInterrupt
        return self.real(*args)
