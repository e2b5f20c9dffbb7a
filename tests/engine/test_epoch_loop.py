"""run_epochs: early stopping by hand-made curves, best weights, checkpoints on a clock, and resume
after a kill."""
import re

import pytest
import torch

import zoo.engine.epoch_loop as epoch_loop
from zoo.engine.checkpoint import load_checkpoint, save_checkpoint
from zoo.engine.divergence import TrainingDiverged
from zoo.engine.epoch_loop import LAST, BatchCheckpoints, finish, run_epochs


def _loop(tmp_path, scores, *, patience=2, mode="min", epochs=None, fail_at=None, checkpoint_every=0, tick=None,
          progress=False, release_every=epoch_loop.RELEASE_EVERY):
    """A linear model stepped by SGD each epoch; ``scores[e]`` is epoch e's validation value."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(16, 3), torch.randn(16, 1)

    def train_epoch(epoch):
        if epoch == fail_at:
            raise KeyboardInterrupt
        if tick is not None:
            tick()
        optimizer.zero_grad()
        noise = torch.randn(16, 1) * 0.01  # uses the RNG, so a resume must restore it
        loss = torch.nn.functional.mse_loss(model(x) + noise, y)
        loss.backward()
        optimizer.step()
        return {"train_loss": float(loss)}

    it = iter(range(len(scores)))
    state = run_epochs(model=model, optimizers=[optimizer], run_dir=tmp_path, epochs=epochs or len(scores),
                       patience=patience, train_epoch=train_epoch, evaluate=lambda: {"val_mae": scores[next(it)]},
                       monitor="val_mae", mode=mode, progress=progress, checkpoint_every=checkpoint_every,
                       release_every=release_every)
    return state, model


def test_stops_after_patience_epochs_without_improvement(tmp_path):
    state, _ = _loop(tmp_path, [5.0, 4.0, 4.5, 4.0, 3.0, 1.0], patience=2)
    assert (state["epoch"], state["best_epoch"], state["best"], state["stopped_early"]) == (4, 1, 4.0, True)
    assert [row["val_mae"] for row in state["curves"]] == [5.0, 4.0, 4.5, 4.0]


def test_max_mode_and_best_weights_are_the_best_epochs(tmp_path):
    state, model = _loop(tmp_path, [0.1, 0.7, 0.3], patience=5, mode="max")
    assert (state["best_epoch"], state["stopped_early"]) == (1, False)
    assert not torch.equal(state["best_model"]["weight"], model.state_dict()["weight"])  # trained on after it


@pytest.mark.parametrize("checkpoint_every, written", [(0, 3), (1e9, 1)])  # every epoch; the first only
def test_a_killed_run_resumes_to_the_uninterrupted_result(tmp_path, checkpoint_every, written):
    scores = [5.0, 4.0, 3.5, 3.0, 2.0]
    whole, whole_model = _loop(tmp_path / "whole", scores)
    with pytest.raises(KeyboardInterrupt):
        _loop(tmp_path / "killed", scores, fail_at=3, checkpoint_every=checkpoint_every)
    assert load_checkpoint(tmp_path / "killed" / LAST)["state"]["epoch"] == written
    resumed, resumed_model = _loop(tmp_path / "killed", scores[written:], epochs=5)  # evaluate() restarts there
    assert resumed["epoch"] == whole["epoch"] == 5
    assert [r["train_loss"] for r in resumed["curves"]] == [r["train_loss"] for r in whole["curves"]]
    for key, value in whole_model.state_dict().items():  # the same arithmetic on the same machine
        assert torch.equal(value, resumed_model.state_dict()[key]), key
    finish(tmp_path / "killed")
    assert not (tmp_path / "killed" / LAST).exists()


@pytest.mark.parametrize("mode", ["min", "max"])
def test_nan_epochs_are_never_best_and_all_nan_is_an_error(tmp_path, mode, capsys):
    nan = float("nan")
    state, _ = _loop(tmp_path / "some", [nan, 3.0, nan, 2.0], patience=9, mode=mode)
    assert state["best_epoch"] == (3 if mode == "min" else 1)
    said = [line for line in capsys.readouterr().out.splitlines() if "non-finite" in line]
    assert said == [f"the run, epoch {e}: non-finite evaluation, recorded as NaN (val_mae); model selection never "
                    "takes a NaN val_mae" for e in (0, 2)]
    with pytest.raises(TrainingDiverged, match="the run: none of its 3 epochs gave a finite val_mae"):
        _loop(tmp_path / "all", [nan, nan, nan], patience=9, mode=mode)


def test_a_log_gets_one_line_an_epoch_instead_of_a_bar(tmp_path, capsys):
    """Standard error captured (not a terminal, as a background job's log): no bar redraws, one
    line per epoch, numbered on from a resumed run's epoch."""
    with pytest.raises(KeyboardInterrupt):
        _loop(tmp_path, [5.0, 4.0, 3.5], fail_at=2, progress=True)
    _loop(tmp_path, [3.5], epochs=3, progress=True)
    err = capsys.readouterr().err
    lines = [re.sub(r"train_loss [^,]+, (.*) \(\d+ s of training[^)]*\)", r"train_loss L, \1 (T s of training)", line)
             for line in err.splitlines()]
    assert "\r" not in err
    assert lines == [f"the run, epoch {k} ({k + 1}/3): train_loss L, val_mae {mae} (T s of training)"
                     for k, mae in ((0, 5), (1, 4), (2, 3.5))]



def test_cpu_time_is_kept_beside_the_wall_clock(tmp_path, monkeypatch):
    wall, cpu = [0.0], [0.0]
    monkeypatch.setattr(epoch_loop.time, "perf_counter", lambda: wall[0])
    monkeypatch.setattr(epoch_loop.time, "process_time", lambda: cpu[0])

    def tick():  # 10 s of wall clock, 4 s of it on a CPU (a shared or paused machine)
        wall[0] += 10.0
        cpu[0] += 4.0
    state, _ = _loop(tmp_path, [3.0, 2.0, 1.0], patience=5, tick=tick)
    assert (state["train_seconds"], state["train_cpu_seconds"]) == (30.0, 12.0)


def test_a_run_resumed_from_before_cpu_time_was_recorded_has_none(tmp_path):
    with pytest.raises(KeyboardInterrupt):
        _loop(tmp_path, [5.0, 4.0, 3.5], fail_at=2)
    saved = load_checkpoint(tmp_path / LAST)
    del saved["state"]["train_cpu_seconds"]  # as a last.pt written by the code before it
    save_checkpoint(saved, tmp_path / LAST)
    state, _ = _loop(tmp_path, [3.5], epochs=3)
    assert state["epoch"] == 3 and state["train_seconds"] > 0 and state["train_cpu_seconds"] is None


def test_bad_mode_is_named(tmp_path):
    with pytest.raises(ValueError, match="mode must be 'min' or 'max', got 'up'"):
        _loop(tmp_path, [1.0], mode="up")


def test_only_the_first_checkpoint_of_a_run_is_read_back(tmp_path, monkeypatch):
    calls = []
    real = epoch_loop.save_checkpoint
    monkeypatch.setattr(epoch_loop, "save_checkpoint",
                        lambda state, path, *, verify: calls.append(verify) or real(state, path, verify=verify))
    _loop(tmp_path, [3.0, 2.0, 1.0], patience=5)
    assert calls == [True, False, False]


def test_checkpoints_follow_the_clock_and_the_last_epoch_is_always_written(tmp_path, monkeypatch):
    now = [0.0]  # each epoch takes 10 s of a fake clock; checkpoints at least 25 s apart
    monkeypatch.setattr(epoch_loop.time, "perf_counter", lambda: now[0])
    written = []
    real = epoch_loop.save_checkpoint
    monkeypatch.setattr(epoch_loop, "save_checkpoint", lambda state, path, *, verify:
                        written.append(state["state"]["epoch"]) or real(state, path, verify=verify))
    state, _ = _loop(tmp_path, [8.0 - e for e in range(8)], patience=9, checkpoint_every=25,
                     tick=lambda: now.__setitem__(0, now[0] + 10))
    # ends at 10 (first), 40, 70 s, and the last epoch (80 s), which is written whatever the clock
    assert written == [1, 4, 7, 8] and state["epoch"] == 8 and state["train_seconds"] == 80


def test_an_early_stop_writes_its_last_epoch(tmp_path, monkeypatch):
    written = []
    real = epoch_loop.save_checkpoint
    monkeypatch.setattr(epoch_loop, "save_checkpoint", lambda state, path, *, verify:
                        written.append(state["state"]["epoch"]) or real(state, path, verify=verify))
    state, _ = _loop(tmp_path, [5.0, 4.0, 4.5, 4.0, 3.0, 1.0], patience=2, checkpoint_every=1e9)
    assert state["stopped_early"] and written == [1, 4]


def _batch_loop(tmp_path, epochs, *, batches=5, kill_at=None, checkpoint_every=25, now=None, trained=None,
                release_every=epoch_loop.RELEASE_EVERY):
    """A linear model, one SGD step a batch; each batch takes 10 s of the fake clock ``now``."""
    torch.manual_seed(0)
    model = torch.nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    x, y = torch.randn(batches, 4, 3), torch.randn(batches, 4, 1)

    def train_epoch(epoch, checkpoints: BatchCheckpoints):
        total = checkpoints.carry.get("total", 0.0)
        for step in range(checkpoints.start, batches):
            if (epoch, step) == kill_at:
                raise KeyboardInterrupt
            optimizer.zero_grad()
            noise = torch.randn(4, 1) * 0.01  # uses the RNG, so a resume must restore it
            loss = torch.nn.functional.mse_loss(model(x[step]) + noise, y[step])
            loss.backward()
            optimizer.step()
            total += float(loss)
            trained.append((epoch, step))
            now[0] += 10
            checkpoints.done(step + 1, {"total": total})
        return {"train_loss": total / batches}

    state = run_epochs(model=model, optimizers=[optimizer], run_dir=tmp_path, epochs=epochs, patience=9,
                       train_epoch=train_epoch, evaluate=lambda: {"val_mae": 1.0}, monitor="val_mae", mode="min",
                       progress=False, checkpoint_every=checkpoint_every, batch_checkpoints=True,
                       release_every=release_every)
    return state, model


def test_batch_checkpoints_follow_the_clock_inside_epochs_and_resume_at_the_batch(tmp_path, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(epoch_loop.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(epoch_loop.time, "process_time", lambda: 0.25 * now[0])  # a quarter of a core
    written = []
    real = epoch_loop.save_checkpoint
    monkeypatch.setattr(epoch_loop, "save_checkpoint", lambda state, path, *, verify: written.append(
        (state["state"]["epoch"], state.get("partial", {}).get("trained"))) or real(state, path, verify=verify))
    whole, whole_model = _batch_loop(tmp_path / "whole", 3, now=now, trained=[])
    # 5 batches of 10 s an epoch, at least 25 s apart and 25 s into the epoch: batch 3 of epoch 0
    # (30 s), the end of epoch 0 is 20 s later (not written), batch 3 of epoch 1 (80 s), ...
    assert written == [(0, 3), (1, 3), (2, 3), (3, None)]
    assert (whole["train_seconds"], whole["train_cpu_seconds"]) == (150, 37.5)

    now[0], trained = 0.0, []
    with pytest.raises(KeyboardInterrupt):
        _batch_loop(tmp_path / "killed", 3, now=now, trained=trained, kill_at=(1, 4))
    assert load_checkpoint(tmp_path / "killed" / LAST)["partial"]["trained"] == 3
    trained.clear()
    resumed, resumed_model = _batch_loop(tmp_path / "killed", 3, now=now, trained=trained)
    assert trained[0] == (1, 3) and len(trained) == 2 + 5  # only the batch trained after the last write reruns
    assert [r["train_loss"] for r in resumed["curves"]] == [r["train_loss"] for r in whole["curves"]]
    for key, value in whole_model.state_dict().items():  # the same arithmetic on the same machine
        assert torch.equal(value, resumed_model.state_dict()[key]), key
    assert (resumed["train_seconds"], resumed["train_cpu_seconds"]) == (150, 37.5)  # the rerun batch counts once


def test_kept_memory_is_released_as_a_run_starts_and_on_a_clock(tmp_path, monkeypatch):
    """zoo.engine.allocator.release_freed_memory before the peak is reset (a sweep's earlier run's
    kept memory is not this run's), then at least ``release_every`` seconds apart: between batches
    (5 batches of 10 s an epoch) and, for a trainer without batch hooks, at epoch ends."""
    now, released = [0.0], []
    monkeypatch.setattr(epoch_loop.time, "perf_counter", lambda: now[0])
    monkeypatch.setattr(epoch_loop, "release_freed_memory", lambda: released.append(now[0]))
    monkeypatch.setattr(epoch_loop, "reset_peak", lambda: released.append("reset"))
    _batch_loop(tmp_path / "batches", 3, now=now, trained=[], release_every=25)
    assert released == [0, "reset", 30, 60, 90, 120, 150]
    now[0], released[:] = 0.0, []
    _loop(tmp_path / "epochs", [8.0 - e for e in range(8)], patience=9, release_every=25,
          tick=lambda: now.__setitem__(0, now[0] + 10))
    assert released == [0, "reset", 30, 60]


def test_a_batch_checkpoint_from_before_cpu_time_leaves_it_unknown(tmp_path, monkeypatch):
    now = [0.0]
    monkeypatch.setattr(epoch_loop.time, "perf_counter", lambda: now[0])
    with pytest.raises(KeyboardInterrupt):
        _batch_loop(tmp_path, 3, now=now, trained=[], kill_at=(1, 4))
    saved = load_checkpoint(tmp_path / LAST)
    del saved["partial"]["cpu_seconds"]  # written inside epoch 1 by the code before it
    save_checkpoint(saved, tmp_path / LAST)
    resumed, _ = _batch_loop(tmp_path, 3, now=now, trained=[])
    assert resumed["train_seconds"] == 150 and resumed["train_cpu_seconds"] is None


def test_the_peak_resident_set_is_the_largest_seen_and_kept_across_a_resume(tmp_path, monkeypatch, capsys):
    def reads(*values):  # what /proc says at each read; the last value repeats
        values = list(values)
        return lambda: values.pop(0) if len(values) > 1 else values[0]
    monkeypatch.setattr(epoch_loop, "reset_peak", lambda: True)
    # the fresh state, epoch 0's evaluation and its checkpoint read 1.5 GB; epoch 1's 3.3 GB
    monkeypatch.setattr(epoch_loop, "peak_resident_bytes", reads(1.5e9, 1.5e9, 1.5e9, 3.3e9))
    with pytest.raises(KeyboardInterrupt):
        _loop(tmp_path, [5.0, 4.0, 3.5], fail_at=2, progress=True)
    assert load_checkpoint(tmp_path / LAST)["state"]["peak_rss_bytes"] == 3.3e9
    monkeypatch.setattr(epoch_loop, "peak_resident_bytes", reads(2.0e9))  # the resumed process peaks lower
    state, _ = _loop(tmp_path, [3.5], epochs=3, progress=True)
    assert state["peak_rss_bytes"] == 3.3e9
    said = [line.rsplit("(", 1)[1] for line in capsys.readouterr().err.splitlines() if "s of training" in line]
    assert [re.sub(r"^\d+", "T", text) for text in said] == [
        "T s of training, peak 1.5 GB resident)", "T s of training, peak 3.3 GB resident)",
        "T s of training, peak 3.3 GB resident)"]


def test_the_peak_is_unknown_without_proc_or_after_a_resume_from_before_it_was_recorded(tmp_path, monkeypatch):
    monkeypatch.setattr(epoch_loop, "peak_resident_bytes", lambda: None)
    assert _loop(tmp_path / "no_proc", [3.0, 2.0])[0]["peak_rss_bytes"] is None
    monkeypatch.setattr(epoch_loop, "peak_resident_bytes", lambda: 2e9)
    with pytest.raises(KeyboardInterrupt):
        _loop(tmp_path / "old", [5.0, 4.0, 3.5], fail_at=2)
    saved = load_checkpoint(tmp_path / "old" / LAST)
    del saved["state"]["peak_rss_bytes"]  # as a last.pt written by the code before it
    save_checkpoint(saved, tmp_path / "old" / LAST)
    assert _loop(tmp_path / "old", [3.5], epochs=3)[0]["peak_rss_bytes"] is None
