"""A checkpoint card's command must rebuild the run: zoo.engine.card_command against hand-built recipes."""
import pytest

from zoo.engine.card_command import CommandError, check_command
from zoo.engine.recipe import build_recipe

TOY = """\
description: a toy graph regression recipe
dataset: zinc_smiles
task: graph_regression
model:
  name: siggate_gt
  dim: 64
  heads: 2
  layers: 1
optim:
  epochs: 10
  warmup_epochs: 2
  batch_size: 8
seeds: [0, 1]
"""


def run_recipe(name="toy", epochs=10, warmup=2, **model):
    """The recipe a run folder stores, written out by hand (not read from the YAML)."""
    return build_recipe({"name": name, "description": "a toy graph regression recipe", "dataset": "zinc_smiles",
                         "task": "graph_regression", "seeds": [0, 1],
                         "model": {"name": "siggate_gt", "dim": 64, "heads": 2, "layers": 1, **model},
                         "optim": {"epochs": epochs, "warmup_epochs": warmup, "batch_size": 8}})


@pytest.fixture
def root(tmp_path):
    (tmp_path / "recipes").mkdir()
    (tmp_path / "recipes" / "toy.yaml").write_text(TOY)
    (tmp_path / "recipes" / "other.yaml").write_text(TOY.replace("dim: 64", "dim: 96"))
    return tmp_path


@pytest.mark.parametrize("command", [
    "python tools/train.py recipes/toy.yaml",
    "python tools/train.py recipes/toy.yaml --seeds 1 --out runs --device cpu",
    "nice torchrun --nproc_per_node 2 tools/train.py recipes/toy.yaml --quiet",
    "python tools/sweep.py recipes/other.yaml recipes/toy.yaml --order seed --out runs/study",
    "python tools/train.py recipes/other.yaml --set model.dim=64",
    "python tools/train.py recipes/other.yaml --set=model.dim=64",
])
def test_a_command_that_rebuilds_the_run_passes(root, command):
    check_command(command, run_recipe(), seed=1, root=root)


def test_a_renamed_copy_of_the_recipe_rebuilds_the_run(root):
    (root / "recipes" / "copy.yaml").write_text(TOY)
    check_command("python tools/train.py recipes/copy.yaml --seeds 0", run_recipe(), seed=0, root=root)


def test_an_override_the_run_did_not_have_is_named_with_both_values(root):
    with pytest.raises(CommandError, match=r"model\.heads: 4 by the command, 2 in the run"):
        check_command("python tools/train.py recipes/toy.yaml --set model.heads=4", run_recipe(), seed=0, root=root)
    # the other way round: the run was trained with a key the recipe file no longer has
    with pytest.raises(CommandError, match=r"model\.gate_weight_init: None by the command, 'zeros' in the run"):
        check_command("python tools/train.py recipes/toy.yaml", run_recipe(gate_weight_init="zeros"), seed=0,
                      root=root)
    check_command("python tools/train.py recipes/toy.yaml --set model.gate_weight_init=zeros",
                  run_recipe(gate_weight_init="zeros"), seed=0, root=root)


def test_an_epoch_cap_must_match_and_scales_the_warm_up_as_training_did(root):
    # --epochs 5 of 10 halves the 2-epoch warm-up (load_recipe), as the run recorded it
    check_command("python tools/train.py recipes/toy.yaml --epochs 5", run_recipe(epochs=5, warmup=1), seed=0,
                  root=root)
    with pytest.raises(CommandError, match=r"optim\.epochs: 10 by the command, 5 in the run"):
        check_command("python tools/train.py recipes/toy.yaml", run_recipe(epochs=5, warmup=1), seed=0, root=root)


def test_a_command_for_other_recipes_or_seeds_is_refused(root):
    with pytest.raises(CommandError, match=r"model\.dim: 96 by the command, 64 in the run"):
        check_command("python tools/sweep.py recipes/other.yaml", run_recipe(), seed=0, root=root)
    (root / "recipes" / "third.yaml").write_text(TOY.replace("dim: 64", "dim: 128"))
    with pytest.raises(CommandError, match="trains other, third, not the run's recipe 'toy'"):
        check_command("python tools/sweep.py recipes/other.yaml recipes/third.yaml", run_recipe(), seed=0, root=root)
    with pytest.raises(CommandError, match=r"trains seeds \[0, 1\], not the run's seed 3; add --seeds 3"):
        check_command("python tools/train.py recipes/toy.yaml", run_recipe(), seed=3, root=root)
    check_command("python tools/train.py recipes/toy.yaml --seeds 2-4", run_recipe(), seed=3, root=root)


@pytest.mark.parametrize("command, message", [
    ("make train", "runs neither tools/train.py nor tools/sweep.py"),
    ("python tools/train.py --seeds 0", r"names no recipe \(\.yaml\)"),
    ("python tools/train.py recipes/missing.yaml", "names recipe recipes/missing.yaml, which is neither under"),
    ("python tools/train.py recipes/toy.yaml --epochs ten", "--epochs 'ten', not a whole number"),
    ("python tools/train.py recipes/toy.yaml --set", "ends after --set, which needs a value"),
    ("python tools/train.py recipes/toy.yaml --seeds x", "--seeds 'x'"),
    ("python tools/train.py 'recipes/toy.yaml", "not a shell command line"),
    ("python tools/train.py recipes/toy.yaml --set model.nope=1", "does not build a recipe"),
])
def test_a_command_that_is_not_a_training_command_is_refused(root, command, message):
    with pytest.raises(CommandError, match=message):
        check_command(command, run_recipe(), seed=0, root=root)
