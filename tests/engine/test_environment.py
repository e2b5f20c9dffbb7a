"""environment(): the versions, threads, CPU and git commit a run records; record_environment(): and
those it ran in before it resumed."""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import torch

import zoo
from zoo.engine.environment import environment, git_commit, record_environment

ROOT = Path(__file__).resolve().parents[2]


def _git(repo, *args):
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=30).stdout.strip()


def test_environment_records_versions_threads_and_commit():
    env = environment()
    assert env["zoo"] == zoo.__version__ and env["torch_threads"] == torch.get_num_threads()
    assert env["packages"]["torch"] == torch.__version__.split("+")[0]
    assert env["git_commit"].removesuffix("-dirty") == _git(ROOT, "rev-parse", "HEAD")
    assert env["cpu"]["capability"] == torch.backends.cpu.get_cpu_capability() and env["cpu"]["model"]


def test_a_resumed_run_keeps_each_different_environment_it_ran_in(tmp_path):
    path = tmp_path / "environment.json"
    a, b = environment() | {"git_commit": "a"}, environment() | {"cpu": {"model": "another CPU", "capability": "AVX2"}}
    path.write_text(json.dumps(a))
    record_environment(tmp_path, resumed=False)  # a fresh start replaces it
    assert "earlier" not in json.loads(path.read_text())
    path.write_text(json.dumps(a))
    record_environment(tmp_path, resumed=True)
    path.write_text(json.dumps(json.loads(path.read_text()) | b))  # its second segment ran on another machine
    record_environment(tmp_path, resumed=True)
    record_environment(tmp_path, resumed=True)  # the same environment again adds nothing
    record = json.loads(path.read_text())
    assert record["earlier"] == [a, b] and record | {"earlier": None} == environment() | {"earlier": None}
    path.write_text("not json")
    record_environment(tmp_path, resumed=True)
    assert json.loads(path.read_text()) == environment()


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


def test_a_run_records_the_commit_it_loaded_not_a_later_one(tmp_path):
    """A sweep outlives commits: the seeds it starts after one still run the code it imported. A copy of
    the package in its own repository is imported, then committed over, in one process."""
    shutil.copytree(ROOT / "zoo", tmp_path / "zoo", ignore=shutil.ignore_patterns("__pycache__"))
    identity = ("-c", "user.name=t", "-c", "user.email=t@t")
    _git(tmp_path, "init", "-q")
    _git(tmp_path, "add", "zoo")
    _git(tmp_path, *identity, "commit", "-qm", "loaded")
    loaded = _git(tmp_path, "rev-parse", "HEAD")
    script = ("import subprocess, sys\n"
              "from zoo.engine import environment\n"
              f"subprocess.run(['git', *{identity!r}, 'commit', '-q', '--allow-empty', '-m', 'later'], check=True)\n"
              "print(environment.environment()['git_commit'], environment.git_commit())\n")
    out = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, capture_output=True, text=True, check=True,
                         timeout=120, env={**os.environ, "PYTHONPATH": str(tmp_path)}).stdout.split()
    assert out[0] == loaded and out[1] not in (loaded, "unknown")
