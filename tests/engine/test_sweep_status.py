"""zoo.engine.sweep_status: every seed's state and the time left, from hand-made run folders."""
import dataclasses
import json

import pytest

from tests.engine.folder_holder import hold_folder
from tests.tools.tool_loader import ROOT, load_tool
from zoo.engine import load_recipe, run_folder
from zoo.engine.checkpoint import save_checkpoint
from zoo.engine.sweep_status import SeedStatus, format_status, sweep_status

sweep_cli = load_tool("sweep")


def _finish(seed_dir, seconds):
    seed_dir.mkdir(parents=True)
    seed = int(seed_dir.name.removeprefix("seed"))
    (seed_dir / "metrics.json").write_text(json.dumps({"seed": seed, "train_seconds": seconds}))


@pytest.fixture
def recipes():
    recipe = dataclasses.replace(load_recipe(ROOT / "recipes/texas_gcn.yaml"), seeds=[0, 1, 2, 3, 4, 5])
    return recipe, dataclasses.replace(recipe, name="texas_gcn_twin")  # same config hash, another name


def test_each_state_and_its_time_left(tmp_path, recipes):
    recipe, twin = recipes
    epochs = recipe.optim.epochs
    base = run_folder(recipe, tmp_path)
    _finish(base / "seed0", 100.0)
    _finish(base / "seed1", 300.0)
    (base / "seed2").mkdir()
    save_checkpoint({"state": {"epoch": 4, "train_seconds": 40.0}}, base / "seed2" / "last.pt")
    (base / "seed3").mkdir()  # started, no epoch finished yet
    _finish(run_folder(twin, tmp_path) / "seed4", 700.0)  # the twin finished seed 4 first
    (base / "seed5").mkdir()  # diverged at epoch 3: a sweep reports it, never retrains it
    save_checkpoint({"state": {"epoch": 3, "train_seconds": 30.0}}, base / "seed5" / "last.pt")
    (base / "seed5" / "diverged.json").write_text(json.dumps({"message": "training diverged: ..."}))

    rows = sweep_status([recipe, twin], tmp_path)
    mine = {row.seed: row for row in rows if row.recipe == recipe.name}
    assert [mine[s].state for s in range(6)] == ["finished", "finished", "under way", "under way", "twin", "diverged"]
    assert mine[5].left == 0.0
    assert (mine[2].epoch, mine[2].seconds, mine[2].left) == (4, 40.0, pytest.approx(10.0 * (epochs - 4)))
    assert (mine[3].epoch, mine[3].left) == (0, 200.0)  # the mean of seeds 0 and 1
    assert (mine[4].seconds, mine[4].left) == (700.0, 0.0)
    theirs = {row.seed: row for row in rows if row.recipe == twin.name}
    assert [theirs[s].state for s in range(6)] == ["twin", "twin", "to run", "to run", "finished", "to run"]
    assert theirs[2].left == theirs[3].left == 700.0  # its own finished seed sets its pace


def test_a_checkpoint_written_inside_an_epoch_counts_its_seconds(tmp_path, recipes):
    recipe, _ = recipes
    epochs = recipe.optim.epochs
    base = run_folder(recipe, tmp_path)
    _finish(base / "seed0", 100.0)
    (base / "seed1").mkdir()  # 4 epochs at 10 s, then 3 s into the fifth
    save_checkpoint({"state": {"epoch": 4, "train_seconds": 40.0}, "partial": {"trained": 2, "seconds": 3.0}},
                    base / "seed1" / "last.pt")
    (base / "seed2").mkdir()  # 30 s into the first epoch: no whole epoch to set a pace
    save_checkpoint({"state": {"epoch": 0, "train_seconds": 0.0}, "partial": {"trained": 5, "seconds": 30.0}},
                    base / "seed2" / "last.pt")
    rows = {row.seed: row for row in sweep_status([recipe], tmp_path, seeds=[0, 1, 2])}
    assert (rows[1].epoch, rows[1].seconds, rows[1].left) == (4, 43.0, pytest.approx(10.0 * (epochs - 4) - 3.0))
    assert (rows[2].state, rows[2].epoch, rows[2].seconds, rows[2].left) == ("under way", 0, 30.0, 70.0)


