"""zoo._malloc: the training tools rerun themselves with jemalloc preloaded where the system has
it and the user chose nothing. The exec tests preload the C library already loaded (a stand-in,
so no jemalloc is needed): what is checked is the rerun itself, in the same process with the same
interpreter flags and arguments, and what the process then records."""
import json
import subprocess
import sys
from pathlib import Path

import pytest

from tools.benchmarks.allocator import clean_env
from zoo import _malloc

ROOT = Path(__file__).resolve().parents[1]
FOUND = "/usr/lib/libjemalloc.so.2"
PRELOAD = {"LD_PRELOAD": FOUND, "MALLOC_CONF": _malloc.JEMALLOC_CONF, "ZOO_MALLOC": "jemalloc"}


@pytest.mark.parametrize("environ, found, expected", [
    ({}, FOUND, PRELOAD),
    ({"ZOO_MALLOC": "jemalloc"}, FOUND, PRELOAD),
    ({}, None, None),                                              # none found: glibc kept
    ({"ZOO_MALLOC": "glibc"}, FOUND, None),
    ({"ZOO_MALLOC": "default"}, FOUND, None),
    ({"LD_PRELOAD": "/opt/libtcmalloc.so"}, FOUND, None),          # the user's choice wins
    ({"MALLOC_ARENA_MAX": "2"}, FOUND, None),
    ({"GLIBC_TUNABLES": "glibc.malloc.trim_threshold=0"}, FOUND, None),
    ({"ZOO_MALLOC": "jemalloc", "LD_PRELOAD": FOUND, "MALLOC_CONF": _malloc.JEMALLOC_CONF}, FOUND, None),  # rerun
], ids=["found", "asked", "not-found", "glibc", "default", "ld-preload", "malloc-var", "tunables", "after-rerun"])
def test_jemalloc_is_preloaded_only_where_found_and_nobody_chose(environ, found, expected, monkeypatch):
    monkeypatch.setattr(_malloc.ctypes.util, "find_library", lambda name: found if name == "jemalloc" else None)
    assert _malloc.jemalloc_environment(environ) == expected


def test_zoo_jemalloc_names_the_library(tmp_path, monkeypatch):
    library = tmp_path / "libjemalloc.so.2"
    library.write_bytes(b"")
    monkeypatch.setattr(_malloc.ctypes.util, "find_library", lambda name: pytest.fail("searched despite ZOO_JEMALLOC"))
    assert _malloc.jemalloc_environment({"ZOO_JEMALLOC": str(library)})["LD_PRELOAD"] == str(library)


@pytest.mark.parametrize("environ, named", [
    ({"ZOO_MALLOC": "jemaloc"}, "ZOO_MALLOC=jemaloc is not one of jemalloc, glibc, default"),
    ({"ZOO_JEMALLOC": "/nowhere/libjemalloc.so.2"}, "ZOO_JEMALLOC=/nowhere/libjemalloc.so.2 is not a file"),
    ({"ZOO_MALLOC": "jemalloc"}, "ZOO_MALLOC=jemalloc, but no jemalloc was found"),
])
def test_a_choice_that_cannot_be_honoured_exits_2_and_says_so(environ, named, monkeypatch, capsys):
    monkeypatch.setattr(_malloc.ctypes.util, "find_library", lambda name: None)
    with pytest.raises(SystemExit) as stop:
        _malloc.preload_jemalloc(environ, execve=lambda *a: pytest.fail("reran despite the error"))
    assert stop.value.code == 2 and named in capsys.readouterr().err


_RERUN = """
import json, os, sys
print(json.dumps({"pid": os.getpid(), "preload": os.environ.get("LD_PRELOAD")}), flush=True)
from zoo._malloc import preload_jemalloc
preload_jemalloc()
from zoo.engine.allocator import keep_freed_memory
print(json.dumps({"pid": os.getpid(), "args": sys.argv[1:], "no_bytecode": sys.flags.dont_write_bytecode,
                  "conf": os.environ.get("MALLOC_CONF"), "setting": keep_freed_memory()}))
"""


def test_the_rerun_is_the_same_process_with_the_library_preloaded(loaded_libc):
    library = loaded_libc
    done = subprocess.run([sys.executable, "-B", "-c", _RERUN, "a", "--b"], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(clean_env(), ZOO_JEMALLOC=library))
    assert done.returncode == 0, done.stderr
    before, again, after = (json.loads(line) for line in done.stdout.splitlines())
    assert before == {"pid": before["pid"], "preload": None} and again == {"pid": before["pid"], "preload": library}
    assert after == {"pid": before["pid"], "args": ["a", "--b"], "no_bytecode": 1, "conf": _malloc.JEMALLOC_CONF,
                     "setting": f"left as set (LD_PRELOAD={library}; MALLOC_CONF={_malloc.JEMALLOC_CONF})"}
    assert f"malloc: jemalloc without purging ({library})" in done.stderr


@pytest.mark.parametrize("tool", ["train", "sweep", "tune", "csbm_sweep", "finetune"])
def test_every_training_tool_reruns_itself_once(tool, loaded_libc):
    """The rerun comes before argparse: ``--help`` prints once, after the rerun."""
    done = subprocess.run([sys.executable, f"tools/{tool}.py", "--help"], cwd=ROOT, capture_output=True, text=True,
                          timeout=300, env=dict(clean_env(), ZOO_JEMALLOC=loaded_libc))
    assert done.returncode == 0, done.stderr
    assert done.stderr.count("malloc: jemalloc without purging") == 1 and done.stdout.count("usage:") == 1
