"""environment(): the versions, threads and git commit a run records."""
from pathlib import Path

import torch

import zoo
from zoo.engine.environment import environment, git_commit

ROOT = Path(__file__).resolve().parents[2]


def test_environment_records_versions_threads_and_commit():
    env = environment()
    assert env["zoo"] == zoo.__version__ and env["torch_threads"] == torch.get_num_threads()
    assert env["packages"]["torch"] == torch.__version__.split("+")[0]
    assert env["git_commit"] == git_commit(ROOT)


def test_git_commit_outside_a_repository_is_unknown(tmp_path):
    assert git_commit(tmp_path) == "unknown"

