"""run_recipe: where runs go, what a failed start leaves behind, and per-seed random splits."""
import json
import shutil

import pytest
import yaml

from zoo.analysis.runs import collect_runs
from zoo.engine import experiment
from zoo.engine.divergence import TrainingDiverged
from zoo.engine.recipe import RecipeError, build_recipe

GCN = {"dataset": "cora", "model": {"name": "gcn", "hidden": 8}, "optim": {"epochs": 1}}


def test_unknown_dataset_is_a_recipe_error_and_makes_no_folder(tmp_path):
    with pytest.raises(RecipeError, match="dataset 'coraa'.*'cora'"):
        experiment.run_recipe(build_recipe({**GCN, "dataset": "coraa"}), tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_task_must_match_the_card(tmp_path):
    recipe = build_recipe({**GCN, "task": "graph_regression"})
    with pytest.raises(RecipeError, match="cora' is a node_classification card.*set task: node_classification"):
        experiment.run_recipe(recipe, tmp_path / "runs")
    assert not (tmp_path / "runs").exists()


def test_a_seed_that_fails_before_its_first_checkpoint_leaves_nothing(tmp_path, monkeypatch):
    def fail(*args, **kwargs):
        raise ValueError("dim 10 is not divisible by heads 3")

    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", fail)
    recipe = build_recipe(GCN)
    neighbour = tmp_path / "runs" / "other_recipe"
    neighbour.mkdir(parents=True)
    with pytest.raises(ValueError, match="divisible"):
        experiment.run_recipe(recipe, tmp_path / "runs")
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == [neighbour.parent.relative_to(tmp_path),
                                                                            neighbour.relative_to(tmp_path)]


def test_a_seed_that_fails_after_a_checkpoint_is_kept_for_resume(tmp_path, monkeypatch):
    def fail_after_checkpoint(recipe, data, seed, seed_dir, **kwargs):
        (seed_dir / "last.pt").write_bytes(b"state")
        raise KeyboardInterrupt

    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", fail_after_checkpoint)
    recipe = build_recipe(GCN)
    with pytest.raises(KeyboardInterrupt):
        experiment.run_recipe(recipe, tmp_path / "runs")
    seed_dir = experiment.run_folder(recipe, tmp_path / "runs") / "seed0"
    assert {p.name for p in seed_dir.iterdir()} == {"config.yaml", "environment.json", "last.pt"}
    # the resume runs elsewhere: the first segment's environment is kept under "earlier"
    first = json.loads((seed_dir / "environment.json").read_text()) | {"git_commit": "an earlier commit"}
    (seed_dir / "environment.json").write_text(json.dumps(first))
    with pytest.raises(KeyboardInterrupt):
        experiment.run_recipe(recipe, tmp_path / "runs")
    record = json.loads((seed_dir / "environment.json").read_text())
    assert record["earlier"] == [first] and record["git_commit"] != "an earlier commit"


def test_random_split_cards_load_once_per_seed(tmp_path, monkeypatch):
    loaded = []

    def load(name, seed, progress, featurizer):
        loaded.append((name, seed, featurizer))
        return f"data{seed}"

    def train(recipe, data, seed, seed_dir, **kwargs):
        assert data == f"data{seed}"
        final = {"val": {"rmse": 1.0}, "test": {"rmse": 2.0}}
        metrics = {"seed": seed, "split": seed, "main_metric": "rmse", "num_parameters": 1, "best_epoch": 1, "final": final}
        (seed_dir / "metrics.json").write_text(json.dumps(metrics))  # as the trainers do
        return metrics

    monkeypatch.setattr(experiment, "load_graph_dataset", load)
    monkeypatch.setattr(experiment, "train_graph_model", train)
    recipe = build_recipe({"dataset": "esol", "task": "graph_regression", "model": {"name": "siggate_gt"},
                           "seeds": [3, 4]})
    experiment.run_recipe(recipe, tmp_path / "runs")
    assert loaded == [("esol", 3, None), ("esol", 4, None)]  # the card's featurizer: the recipe names none


def _recording_run_recipe(calls):
    def run(recipe, out, *, seeds, force=False, progress=True, device="cpu", share=False):
        calls.append((recipe.name, list(seeds), force))
        return {"recipe": recipe.name, "seeds": list(seeds)}
    return run


def test_sweep_in_seed_order_trains_seed_k_of_every_recipe_before_seed_k_plus_1(monkeypatch):
    calls = []
    monkeypatch.setattr(experiment, "run_recipe", _recording_run_recipe(calls))
    a = build_recipe({**GCN, "name": "a", "seeds": [0, 1, 2]})
    b = build_recipe({**GCN, "name": "b", "seeds": [5, 6]})
    results = experiment.run_sweep([a, b], order="seed")
    # each call asks for the seeds so far: finished ones are read back, so the summary covers them
    assert calls == [("a", [0], False), ("b", [5], False), ("a", [0, 1], False), ("b", [5, 6], False),
                     ("a", [0, 1, 2], False)]
    assert results == {"a": {"recipe": "a", "seeds": [0, 1, 2]}, "b": {"recipe": "b", "seeds": [5, 6]}}


def test_sweep_in_seed_order_with_force_retrains_each_seed_once(monkeypatch):
    calls = []
    monkeypatch.setattr(experiment, "run_recipe", _recording_run_recipe(calls))
    a = build_recipe({**GCN, "name": "a", "seeds": [0, 1]})
    experiment.run_sweep([a], order="seed", force=True)
    assert calls == [("a", [0], True), ("a", [0], False), ("a", [1], True), ("a", [0, 1], False)]


def test_a_shared_sweep_takes_over_at_the_end_the_seeds_whose_job_stopped(monkeypatch, capsys):
    """Seed 1 of a was left to another job, which died (say, killed when the machine ran out of
    memory) after this job had passed it: at the end this job tries it again and, finding it free,
    trains it, so the seed is not left undone."""
    calls, held = [], {("a", 1)}  # the other job holds a's seed 1 until this job's rounds are over

    def run(recipe, out, *, seeds, force=False, progress=True, device="cpu", share=False):
        calls.append((recipe.name, list(seeds), share))
        busy = [seed for seed in seeds if (recipe.name, seed) in held]
        return {"recipe": recipe.name, "seeds": [seed for seed in seeds if seed not in busy], "busy": busy}

    monkeypatch.setattr(experiment, "run_recipe", run)
    a = build_recipe({**GCN, "name": "a", "seeds": [0, 1, 2]})
    b = build_recipe({**GCN, "name": "b", "seeds": [0, 1, 2]})
    original_say = experiment.say

    def say(message):  # the rounds are over once the sweep says it takes over: the other job is gone
        if "taking over" in message:
            held.clear()
        original_say(message)

    monkeypatch.setattr(experiment, "say", say)
    results = experiment.run_sweep([a, b], order="seed", share=True)
    assert calls[-1] == ("a", [0, 1, 2], True) and len(calls) == 7  # 6 rounds, then a's retry; b had none busy
    assert results["a"] == {"recipe": "a", "seeds": [0, 1, 2], "busy": []}
    out = capsys.readouterr().out
    assert "a: seed 1 was left to other jobs; taking over any whose job has stopped" in out
    assert "left to the jobs training them" not in out


def test_sweep_in_recipe_order_and_a_bad_order(monkeypatch):
    calls = []
    monkeypatch.setattr(experiment, "run_recipe", _recording_run_recipe(calls))
    a, b = build_recipe({**GCN, "name": "a", "seeds": [0, 1]}), build_recipe({**GCN, "name": "b", "seeds": [0, 1]})
    experiment.run_sweep([a, b], seeds=[3])
    assert calls == [("a", [3], False), ("b", [3], False)]
    with pytest.raises(ValueError, match="order must be one of recipe, seed, got 'seeds'"):
        experiment.run_sweep([a], order="seeds")
    with pytest.raises(ValueError, match="--share with --force"):  # each job would retrain the other's seeds
        experiment.run_sweep([a], share=True, force=True)
    assert calls == [("a", [3], False), ("b", [3], False)]  # refused before any recipe ran


def _counting_trainer(trained):
    def train(recipe, data, seed, seed_dir, **kwargs):
        trained.append((recipe.name, seed))
        (seed_dir / "best.pt").write_bytes(b"weights")
        final = {"val": {"accuracy": 0.5}, "test": {"accuracy": 0.25 + seed}}
        metrics = {"seed": seed, "split": seed, "main_metric": "accuracy", "num_parameters": 1, "best_epoch": 0,
                   "final": final}
        (seed_dir / "metrics.json").write_text(json.dumps(metrics))  # as the trainers do, last
        return metrics
    return train


def test_a_seed_finished_by_a_recipe_with_the_same_config_is_copied_not_retrained(tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", _counting_trainer(trained))
    out = tmp_path / "runs"
    main = build_recipe({**GCN, "name": "cora_gcn", "seeds": [0, 1]})
    twin = build_recipe({**GCN, "name": "cora_depth2_gcn", "description": "same model, other name", "seeds": [0, 1, 2]})
    other = build_recipe({**GCN, "name": "cora_gcn_wide", "model": {"name": "gcn", "hidden": 16}, "seeds": [0]})
    assert twin.config_hash() == main.config_hash() != other.config_hash()
    experiment.run_recipe(main, out)
    summary = experiment.run_recipe(twin, out)
    experiment.run_recipe(other, out)
    assert trained == [("cora_gcn", 0), ("cora_gcn", 1), ("cora_depth2_gcn", 2), ("cora_gcn_wide", 0)]
    assert summary["seeds"] == [0, 1, 2]
    copied = experiment.run_folder(twin, out) / "seed1"
    assert (copied / "best.pt").read_bytes() == b"weights"
    assert yaml.safe_load((copied / "config.yaml").read_text())["name"] == "cora_depth2_gcn"
    assert not list(out.rglob(".seed*"))
    runs = collect_runs([out])
    assert sorted(runs.groupby("recipe").seed.apply(list).items()) == [
        ("cora_depth2_gcn", [0, 1, 2]), ("cora_gcn", [0, 1]), ("cora_gcn_wide", [0])]
    experiment.run_recipe(twin, out, seeds=[0], force=True)
    assert trained[-1] == ("cora_depth2_gcn", 0)



def test_a_twin_copied_by_another_job_first_is_kept(tmp_path, monkeypatch):
    """Two jobs sharing a sweep copy the same twin seed: the other job's copy lands while this one
    copies, so this one's rename fails; it drops its own copy and reads the seed back."""
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", _counting_trainer([]))
    out = tmp_path / "runs"
    main = build_recipe({**GCN, "name": "cora_gcn", "seeds": [0]})
    twin = build_recipe({**GCN, "name": "cora_depth2_gcn", "description": "same model, other name", "seeds": [0]})
    experiment.run_recipe(main, out)
    seed_dir = experiment.run_folder(twin, out) / "seed0"
    real_copytree = shutil.copytree

    def the_other_job_lands_first(source, target):
        real_copytree(source, seed_dir)
        (seed_dir / "best.pt").write_bytes(b"the other job's copy")
        return real_copytree(source, target)

    monkeypatch.setattr(experiment.shutil, "copytree", the_other_job_lands_first)
    assert experiment.run_recipe(twin, out)["seeds"] == [0]
    assert (seed_dir / "best.pt").read_bytes() == b"the other job's copy"
    assert not list(out.rglob(".seed*"))

def test_a_recipe_that_fails_does_not_stop_the_sweep(monkeypatch, capsys):
    def run(recipe, out, *, seeds, force=False, progress=True, device="cpu", share=False):
        if recipe.name == "a":
            raise FloatingPointError("NaN in the logits")
        return {"recipe": recipe.name, "seeds": list(seeds)}

    monkeypatch.setattr(experiment, "run_recipe", run)
    a, b = build_recipe({**GCN, "name": "a"}), build_recipe({**GCN, "name": "b"})
    results = experiment.run_sweep([a, b], seeds=[0, 1], order="seed")
    assert results == {"a": "FloatingPointError: NaN in the logits", "b": {"recipe": "b", "seeds": [0, 1]}}
    out = capsys.readouterr().out
    assert "failed a: FloatingPointError" in out and "Traceback" in out
    monkeypatch.setattr(experiment, "run_recipe", lambda recipe, out, **kwargs: (_ for _ in ()).throw(
        TrainingDiverged("training diverged: the training loss is nan at epoch 1 of a seed 0")))
    assert experiment.run_sweep([a]) == {"a": "TrainingDiverged: training diverged: the training loss is nan at "
                                               "epoch 1 of a seed 0"}
    out = capsys.readouterr().out  # the message names the place and the fix: no traceback
    assert "failed a: TrainingDiverged: training diverged" in out and "Traceback" not in out
    with pytest.raises(KeyboardInterrupt):
        monkeypatch.setattr(experiment, "run_recipe", lambda *args, **kwargs: (_ for _ in ()).throw(KeyboardInterrupt))
        experiment.run_sweep([b])


def test_summary_json_covers_every_finished_seed_while_the_return_covers_those_asked_for(tmp_path, monkeypatch):
    """Two invocations over different seeds of one recipe (a sweep over seeds 0-1 beside one over
    seed 2): the folder's summary.json has all three, hand-computed; each return has its own."""
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", _counting_trainer([]))
    recipe = build_recipe({**GCN, "seeds": [0, 1, 2]})
    out = tmp_path / "runs"
    assert experiment.run_recipe(recipe, out, seeds=[2])["seeds"] == [2]
    first = experiment.run_recipe(recipe, out, seeds=[0, 1])
    assert first["seeds"] == [0, 1] and first["metrics"]["test"]["accuracy"]["mean"] == 0.75
    written = json.loads((experiment.run_folder(recipe, out) / "summary.json").read_text())
    assert written["seeds"] == [0, 1, 2] and written["metrics"]["test"]["accuracy"]["values"] == [0.25, 1.25, 2.25]
    assert written["metrics"]["test"]["accuracy"]["mean"] == 1.25 and written["metrics"]["test"]["accuracy"]["n"] == 3


def _diverging_at(seeds_that_diverge, trained):
    """The counting trainer, except that the seeds given diverge after a first checkpoint."""
    finish = _counting_trainer(trained)

    def train(recipe, data, seed, seed_dir, **kwargs):
        if seed in seeds_that_diverge:
            trained.append((recipe.name, seed))
            (seed_dir / "last.pt").write_bytes(b"state")
            raise TrainingDiverged(f"training diverged: the training loss is nan at epoch 1 of {recipe.name} seed {seed}")
        return finish(recipe, data, seed, seed_dir, **kwargs)
    return train


def test_a_diverged_seed_is_recorded_the_others_train_and_a_rerun_does_not_retrain_it(tmp_path, monkeypatch, capsys):
    trained = []
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", _diverging_at({1}, trained))
    recipe = build_recipe({**GCN, "name": "cora_gcn", "seeds": [0, 1, 2]})
    out = tmp_path / "runs"
    summary = experiment.run_recipe(recipe, out)
    assert trained == [("cora_gcn", 0), ("cora_gcn", 1), ("cora_gcn", 2)]
    assert summary["seeds"] == [0, 2] and summary["diverged"] == [1]
    assert summary["metrics"]["test"]["accuracy"]["values"] == [0.25, 2.25]
    base = experiment.run_folder(recipe, out)
    assert json.loads((base / "seed1" / "diverged.json").read_text()) == {
        "recipe": "cora_gcn", "seed": 1, "message": "training diverged: the training loss is nan at epoch 1 of cora_gcn seed 1"}
    assert (base / "seed1" / "last.pt").exists()  # kept: deleting diverged.json resumes there
    written = json.loads((base / "summary.json").read_text())
    assert (written["seeds"], written["diverged"]) == ([0, 2], [1])
    assert "cora_gcn (cora, gcn) over 2 seed(s)" in capsys.readouterr().out

    again = experiment.run_recipe(recipe, out)
    assert len(trained) == 3 and again["diverged"] == [1]
    assert "seed 1: diverged in an earlier run" in capsys.readouterr().out
    (base / "seed1" / "stale.txt").write_text("")
    with pytest.raises(TrainingDiverged, match="epoch 1 of cora_gcn seed 1"):  # the only seed asked for diverged
        experiment.run_recipe(recipe, out, seeds=[1], force=True)  # --force retrains it, from scratch
    assert trained[-1] == ("cora_gcn", 1) and len(trained) == 4
    assert sorted(p.name for p in (base / "seed1").iterdir()) == ["config.yaml", "diverged.json", "environment.json",
                                                                  "last.pt"]


def test_a_recipe_whose_every_seed_diverged_raises_naming_the_record(tmp_path, monkeypatch):
    trained = []
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", _diverging_at({0, 1}, trained))
    recipe = build_recipe({**GCN, "name": "cora_gcn", "seeds": [0, 1]})
    for _ in range(2):  # trained once, then reported from the record
        with pytest.raises(TrainingDiverged, match=r"^training diverged: the training loss is nan at epoch 1 of "
                                                   r"cora_gcn seed 0 \(seed 0, 1 of cora_gcn: recorded in .*seed0"):
            experiment.run_recipe(recipe, tmp_path / "runs")
    assert trained == [("cora_gcn", 0), ("cora_gcn", 1)]
    assert not list((tmp_path / "runs").rglob("summary.json"))


def test_a_sweep_in_seed_order_goes_on_past_a_diverged_seed(tmp_path, monkeypatch, capsys):
    trained = []
    monkeypatch.setattr(experiment, "load_node_dataset", lambda name, split: object())
    monkeypatch.setattr(experiment, "train_node_classifier", _diverging_at({1}, trained))
    a = build_recipe({**GCN, "name": "a", "seeds": [0, 1, 2]})
    results = experiment.run_sweep([a], tmp_path / "runs", order="seed")
    assert trained == [("a", 0), ("a", 1), ("a", 2)]
    assert (results["a"]["seeds"], results["a"]["diverged"]) == ([0, 2], [1])
    assert "sweep done: 1 recipe(s) ran; diverged (diverged.json, not in the summaries): a seed 1" in capsys.readouterr().out