def test_a_recipe_with_no_finished_seed_is_not_estimated(tmp_path, recipes):
    recipe, _ = recipes
    rows = sweep_status([recipe], tmp_path, seeds=[0, 1])
    assert [(row.state, row.left) for row in rows] == [("to run", None), ("to run", None)]
    text = format_status(rows)
    assert "texas_gcn  -         -     -         -          0-1     ?           ?" in text
    assert ("Training time left: not estimated, no recipe with runs left has a finished seed or whole epoch "
            "under way yet.") in text
    assert ("CPU time left: not estimated, no recipe with runs left has a finished seed or whole epoch under way "
            "that recorded its CPU time yet.") in text
    assert not (tmp_path / recipe.name).exists()  # looking creates nothing


def test_a_seeds_selection_takes_the_pace_of_every_finished_seed(tmp_path, recipes):
    """``--seeds 5-9`` extends a study: its seeds take the pace of seeds 0-1, finished outside it."""
    recipe, _ = recipes
    base = run_folder(recipe, tmp_path)
    _finish(base / "seed0", 100.0)
    _finish(base / "seed1", 300.0)
    (base / "seed_notes").mkdir()  # not a seed folder
    rows = sweep_status([recipe], tmp_path, seeds=[5, 6])
    assert [(row.seed, row.state, row.left) for row in rows] == [(5, "to run", 200.0), (6, "to run", 200.0)]


def test_with_no_finished_seed_the_seeds_under_way_set_the_pace(tmp_path, recipes):
    recipe, _ = recipes
    epochs = recipe.optim.epochs
    base = run_folder(recipe, tmp_path)
    (base / "seed0").mkdir(parents=True)  # 4 epochs at 10 s: a whole run of 10 * epochs seconds
    save_checkpoint({"state": {"epoch": 4, "train_seconds": 40.0}}, base / "seed0" / "last.pt")
    (base / "seed1").mkdir()  # 30 s into its first epoch
    save_checkpoint({"state": {"epoch": 0, "train_seconds": 0.0}, "partial": {"trained": 5, "seconds": 30.0}},
                    base / "seed1" / "last.pt")
    rows = {row.seed: row for row in sweep_status([recipe], tmp_path, seeds=[0, 1, 2])}
    assert rows[0].left == pytest.approx(10.0 * (epochs - 4))
    assert rows[1].left == pytest.approx(10.0 * epochs - 30.0)
    assert (rows[2].state, rows[2].left) == ("to run", pytest.approx(10.0 * epochs))


def test_cpu_time_left_from_the_runs_that_recorded_it(tmp_path, recipes):
    """Seeds 0-1 finished with CPU time (wall 200 and 400 s, CPU 100 and 300 s); seed 2 has run 4
    epochs at 5 s of CPU each and 1 s into the fifth; seed 3 was begun before CPU time was recorded,
    4 epochs in; seed 4 is to run. The CPU clock projects as the wall clock does, and a seed without
    CPU time takes the recipe's CPU pace for the epochs it has left."""
    recipe, _ = recipes
    epochs = recipe.optim.epochs
    base = run_folder(recipe, tmp_path)
    for seed, (wall, cpu) in enumerate([(200.0, 100.0), (400.0, 300.0)]):
        (base / f"seed{seed}").mkdir(parents=True)
        metrics = {"seed": seed, "train_seconds": wall, "train_cpu_seconds": cpu}
        (base / f"seed{seed}" / "metrics.json").write_text(json.dumps(metrics))
    (base / "seed2").mkdir()
    save_checkpoint({"state": {"epoch": 4, "train_seconds": 40.0, "train_cpu_seconds": 20.0},
                     "partial": {"trained": 2, "seconds": 3.0, "cpu_seconds": 1.0}}, base / "seed2" / "last.pt")
    (base / "seed3").mkdir()
    save_checkpoint({"state": {"epoch": 4, "train_seconds": 40.0}}, base / "seed3" / "last.pt")
    rows = {row.seed: row for row in sweep_status([recipe], tmp_path, seeds=[0, 1, 2, 3, 4])}
    assert (rows[0].cpu_seconds, rows[0].cpu_left, rows[1].cpu_seconds) == (100.0, 0.0, 300.0)
    assert (rows[2].cpu_seconds, rows[2].cpu_left) == (21.0, pytest.approx(5.0 * (epochs - 4) - 1.0))
    assert (rows[3].cpu_seconds, rows[3].cpu_left) == (None, pytest.approx(200.0 * (epochs - 4) / epochs))
    assert (rows[4].cpu_left, rows[4].left) == (200.0, 300.0)
    hours = (rows[2].cpu_left + rows[3].cpu_left + 200.0) / 3600
    assert f"CPU time left: {hours:.1f} h of one core." in format_status(list(rows.values()))


