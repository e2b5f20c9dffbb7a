"""One process at a time in a seed folder (zoo.engine.run_lock): a second job is refused with the
holder's pid and touches nothing; the lock goes with its process, so a killed job leaves none."""
import json
import subprocess
import sys
import threading

import pytest

from tests.engine.folder_holder import hold_folder
from tests.tools.tool_loader import ROOT, load_tool
from zoo.engine import experiment
from zoo.engine.recipe import build_recipe
from zoo.engine.run_lock import RunBusyError, hold_seed

GCN = {"name": "cora_gcn_lock", "dataset": "cora", "model": {"name": "gcn", "hidden": 8}, "optim": {"epochs": 1}}


@pytest.fixture
def holder():
    """Yields start(folder) -> a process holding the folder's flock, killed at the end of the test."""
    started = []

    def start(folder):
        started.append(hold_folder(folder))
        return started[-1]

    yield start
    for process in started:
        process.kill()
        process.wait(timeout=30)


def test_a_held_folder_is_refused_with_the_holders_pid_until_it_ends(tmp_path, holder):
    process = holder(tmp_path)
    with pytest.raises(RunBusyError, match=rf"{tmp_path} is being trained by another process \(pid {process.pid}:.*"
                                           rf"kill -TERM {process.pid}"):
        with hold_seed(tmp_path):
            pass
    process.kill()
    process.wait(timeout=30)
    with hold_seed(tmp_path):  # no stale lock once the holder is gone
        with pytest.raises(RunBusyError):  # and held by this process, a second holder is refused
            with hold_seed(tmp_path):
                pass
    assert list(tmp_path.iterdir()) == []  # no lock file


def test_run_recipe_refuses_a_seed_another_process_trains_and_touches_nothing(tmp_path, monkeypatch, holder):
    trained = []
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", lambda *args, **kwargs: trained.append(args))
    recipe = build_recipe(GCN)
    seed_dir = experiment.run_folder(recipe, tmp_path / "runs") / "seed0"
    seed_dir.mkdir(parents=True)
    (seed_dir / "last.pt").write_bytes(b"the other job's checkpoint")
    holder(seed_dir)
    with pytest.raises(RunBusyError, match="seed0 is being trained by another process"):
        experiment.run_recipe(recipe, tmp_path / "runs", seeds=[0], progress=False)
    with pytest.raises(RunBusyError):  # --force must not delete it either
        experiment.run_recipe(recipe, tmp_path / "runs", seeds=[0], force=True, progress=False)
    assert trained == [] and {p.name for p in seed_dir.iterdir()} == {"last.pt"}
    assert (seed_dir / "last.pt").read_bytes() == b"the other job's checkpoint"



@pytest.mark.parametrize("share", [False, True])
def test_a_new_seed_folder_another_job_locks_first_is_left_to_it(tmp_path, monkeypatch, holder, share):
    """Two jobs reach a new seed together: this one makes the folder, the other takes its lock first.
    This one stops (or, sharing, goes on) and must not remove the folder the other is training in."""
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", lambda *args, **kwargs: pytest.fail("trained"))
    real_hold = experiment.hold_seed

    def the_other_job_locks_it_first(seed_dir, *args, **kwargs):
        holder(seed_dir)
        return real_hold(seed_dir, *args, **kwargs)

    monkeypatch.setattr(experiment, "hold_seed", the_other_job_locks_it_first)
    recipe = build_recipe(GCN)
    seed_dir = experiment.run_folder(recipe, tmp_path / "runs") / "seed0"
    if share:
        assert experiment.run_recipe(recipe, tmp_path / "runs", seeds=[0], progress=False, share=True)["busy"] == [0]
    else:
        with pytest.raises(RunBusyError):
            experiment.run_recipe(recipe, tmp_path / "runs", seeds=[0], progress=False)
    assert seed_dir.is_dir()


def test_the_summary_is_written_in_turn_with_the_jobs_sharing_a_sweep(tmp_path, monkeypatch, holder):
    """Another job holds the config folder (writing its summary.json): this one waits for it, then
    writes the summary of every seed finished by then, its own included."""
    recipe = build_recipe(GCN)
    base = experiment.run_folder(recipe, tmp_path / "runs")
    finished = {"seed": 0, "split": 0, "main_metric": "accuracy", "num_parameters": 1, "best_epoch": 0,
                "final": {"val": {"accuracy": 0.5}, "test": {"accuracy": 0.5}}}

    def train(recipe, data, seed, seed_dir, **kwargs):
        (seed_dir / "metrics.json").write_text(json.dumps(finished))
        return finished

    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", train)
    base.mkdir(parents=True)
    process = holder(base)
    job = threading.Thread(target=experiment.run_recipe, args=(recipe, tmp_path / "runs"),
                           kwargs={"seeds": [0], "progress": False})
    job.start()
    job.join(timeout=2)
    assert job.is_alive() and not (base / "summary.json").exists()  # trained, waiting for the other job
    process.kill()
    process.wait(timeout=30)
    job.join(timeout=30)
    assert not job.is_alive() and json.loads((base / "summary.json").read_text())["seeds"] == [0]

