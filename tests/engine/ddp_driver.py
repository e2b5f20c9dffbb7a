"""Launched by test_distributed.py, as one process or under torchrun: trains a tiny SigGate-GT
without BatchNorm or dropout on a toy CSV, so that both launches must reach the same weights."""
import sys
from pathlib import Path

from zoo.data.csv_source import load_csv_dataset
from zoo.engine.distributed import init_from_env, main_first
from zoo.engine.graph_trainer import train_graph_model
from zoo.engine.recipe import build_recipe

if __name__ == "__main__":
    csv, cache, out = map(Path, sys.argv[1:4])
    init_from_env()
    with main_first():
        data = load_csv_dataset(csv, "smiles", ["a", "b"], split="random", cache_root=cache, progress=False)
    recipe = build_recipe({"dataset": "zinc_smiles", "name": "toy", "task": "graph_regression",
                           "model": {"name": "siggate_gt", "dim": 16, "heads": 2, "layers": 2, "local": "gine",
                                     "pe": "none", "norm": "layer", "dropout": 0.0, "attn_dropout": 0.0},
                           "optim": {"epochs": 3, "batch_size": 8, "lr": 0.01}})
    train_graph_model(recipe, data, seed=0, run_dir=out, progress=False)
