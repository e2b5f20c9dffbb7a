"""Recipes, trainers, metrics, checkpoints, run folders and their export as pretrained checkpoints."""
from zoo.engine.experiment import run_folder, run_recipe, run_sweep
from zoo.engine.export import export_run, model_card
from zoo.engine.metrics import classification_metrics
from zoo.engine.recipe import Recipe, RecipeError, load_recipe

__all__ = ["Recipe", "RecipeError", "classification_metrics", "export_run", "load_recipe", "model_card", "run_folder",
           "run_recipe", "run_sweep"]
