"""zoo: a DGL model zoo for sparse and gated graph attention.

>>> import zoo
>>> model = zoo.create_model("siggate_gt", num_outputs=1, dim=64, heads=4, layers=2)
>>> "zinc_siggate" in zoo.list_models(pretrained=True)  # shipped checkpoints
True
>>> model = zoo.load_pretrained("zinc_siggate")          # eval mode, card in model.card
>>> zoo.save_pretrained(model, model.card, "my_model.safetensors").name  # and my_model.json
'my_model.safetensors'
>>> zoo.predict(model, ["CCO", "c1ccccc1O"]).values.shape  # [2, T] in the target's units
(2, 1)
>>> import pandas as pd  # a toy CSV: 20 small molecules, a made-up target
>>> smiles = ["CCO", "CCCO", "CCCCO", "c1ccccc1", "c1ccccc1O", "CC(=O)O", "CCN", "CCCl", "ClCCl", "CC(C)O",
...           "OCCO", "CCOC", "CCCC", "CCCCC", "c1ccncc1", "CC#N", "C=CC", "CCS", "O=C=O", "CCBr"]
>>> pd.DataFrame({"smiles": smiles, "logS": [0.1 * i for i in range(20)]}).to_csv("my.csv", index=False)
>>> result = zoo.finetune("zinc_siggate", "my.csv", "smiles", ["logS"], epochs=2, seeds=[0],  # a study: 30, range(5)
...                       out="my_finetune", progress=False)
>>> result["metric"], sorted(result["summary"]["test"])  # mean, sd and values over the seeds of each
('rmse', ['loss', 'mae', 'r2', 'rmse'])

The functions are imported on first use, so ``import zoo`` itself stays light.
"""
import importlib
import os
import sys

from zoo._version import __version__

if os.environ.get("ZOO_OFFLINE", "").strip().lower() in ("1", "true"):
    # ogb, which dgl.data imports, asks PyPI for its latest version in a thread on import unless
    # the `outdated` package is missing: hide it, so an offline run opens no network connection.
    sys.modules.setdefault("outdated", None)
__all__ = ["create_model", "finetune", "list_models", "load_pretrained", "predict", "save_pretrained"]
_HOMES = {"create_model": "zoo.models", "list_models": "zoo.models",
          "load_pretrained": "zoo.models", "save_pretrained": "zoo.models",
          "finetune": "zoo.transfer", "predict": "zoo.transfer"}


def __getattr__(name: str):
    if name in _HOMES:
        return getattr(importlib.import_module(_HOMES[name]), name)
    raise AttributeError(f"module 'zoo' has no attribute {name!r}")
