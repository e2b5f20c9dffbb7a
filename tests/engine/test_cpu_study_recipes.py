"""The CPU-budget study recipes (issue 15, 4b-4d) are the paper recipes with only the schedule
shortened, as ``tools/train.py --epochs N`` shortens it, and the capacity controls match the
gated model's parameter count (the paper's Section 7.5: "+42K on ZINC, +329K on molhiv").

The reference of each study recipe is its paper-exact recipe loaded through ``load_recipe`` with
the study's epoch count (zoo/engine/recipe.py scales the warm-up); every resolved value except the
name, description and seeds must agree, so a study recipe cannot drift from the paper's.
"""
from __future__ import annotations

from pathlib import Path

import pytest

from zoo.engine.recipe import load_recipe
from zoo.models import create_model

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
GATE_KEYS = {"gate", "gate_per_head", "gate_activation", "gate_bias_init", "gate_weight_init"}

# study recipe -> the paper-exact recipe it shortens
SHORTENED = {
    "zinc_cpu_g1": "zinc_siggate",
    "zinc_cpu_g2": "zinc_siggate_g2_value",
    "zinc_cpu_g3": "zinc_siggate_g3_logit",
    "zinc_cpu_shared": "zinc_siggate_shared",
    "zinc_cpu_tanh": "zinc_siggate_tanh",
    "zinc_cpu_relu": "zinc_siggate_relu",
    "zinc_cpu_sigmoid_squared": "zinc_siggate_sigmoid_squared",
    "zinc_cpu_ffn_matched": "zinc_gps_ffn_matched",
    "molhiv_cpu_siggate": "molhiv_siggate",
    "peptides_func_cpu_siggate": "peptides_func_siggate",
}
# ungated study recipe -> its gated twin: the same model without the gate keys, named gps
UNGATED = {"zinc_cpu_no_gate": "zinc_cpu_g1", "molhiv_cpu_gps": "molhiv_cpu_siggate",
           "peptides_func_cpu_gps": "peptides_func_cpu_siggate"}
# FFN-matched control -> (its gated twin, outputs of the dataset)
FFN_MATCHED = {"zinc_cpu_ffn_matched": ("zinc_cpu_g1", 1), "molhiv_cpu_ffn_matched": ("molhiv_cpu_siggate", 1),
               "peptides_func_cpu_ffn_matched": ("peptides_func_cpu_siggate", 10)}
DEPTHS = (4, 8, 12, 16)
STUDIES = {"zinc": "_base/zinc_cpu_study.yaml", "molhiv": "_base/molhiv_cpu_study.yaml",
           "peptides_func": "_base/peptides_func_cpu_study.yaml"}


def _load(name: str, **options):
    return load_recipe(RECIPES / f"{name}.yaml", **options)


def _identity(recipe) -> dict:
    return {k: v for k, v in recipe.to_dict().items() if k not in ("name", "description", "seeds")}


def _count(recipe, outputs: int) -> int:
    options = {k: v for k, v in recipe.model.items() if k != "name"}
    return sum(p.numel() for p in create_model(recipe.model["name"], num_outputs=outputs, **options).parameters())


def _study_recipes() -> list[str]:
    return sorted(p.stem for p in RECIPES.glob("*_cpu_*.yaml"))


def test_every_study_recipe_is_listed_here():
    depth = {f"zinc_cpu_depth{d}_{kind}" for d in DEPTHS for kind in ("siggate", "gps")}
    assert set(_study_recipes()) == set(SHORTENED) | set(UNGATED) | set(FFN_MATCHED) | depth


@pytest.mark.parametrize("name", sorted(SHORTENED))
def test_study_recipe_is_its_paper_recipe_with_the_epoch_cap(name):
    study = _load(name)
    paper = _load(SHORTENED[name], epochs=study.optim.epochs)
    assert study.optim.epochs < _load(SHORTENED[name]).optim.epochs
    base = next(path for prefix, path in STUDIES.items() if name.startswith(prefix))
    assert study.optim.warmup_epochs == paper.optim.warmup_epochs, (
        f"{name}: at {study.optim.epochs} epochs `--epochs` scales the paper's warm-up to "
        f"{paper.optim.warmup_epochs}; set optim.warmup_epochs: {paper.optim.warmup_epochs} in recipes/{base}")
    assert _identity(study) == _identity(paper)
    assert study.config_hash() == paper.config_hash()


@pytest.mark.parametrize("name", sorted(UNGATED))
def test_ungated_control_is_its_twin_without_the_gate(name):
    ungated, gated = _load(name), _load(UNGATED[name])
    assert ungated.model == {**{k: v for k, v in gated.model.items() if k not in GATE_KEYS}, "name": "gps"}
    assert _identity(ungated) | {"model": None} == _identity(gated) | {"model": None}


@pytest.mark.parametrize("name", sorted(FFN_MATCHED))
def test_ffn_matched_control_has_the_gated_parameter_count(name):
    twin, outputs = FFN_MATCHED[name]
    control, gated = _load(name), _load(twin)
    ungated = _load(next(u for u, g in UNGATED.items() if g == twin))
    assert control.model == {**ungated.model, "ffn_dim": control.model["ffn_dim"]}
    assert _identity(control) | {"model": None} == _identity(gated) | {"model": None}
    wide, target = _count(control, outputs), _count(gated, outputs)
    assert abs(wide - target) <= 0.005 * target, f"{name}: {wide} parameters against {twin}'s {target}"
    # and no other width comes closer: one FFN unit (in every layer) more or less moves the count by per_unit
    per_unit = (wide - _count(ungated, outputs)) / (control.model["ffn_dim"] - 2 * control.model["dim"])
    assert abs(wide - target) <= per_unit / 2


@pytest.mark.parametrize("depth", DEPTHS)
@pytest.mark.parametrize("kind,parent", [("siggate", "zinc_cpu_g1"), ("gps", "zinc_cpu_no_gate")])
def test_depth_recipe_changes_only_the_depth(depth, kind, parent):
    recipe, reference = _load(f"zinc_cpu_depth{depth}_{kind}"), _load(parent)
    assert reference.model["layers"] == 10 and recipe.model == {**reference.model, "layers": depth}
    assert _identity(recipe) | {"model": None} == _identity(reference) | {"model": None}


@pytest.mark.parametrize("prefix", sorted(STUDIES))
def test_one_schedule_and_five_seeds_per_study(prefix):
    recipes = [_load(name) for name in _study_recipes() if name.startswith(f"{prefix}_cpu_")]
    assert len({repr(r.optim) for r in recipes}) == 1, f"{prefix}: the study recipes run different schedules"
    for recipe in recipes:
        assert recipe.seeds == [0, 1, 2, 3, 4], recipe.name
        assert recipe.description.startswith("CPU-budget study"), recipe.name