def test_a_seed_under_way_names_the_process_training_it_now(tmp_path, recipes):
    """Seed 1's folder is held (flock) by another process, as a training job holds it; seed 2's
    last.pt has no process behind it (a stopped job). Only seed 1 gets a pid, read without locking."""
    recipe, _ = recipes
    base = run_folder(recipe, tmp_path)
    for seed in (1, 2):
        (base / f"seed{seed}").mkdir(parents=True)
        save_checkpoint({"state": {"epoch": 2, "train_seconds": 20.0}}, base / f"seed{seed}" / "last.pt")
    process = hold_folder(base / "seed1")
    try:
        rows = {row.seed: row for row in sweep_status([recipe], tmp_path, seeds=[1, 2])}
        text = format_status(list(rows.values()))
    finally:
        process.kill()
        process.wait(timeout=30)
    assert (rows[1].pid, rows[2].pid) == (str(process.pid), None)
    assert f"1 (epoch 2/{recipe.optim.epochs}, pid {process.pid}), 2 (epoch 2/{recipe.optim.epochs})" in text
    assert "2 under way (1 training now)" in text

def test_table_lists_seed_ranges_and_totals():
    rows = [SeedStatus("a", s, "finished", 10, seconds=360.0, left=0.0) for s in (0, 1, 2, 5)]
    rows += [SeedStatus("a", 7, "to run", 10, left=360.0), SeedStatus("b", 0, "under way", 10, epoch=3, left=7200.0)]
    lines = format_status(rows).splitlines()
    assert lines[1].split() == ["a", "0-2,5", "-", "-", "-", "7", "0.1", "?"]
    assert lines[2].split() == ["b", "-", "-", "-", "0", "(epoch", "3/10)", "-", "2.0", "?"]
    assert lines[4] == "6 runs: 4 finished, 0 twin, 0 diverged, 1 under way, 1 to run."
    assert lines[5] == "Training time left: 2.1 h."
    rows.append(SeedStatus("c", 0, "to run", 10))
    assert format_status(rows).splitlines()[6] == ("Training time left: 2.1 h for 2 runs; 1 run of recipes with no "
                                                   "finished seed or whole epoch under way is not estimated.")
    # finished seeds count as nothing left, not as estimated runs: a recipe whose runs left are all
    # unknown shows "?", and one with none left "0.0"
    rows = [SeedStatus("a", 0, "finished", 10, seconds=360.0, left=0.0, cpu_left=0.0),
            SeedStatus("a", 1, "to run", 10, left=360.0), SeedStatus("b", 0, "finished", 10, left=0.0)]
    lines = format_status(rows).splitlines()
    assert lines[1].split()[-2:] == ["0.1", "?"] and lines[2].split()[-2:] == ["0.0", "0.0"]
    assert lines[6] == ("CPU time left: not estimated, no recipe with runs left has a finished seed or whole epoch "
                        "under way that recorded its CPU time yet.")


def test_status_flag_trains_nothing(offline_env, tmp_path, capsys):
    recipe = str(ROOT / "recipes/texas_gcn.yaml")
    assert sweep_cli.main([recipe, "--seeds", "0", "--epochs", "2", "--out", str(tmp_path)]) == 0
    capsys.readouterr()
    assert sweep_cli.main([recipe, "--seeds", "0-2", "--epochs", "2", "--out", str(tmp_path), "--status"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[1].split()[:6] == ["texas_gcn", "0", "-", "-", "-", "1-2"]
    assert "3 runs: 1 finished, 0 twin, 0 diverged, 0 under way, 2 to run." in out
    (run,) = (tmp_path / "texas_gcn").iterdir()
    assert sorted(p.name for p in run.glob("seed*")) == ["seed0"]


def test_status_names_an_unreadable_checkpoint(tmp_path, capsys, recipes):
    recipe, _ = recipes
    seed_dir = run_folder(recipe, tmp_path) / "seed0"
    seed_dir.mkdir(parents=True)
    (seed_dir / "last.pt").write_bytes(b"not a checkpoint")
    code = sweep_cli.main([str(ROOT / "recipes/texas_gcn.yaml"), "--seeds", "0", "--out", str(tmp_path), "--status"])
    assert code == 2
    assert "last.pt cannot be read" in capsys.readouterr().err
