"""run_recipe: where runs go, what a failed start leaves behind, and per-seed random splits."""
import pytest

from zoo.engine import experiment
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


def test_random_split_cards_load_once_per_seed(tmp_path, monkeypatch):
    loaded = []

    def load(name, seed, progress, featurizer):
        loaded.append((name, seed, featurizer))
        return f"data{seed}"

    def train(recipe, data, seed, seed_dir, **kwargs):
        assert data == f"data{seed}"
        final = {"val": {"rmse": 1.0}, "test": {"rmse": 2.0}}
        return {"seed": seed, "split": seed, "main_metric": "rmse", "num_parameters": 1, "best_epoch": 1, "final": final}

    monkeypatch.setattr(experiment, "load_graph_dataset", load)
    monkeypatch.setattr(experiment, "train_graph_model", train)
    recipe = build_recipe({"dataset": "esol", "task": "graph_regression", "model": {"name": "siggate_gt"},
                           "seeds": [3, 4]})
    experiment.run_recipe(recipe, tmp_path / "runs")
    assert loaded == [("esol", 3, None), ("esol", 4, None)]  # the card's featurizer: the recipe names none
