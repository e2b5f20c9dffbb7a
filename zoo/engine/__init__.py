"""Recipes, trainers, metrics, checkpoints and run folders."""
from zoo.engine.experiment import run_folder, run_recipe, run_sweep
from zoo.engine.metrics import classification_metrics
from zoo.engine.recipe import Recipe, RecipeError, load_recipe

__all__ = ["Recipe", "RecipeError", "classification_metrics", "load_recipe", "run_folder", "run_recipe", "run_sweep"]