def test_a_seed_finished_by_another_process_while_loading_is_not_retrained(tmp_path, monkeypatch):
    recipe = build_recipe(GCN)
    seed_dir = experiment.run_folder(recipe, tmp_path / "runs") / "seed0"
    finished = {"seed": 0, "main_metric": "accuracy", "final": {"val": {"accuracy": 0.5}, "test": {"accuracy": 0.5}}}

    def load_while_the_other_job_finishes(name, split):
        seed_dir.mkdir(parents=True)
        (seed_dir / "metrics.json").write_text(json.dumps(finished))
        return object()

    monkeypatch.setattr(experiment, "load_node_dataset", load_while_the_other_job_finishes)
    monkeypatch.setattr(experiment, "train_node_classifier", lambda *args, **kwargs: pytest.fail("retrained"))
    summary = experiment.run_recipe(recipe, tmp_path / "runs", seeds=[0], progress=False)
    assert summary["seeds"] == [0] and json.loads((seed_dir / "metrics.json").read_text()) == finished


def test_sweep_stops_with_one_error_line_and_exit_2(tmp_path, holder, capsys):
    recipe_file = tmp_path / "cora_gcn_lock.yaml"
    recipe_file.write_text(json.dumps({key: value for key, value in GCN.items() if key != "name"}))
    out = tmp_path / "runs"
    seed_dir = experiment.run_folder(build_recipe(GCN), out) / "seed0"
    seed_dir.mkdir(parents=True)
    process = holder(seed_dir)
    code = load_tool("sweep").main([str(recipe_file), "--seeds", "0", "--out", str(out)])
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert code == 2 and len(err) == 1 and err[0].startswith("error: ") and f"pid {process.pid}" in err[0]



def test_a_shared_sweep_leaves_a_held_seed_to_its_holder_and_trains_the_others(tmp_path, holder, capsys):
    """--share: seed 0's folder is held by another process, so the sweep says so, leaves it as it is,
    trains seed 1, exits 0 and names seed 0 in its last line. --share with --force is refused."""
    recipe_file = tmp_path / "cora_gcn_lock.yaml"
    recipe_file.write_text(json.dumps({key: value for key, value in GCN.items() if key != "name"}))
    out = tmp_path / "runs"
    base = experiment.run_folder(build_recipe(GCN), out)
    (base / "seed0").mkdir(parents=True)
    (base / "seed0" / "last.pt").write_bytes(b"the other job's checkpoint")
    process = holder(base / "seed0")
    args = [str(recipe_file), "--seeds", "0-1", "--order", "seed", "--share", "--out", str(out)]
    code = load_tool("sweep").main(args)
    said = capsys.readouterr().out
    assert code == 0, said
    assert f"seed 0: another process (pid {process.pid}) is training it in {base / 'seed0'}; left to it" in said
    assert said.rstrip().endswith("left to the jobs training them: cora_gcn_lock seed 0")
    assert {p.name for p in (base / "seed0").iterdir()} == {"last.pt"}
    assert (base / "seed0" / "last.pt").read_bytes() == b"the other job's checkpoint"
    assert json.loads((base / "summary.json").read_text())["seeds"] == [1]
    # two jobs retraining with --force would each retrain what the other already had
    assert load_tool("sweep").main(args + ["--force"]) == 2
    assert capsys.readouterr().err.startswith("error: --share with --force would let each job retrain")  # nothing ran


def test_the_same_sweep_started_twice_with_share_trains_each_seed_once(tmp_path):
    """Two --share jobs over the same recipe and seeds, started together: both exit 0, every seed
    is finished, and each was trained by one job only (its "seed k (split" line in one output)."""
    command = [sys.executable, str(ROOT / "tools" / "sweep.py"), str(ROOT / "recipes" / "texas_gat.yaml"), "--seeds",
               "0-3", "--epochs", "2", "--order", "seed", "--share", "--out", str(tmp_path / "runs")]
    jobs = [subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) for _ in range(2)]
    try:
        outputs = [job.communicate(timeout=300)[0] for job in jobs]
    finally:
        for job in jobs:
            job.kill()
    assert [job.returncode for job in jobs] == [0, 0], outputs
    trained = [{seed for seed in range(4) if f"seed {seed} (split " in output} for output in outputs]
    assert trained[0] | trained[1] == {0, 1, 2, 3} and not trained[0] & trained[1], trained
    assert len(list((tmp_path / "runs").glob("texas_gat/*/seed*/metrics.json"))) == 4

def test_every_rank_raises_when_rank_0_finds_the_folder_busy(tmp_path, holder):
    """``agree`` sums the busy flag over the ranks: a rank that holds nothing raises too when the
    sum says rank 0 is refused, and nobody raises when the folder is free."""
    with pytest.raises(RunBusyError, match="as rank 0 found"):
        with hold_seed(tmp_path, hold=False, agree=lambda flag: flag + 1.0):  # rank 0 said busy
            pass
    with hold_seed(tmp_path, hold=False, agree=lambda flag: flag):
        pass
    process = holder(tmp_path)
    sums = []
    with pytest.raises(RunBusyError, match=f"pid {process.pid}"):
        with hold_seed(tmp_path, agree=lambda flag: sums.append(flag) or flag):
            pass
    assert sums == [1.0]
