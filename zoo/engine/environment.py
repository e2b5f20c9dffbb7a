"""What a run was made with: library versions, threads and the git commit."""
from __future__ import annotations

import platform
import subprocess
from importlib import metadata
from pathlib import Path

import torch

from zoo._version import __version__
from zoo.engine.allocator import allocator_setting

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


def environment() -> dict:
    """Versions of Python, zoo and its key dependencies, the platform, torch threads and the
    malloc setting (:mod:`zoo.engine.allocator`)."""
    versions = {}
    for name in PACKAGES:
        try:
            versions[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            versions[name] = None
    return {
        "python": platform.python_version(),
        "platform": platform.platform(),
        "zoo": __version__,
        "git_commit": git_commit(),
        "torch_threads": torch.get_num_threads(),
        "allocator": allocator_setting(),
        "packages": versions,
    }
