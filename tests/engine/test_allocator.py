"""zoo.engine.allocator: glibc told to keep freed memory, unless the user chose otherwise.

The reference for "kept" is glibc's own behaviour with its defaults: the same training steps, in
a fresh process each, counted in minor page faults (the cost the setting removes)."""
import json
import platform

import pytest

from tools.benchmarks import allocator as allocator_benchmark
from zoo.engine import allocator
from zoo.engine.environment import environment

GLIBC = platform.libc_ver()[0] == "glibc"


@pytest.mark.parametrize("environ, named", [
    ({"ZOO_MALLOC": "default"}, "ZOO_MALLOC=default"),
    ({"MALLOC_ARENA_MAX": "2"}, "MALLOC_ARENA_MAX=2"),
    ({"LD_PRELOAD": "/opt/libjemalloc.so.2", "MALLOC_CONF": "dirty_decay_ms:-1"}, "LD_PRELOAD=/opt/libjemalloc.so.2"),
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, "GLIBC_TUNABLES=glibc.malloc.trim_threshold=0"),
])
def test_a_user_choice_is_left_alone_and_named(environ, named, monkeypatch):
    monkeypatch.setattr(allocator, "_setting", allocator._setting)  # restored after the test
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda *a: pytest.fail("mallopt called despite the user's choice"))
    said = allocator.keep_freed_memory(environ)
    assert said == f"left as set ({named})" == allocator.allocator_setting()
    assert environment()["allocator"] == said


def test_another_c_library_is_left_alone(monkeypatch):
    monkeypatch.setattr(allocator, "_setting", allocator._setting)
    monkeypatch.setattr(allocator.platform, "libc_ver", lambda: ("musl", "1.2"))
    monkeypatch.setattr(allocator.ctypes, "CDLL", lambda *a: pytest.fail("mallopt called on musl"))
    assert allocator.keep_freed_memory({}) == "left as set (C library musl, not glibc)"


@pytest.mark.skipif(not GLIBC, reason="glibc's mallopt only")
def test_kept_memory_takes_far_fewer_page_faults_than_glibc_defaults(capsys):
    """``benchmark.py allocator`` at a tiny size: two fresh processes, the same SigGate-GT training
    steps; with the setting, the steps reuse freed memory instead of faulting it back in."""
    rows = allocator_benchmark.run(pairs=1, steps=3, batch_size=4)
    out = capsys.readouterr().out
    faults = {row["setting"].split(":")[0]: row["faults"] for row in rows}
    assert set(faults) == {"glibc defaults (keep_freed_memory not called)", "glibc mallopt"}, rows
    assert faults["glibc mallopt"] < faults["glibc defaults (keep_freed_memory not called)"] / 2, json.dumps(rows)
    assert "| 0 | default |" in out and "| 0 | kept |" in out and "kept / default step time: median" in out
