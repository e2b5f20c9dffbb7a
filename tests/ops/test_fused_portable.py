"""The portable build of the fused kernels (``ZOO_FUSED_ISA=default``, zoo/ops/_fused.py): no AVX2
flags, so ATen's ``Vectorized`` is its scalar fallback (lane loops, libm's exp and log1p instead of
SLEEF's, loads of a partial vector that leave the other lanes unset). CPUs without AVX2 run this
build; machines with AVX2 never do, so here it is built on purpose and held to the pure-torch path.

It runs all of test_fused.py (values, exact zeros and gradients for every q-softmax mode including
the Taylor branch near q = 1, entmax from alpha = 1 to 3 including sparsemax, ties, -inf, nodes
without in-edges, blocks, head counts around the vector width, 1 and 3 threads) with that file's
tolerances, which allow for float32 / float64 rounding (libm and SLEEF differ by an ulp or so).
One process loads only one build (both register the same torch ops), so it runs in a child
process; the first run compiles the build (about 15 s, once per machine and source) into the same
extensions folder as the AVX2 one, under its own hashed name. About 5 s once built.
"""
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path
from xml.etree import ElementTree

import pytest

from zoo.ops import _fused

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT = 600  # s: a cold build under heavy load, plus the tests
# The child runs test_fused.py, then lists the extension libraries it loaded.
CHILD = """
import sys, pytest, torch
code = pytest.main(["-q", "-p", "no:cacheprovider", "--tb=short", "--junitxml=" + sys.argv[1], "tests/ops/test_fused.py"])
print("loaded:", *sorted(torch.ops.loaded_libraries), sep="\\n")
sys.exit(int(code))
"""


def run_child(report):
    """Exit code and output of CHILD with ZOO_FUSED_ISA=default; its process group dies on timeout."""
    env = {**os.environ, "ZOO_FUSED_ISA": "default", "ZOO_FUSED_OPS": "1"}
    child = subprocess.Popen([sys.executable, "-c", CHILD, str(report)], cwd=ROOT, env=env, text=True,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        output = child.communicate(timeout=TIMEOUT)[0]
    except subprocess.TimeoutExpired:
        os.killpg(child.pid, signal.SIGKILL)  # the compiler too
        output = child.communicate()[0]
        pytest.fail(f"ZOO_FUSED_ISA=default: build and tests took over {TIMEOUT} s (if the build was cut, "
                    f"delete the 'lock' file in its folder {_fused.build_name('default')}):\n{output[-4000:]}")
    return child.returncode, output


def test_the_portable_build_agrees_with_the_pure_torch_path(tmp_path):
    from torch.utils.cpp_extension import is_ninja_available
    if not (shutil.which(os.environ.get("CXX", "c++")) and is_ninja_available()):
        pytest.skip("no C++ compiler or ninja: no fused kernels to build")
    code, output = run_child(tmp_path / "report.xml")
    assert code == 0, f"test_fused.py on the portable build (ZOO_FUSED_ISA=default):\n{output[-6000:]}"
    counts = ElementTree.parse(tmp_path / "report.xml").getroot().find("testsuite").attrib
    assert int(counts["tests"]) > 40 and counts["skipped"] == counts["failures"] == counts["errors"] == "0", (
        f"test_fused.py on the portable build ran {counts} (tests skip where it did not build):\n{output[-4000:]}")
    loaded = [Path(line).parent.name for line in output.split("loaded:")[-1].split() if "zoo_edge_ops" in line]
    assert loaded == [_fused.build_name("default")], output[-2000:]
