"""environment(): the versions, threads and git commit a run records."""
import subprocess
from pathlib import Path

import torch

import zoo
from zoo.engine.environment import environment, git_commit

ROOT = Path(__file__).resolve().parents[2]


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=30).stdout.strip()


def test_environment_records_versions_threads_and_commit():
    env = environment()
    assert env["zoo"] == zoo.__version__ and env["torch_threads"] == torch.get_num_threads()
    assert env["packages"]["torch"] == torch.__version__.split("+")[0]
    assert env["git_commit"].removesuffix("-dirty") == _git(ROOT, "rev-parse", "HEAD")


def test_git_commit_names_the_head_and_a_dirty_tree(tmp_path):
    _git(tmp_path, "init", "-q")
    (tmp_path / "f.txt").write_text("a\n")
    _git(tmp_path, "add", "f.txt")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    head = _git(tmp_path, "rev-parse", "HEAD")
    assert git_commit(tmp_path) == head
    (tmp_path / "f.txt").write_text("b\n")
    assert git_commit(tmp_path) == head + "-dirty"


def test_git_commit_outside_a_repository_is_unknown(tmp_path):
    assert git_commit(tmp_path) == "unknown"
