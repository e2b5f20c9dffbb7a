"""Issue 18's recipes pair with SigGate-GT's: each is its dataset's paper SigGate-GT recipe with only
the global attention's normaliser (and, for *_nogate, the gate) changed and the index optimiser's
settings added, so schedule, seeds, architecture and data are the same."""
from __future__ import annotations

from pathlib import Path

import pytest

from zoo.engine.recipe import load_recipe
from zoo.models import create_model

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
PAIRED = {"zinc_smiles": "zinc_siggate", "peptides_func": "peptides_func_siggate"}
NORMALISER = {"q": {"normaliser": "qsoftmax", "q_mode": "head", "delta": 1.0},
              "entmax": {"normaliser": "entmax", "alpha": 1.5, "alpha_mode": "head"}}
INDEX_OPTIM = {"q_lr", "q_warmup", "q_prior"}


@pytest.mark.parametrize("gate", ["", "_nogate"])
@pytest.mark.parametrize("kind", sorted(NORMALISER))
@pytest.mark.parametrize("prefix", sorted(PAIRED))
def test_sparsegate_recipe_is_the_siggate_recipe_with_another_normaliser(prefix, kind, gate):
    recipe = load_recipe(RECIPES / f"{prefix}_sparsegate_{kind}{gate}.yaml")
    siggate = load_recipe(RECIPES / f"{PAIRED[prefix]}.yaml")
    expected = {**siggate.model, "name": "sparsegate_gt", **NORMALISER[kind], **({"gate": "none"} if gate else {})}
    assert recipe.model == expected
    mine, theirs = recipe.to_dict(), siggate.to_dict()
    for key in ("name", "description", "model"):
        mine.pop(key), theirs.pop(key)
    assert {k: v for k, v in mine.pop("optim").items() if k not in INDEX_OPTIM} == \
        {k: v for k, v in theirs.pop("optim").items() if k not in INDEX_OPTIM}
    assert mine == theirs  # dataset, task, seeds, featurizer, train
    # q's warm-up is the learning rate's, and its lr the weights' (recipe comments say why)
    assert (recipe.optim.q_warmup, recipe.optim.q_lr) == (siggate.optim.warmup_epochs, siggate.optim.lr)
    model = create_model("sparsegate_gt", **{k: v for k, v in recipe.model.items() if k != "name"})
    assert len(model.index_parameters()) == recipe.model["layers"]  # one [heads] index per layer


@pytest.mark.parametrize("gate", ["", "_nogate"])
@pytest.mark.parametrize("kind", sorted(NORMALISER))
def test_zinc_sparsegate_at_the_cpu_study_schedule_pairs_with_4b(kind, gate):
    """`--epochs 30` (the issue's CPU study) gives 4b's zinc_cpu_g1 schedule, data and seeds, so
    `tools/sweep.py recipes/zinc_smiles_sparsegate_*.yaml --epochs 30` pairs with the 4b rows."""
    recipe = load_recipe(RECIPES / f"zinc_smiles_sparsegate_{kind}{gate}.yaml", epochs=30).to_dict()
    g1 = load_recipe(RECIPES / "zinc_cpu_g1.yaml").to_dict()
    assert recipe["model"] == {**g1["model"], "name": "sparsegate_gt", **NORMALISER[kind],
                               **({"gate": "none"} if gate else {})}
    assert recipe.pop("optim").items() - g1.pop("optim").items() <= {("q_lr", 1.0e-3), ("q_warmup", 1)}
    for key in ("name", "description", "model"):
        recipe.pop(key), g1.pop(key)
    assert recipe == g1  # dataset, task, seeds, featurizer, train
