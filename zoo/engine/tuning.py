"""Tune a grid of recipes on validation over a few seeds, then run the pick on every seed.

For each dataset among the recipes: every candidate runs on ``tune_seeds``; the one with the
best mean validation main metric over those seeds (never test; ties go to the first name in
sorted order, as ``tools/report.py --tuned`` does) then runs on ``seeds``. Finished seeds are
reused, so a tuning run resumes like a sweep. The pick is written to
``<out>/tuning/<grid>.json`` (the candidates' common name, e.g. ``cora_qfrozen``).
"""
from __future__ import annotations

import json
import os
from pathlib import Path

from zoo.analysis.tables import LOWER_IS_BETTER, pick_best
from zoo.engine.checkpoint import write_json
from zoo.engine.distributed import is_main, say
from zoo.engine.experiment import run_folder, run_recipe, run_sweep
from zoo.engine.recipe import Recipe, RecipeError


def grid_name(recipes: list[Recipe]) -> str:
    """The candidates' common name prefix without trailing separators (``cora_qfrozen``)."""
    prefix = os.path.commonprefix([r.name for r in recipes]).rstrip("_.-0123456789")
    return prefix or "grid"


def tune_and_run(recipes: list[Recipe], out: str | Path = "runs", *, tune_seeds: list[int], seeds: list[int],
                 progress: bool = False, device: str = "cpu") -> dict[str, dict]:
    """Pick per dataset on ``tune_seeds`` and run the pick on ``seeds``; returns ``{dataset: pick record}``.

    A record holds the grid name, the tuning seeds, every candidate's validation mean, the pick,
    and the pick's summary over ``seeds``. A dataset whose data is missing for every candidate is
    reported with an ``error`` instead.

    >>> from zoo.engine.recipe import load_recipe                                       # doctest: +SKIP
    >>> grid = [load_recipe(f"recipes/texas_qfrozen_{q}.yaml") for q in ("0.5", "1.5")]  # doctest: +SKIP
    >>> tune_and_run(grid, "runs", tune_seeds=[0, 1, 2], seeds=list(range(10)))         # doctest: +SKIP
    """
    if not recipes:
        raise RecipeError("no recipes to tune over")
    names = [r.name for r in recipes]
    if len(set(names)) < len(names):
        raise RecipeError(f"a recipe is given twice: {sorted(n for n in set(names) if names.count(n) > 1)}")
    groups: dict[str, list[Recipe]] = {}
    for recipe in recipes:
        groups.setdefault(recipe.dataset, []).append(recipe)
    picks = {}
    for dataset, group in groups.items():
        say(f"\n== tuning {len(group)} candidate(s) on {dataset}, validation over seeds {tune_seeds}")
        ran = run_sweep(group, out, seeds=tune_seeds, progress=progress, device=device)
        candidates = [recipe for recipe in group if not isinstance(ran[recipe.name], str)]
        if not candidates:
            picks[dataset] = {"grid": grid_name(group), "error": "no candidate could run (data missing)"}
            continue
        # read back from the run folders, so that every torchrun rank makes the same pick
        main, val = _validation_means(candidates, out, tune_seeds)
        best = pick_best(val, main in LOWER_IS_BETTER)
        say(f"\n== {dataset}: picked {best} (validation {main} {val[best]:.4f} over seeds {tune_seeds}); "
            f"running it on seeds {seeds}")
        chosen = next(r for r in group if r.name == best)
        summary = run_recipe(chosen, out, seeds=seeds, progress=progress, device=device)
        record = {"grid": grid_name(group), "dataset": dataset, "main_metric": main, "tune_seeds": list(tune_seeds),
                  "validation": val, "pick": best, "summary": summary}
        if is_main():
            write_json(record, Path(out) / "tuning" / f"{record['grid']}.json")
        picks[dataset] = record
    return picks


def _validation_means(recipes: list[Recipe], out, seeds: list[int]) -> tuple[str, dict[str, float]]:
    """The main metric's name and each recipe's mean validation value over ``seeds``."""
    val, main = {}, None
    for recipe in recipes:
        runs = [json.loads((run_folder(recipe, out) / f"seed{seed}" / "metrics.json").read_text()) for seed in seeds]
        main = runs[0]["main_metric"]
        val[recipe.name] = sum(run["final"]["val"][main] for run in runs) / len(runs)
    return main, val
