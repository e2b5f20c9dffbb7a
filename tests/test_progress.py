"""zoo._progress: a bar on a terminal, a line a minute in a log, nothing when disabled."""
import sys

from zoo import _progress
from zoo._progress import LINE_EVERY, progress


def test_a_log_gets_a_line_a_minute_and_nothing_when_disabled(capsys):
    """A fake clock: each item takes LINE_EVERY / 2.5 seconds. Resumed at item 2 of 10, the log
    gets a line once LINE_EVERY has passed since the last (items 5 and 8), never after the last
    item (what follows in the log says it ended); every item is yielded, in order."""
    ticks = iter(range(100))
    clock = lambda: next(ticks) * LINE_EVERY / 2.5  # noqa: E731
    shown = progress(iter(range(2, 10)), "run seed 0, epoch 3", 10, start=2, unit="batches", clock=clock)
    assert list(shown) == list(range(2, 10))
    assert capsys.readouterr().err.splitlines() == [f"run seed 0, epoch 3: {k}/10 batches, {t} s"
                                                    for k, t in ((5, 72), (8, 144))]
    assert list(progress(range(3), "x", enabled=False)) == [0, 1, 2]
    assert capsys.readouterr().err == ""


def test_a_terminal_gets_a_bar_with_the_total_of_a_sized_input(capsys, monkeypatch):
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    assert list(progress(["a", "b", "c"], "PE lap4", unit="graphs")) == ["a", "b", "c"]
    assert "PE lap4:   0%|          | 0/3" in capsys.readouterr().err


def test_without_a_total_a_line_counts_alone(capsys, monkeypatch):
    monkeypatch.setattr(_progress, "LINE_EVERY", 0.0)
    assert list(progress(iter("ab"), "scaffolds", unit="molecules")) == ["a", "b"]
    assert capsys.readouterr().err.splitlines()[0].startswith("scaffolds: 1 molecules, ")


def test_size_counts_bytes_in_a_log_and_on_a_terminal(capsys, monkeypatch):
    """A download's chunks counted by ``len``: the log line shows bytes done of the total as tqdm
    formats sizes (1.5 MiB of 3 MiB), and the terminal bar reaches the byte total, not the chunk
    count."""
    chunks = [b"x" * (1 << 19)] * 6
    ticks = iter(range(100))
    clock = lambda: next(ticks) * LINE_EVERY / 2.5  # noqa: E731  (a line at the 3rd chunk only)
    assert list(progress(iter(chunks), "HIV.csv", 6 << 19, unit="B", size=len, clock=clock)) == chunks
    assert capsys.readouterr().err.splitlines() == ["HIV.csv: 1.57MB/3.15MB, 72 s"]
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True)
    monkeypatch.setattr(_progress, "tqdm", lambda **kw: _Bar(kw))
    assert list(progress(iter(chunks), "HIV.csv", 6 << 19, unit="B", size=len)) == chunks
    assert _Bar.seen == {"total": 6 << 19, "unit_scale": True, "counted": 6 << 19}


class _Bar:
    """A stand-in for tqdm that records its total, its scaling and what it was advanced by."""
    seen: dict = {}

    def __init__(self, kw):
        _Bar.seen = {"total": kw["total"], "unit_scale": kw["unit_scale"], "counted": 0}

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def update(self, n):
        _Bar.seen["counted"] += n
