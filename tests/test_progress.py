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
