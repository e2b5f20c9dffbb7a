"""What a run was made with: library versions, threads, the CPU and the git commit."""
from __future__ import annotations

import json
import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from zoo._version import __version__
from zoo.engine.allocator import allocator_setting
from zoo.engine.checkpoint import write_json

PACKAGES = ("torch", "dgl", "numpy", "torchmetrics", "ogb", "dgllife", "rdkit")


def git_commit(repo: Path = Path(__file__).resolve().parents[2]) -> str:
    """The checked-out commit (with ``-dirty`` when tracked files changed), or ``unknown``."""
    try:
        run = lambda *args: subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, timeout=10)
        head = run("rev-parse", "HEAD")
        if head.returncode != 0:
            return "unknown"
        dirty = run("status", "--porcelain", "--untracked-files=no").stdout.strip()
        return head.stdout.strip() + ("-dirty" if dirty else "")
    except (OSError, subprocess.SubprocessError):
        return "unknown"


LOADED_COMMIT = git_commit()
"""The commit of the code this process runs: read once, when zoo is imported, so that a sweep
which outlives a commit (a later ``git commit``, ``pull`` or edit) does not record the newer
commit for the seeds it starts afterwards, whose code it never loaded."""


def cpu() -> dict:
    """The CPU, on which float rounding depends: its model name (``/proc/cpuinfo``, else
    ``platform.processor()``) and the vector path torch's kernels take here."""
    model = platform.processor()
    try:
        model = next((line.split(":", 1)[1].strip() for line in Path("/proc/cpuinfo").read_text().splitlines()
                      if line.startswith("model name")), model)
    except OSError:
        pass
    return {"model": model or "unknown", "capability": torch.backends.cpu.get_cpu_capability()}


def record_environment(folder: str | Path, resumed: bool) -> None:
    """Write ``folder/environment.json``: this process's :func:`environment`. A run that resumes
    keeps, under ``earlier`` (oldest first), each different environment it ran in before, so a
    seed trained across sessions, commits or machines names them all.

    >>> import tempfile
    >>> folder = Path(tempfile.mkdtemp())
    >>> (folder / "environment.json").write_text('{"git_commit": "abc", "zoo": "0.0.9"}')
    37
    >>> record_environment(folder, resumed=True)
    >>> record = json.loads((folder / "environment.json").read_text())
    >>> record["earlier"], record["git_commit"] == LOADED_COMMIT
    ([{'git_commit': 'abc', 'zoo': '0.0.9'}], True)
    """
    path = Path(folder) / "environment.json"
    now = environment()
    if resumed and path.is_file():
        try:
            before = json.loads(path.read_text())
        except ValueError:  # not JSON: nothing to keep
            before = {}
        if not isinstance(before, dict):  # JSON, but not a record: nothing to keep
            before = {}
        earlier = before.pop("earlier", [])
        if before and before != now:
            earlier.append(before)
        if earlier:
            now["earlier"] = earlier
    write_json(now, path)


def environment() -> dict:
    """Versions of Python, zoo and its key dependencies, the platform, the CPU, the commit of the
    loaded code (:data:`LOADED_COMMIT`), torch threads and the malloc setting (:mod:`zoo.engine.allocator`)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "cpu": cpu(),
        "zoo": __version__,
        "git_commit": LOADED_COMMIT,
        "torch_threads": torch.get_num_threads(),
        "allocator": allocator_setting(),
        "packages": versions,
    }
