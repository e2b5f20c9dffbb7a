"""Strict recipe schema: errors name the bad key and the nearest valid one."""
from pathlib import Path

import pytest

from zoo.engine.recipe import RecipeError, build_recipe, load_recipe, parse_seeds

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
BASE = {"dataset": "cora", "model": {"name": "gat", "heads": 8}}


def test_every_shipped_recipe_is_valid():
    paths = sorted(RECIPES.glob("*.yaml"))
    assert len(paths) >= 33
    for path in paths:
        recipe = load_recipe(path)
        assert recipe.name == path.stem


def test_overrides_and_epoch_cap_change_the_hash():
    plain = load_recipe(RECIPES / "cora_gat.yaml")
    changed = load_recipe(RECIPES / "cora_gat.yaml", ["model.heads=4", "optim.lr=5e-3"], epochs=7)
    assert (changed.model["heads"], changed.optim.lr, changed.optim.epochs) == (4, 5e-3, 7)
    assert plain.config_hash() != changed.config_hash()
    reseeded = load_recipe(RECIPES / "cora_gat.yaml", ["seeds=[3]"])
    assert reseeded.config_hash() == plain.config_hash()


@pytest.mark.parametrize("raw, message", [
    ({**BASE, "optimm": {}}, "unknown key 'optimm' in recipe; did you mean 'optim'"),
    ({**BASE, "optim": {"learning_rate": 0.1}}, "unknown key 'learning_rate' in optim"),
    ({**BASE, "optim": {"pateince": 3}}, "did you mean 'patience'"),
    ({**BASE, "model": {"name": "gat", "head": 4}}, "did you mean 'heads'"),
    ({**BASE, "model": {"name": "gta"}}, "unknown model 'gta'; did you mean 'gat'"),
    ({**BASE, "model": {"name": "gat", "heads": "many"}}, "model.heads must be int, got 'many'"),
    ({**BASE, "optim": {"epochs": 0}}, "must be >= 1"),
    ({"model": {"name": "gat"}}, "needs a 'dataset'"),
    ({**BASE, "seeds": "a-b"}, "seeds 'a-b'"),
])
def test_schema_errors(raw, message):
    with pytest.raises(RecipeError, match=message.replace("(", r"\(").replace("[", r"\[")):
        build_recipe(raw)


def test_file_errors(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("dataset: cora\nmodel: [unclosed\n")
    with pytest.raises(RecipeError, match="not valid YAML"):
        load_recipe(broken)
    listing = tmp_path / "list.yaml"
    listing.write_text("- a\n- b\n")
    with pytest.raises(RecipeError, match="must hold a YAML mapping"):
        load_recipe(listing)
    with pytest.raises(RecipeError, match="not found"):
        load_recipe(tmp_path / "missing.yaml")
    with pytest.raises(RecipeError, match="section.key=value"):
        load_recipe(RECIPES / "cora_gat.yaml", ["heads"])


def test_parse_seeds():
    assert parse_seeds("0-3") == [0, 1, 2, 3]
    assert parse_seeds("1,4-5") == [1, 4, 5]
    assert parse_seeds(7) == [7]
    assert parse_seeds([2, 1]) == [2, 1]


def test_epoch_cap_compresses_the_warm_up():
    full = load_recipe(RECIPES / "zinc_siggate.yaml")
    short = load_recipe(RECIPES / "zinc_siggate.yaml", epochs=200)
    assert (full.optim.epochs, full.optim.warmup_epochs) == (2000, 50)
    assert (short.optim.epochs, short.optim.warmup_epochs) == (200, 5)  # 50 * 200 / 2000
    assert load_recipe(RECIPES / "zinc_siggate.yaml", epochs=10).optim.warmup_epochs == 0
