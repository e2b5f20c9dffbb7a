"""A timm-style model registry: one decorator per architecture, no global config; it also lists
the shipped pretrained checkpoints (loaded by :mod:`zoo.models.pretrained`)."""
from __future__ import annotations

import difflib
import inspect
from pathlib import Path
from typing import Callable, get_type_hints

import torch

_MODELS: dict[str, Callable[..., torch.nn.Module]] = {}
PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"

# Arguments a trainer fills in from the data, never from a recipe.
DATA_ARGUMENTS = ("in_feats", "num_classes", "num_outputs")


def register_model(name: str):
    """Register a model class (or factory) under ``name``.

    >>> @register_model("my_gcn")           # doctest: +SKIP
    ... class MyGCN(torch.nn.Module): ...
    """

    def decorate(builder):
        if name in _MODELS:
            raise ValueError(f"model {name!r} is registered twice")
        _MODELS[name] = builder
        return builder

    return decorate


def list_models(pretrained: bool = False) -> list[str]:
    """Names of all registered architectures, sorted; with ``pretrained=True`` the names of the
    shipped pretrained checkpoints instead (what :func:`zoo.load_pretrained` accepts)."""
    return pretrained_names() if pretrained else sorted(_MODELS)


def pretrained_names(directory=None) -> list[str]:
    """Names of the pretrained checkpoints in ``directory`` (default :data:`PRETRAINED_DIR`), sorted: the
    stems of its ``.safetensors`` files and, for this release, of legacy ``.pt`` files."""
    folder = Path(directory or PRETRAINED_DIR)
    return sorted({path.stem for pattern in ("*.safetensors", "*.pt") for path in folder.glob(pattern)})


def _builder(name: str):
    if name not in _MODELS:
        near = difflib.get_close_matches(str(name), list(_MODELS), n=1)
        hint = f"; did you mean {near[0]!r}?" if near else ""
        raise KeyError(f"unknown model {name!r}{hint} Registered: {', '.join(list_models())}")
    return _MODELS[name]


def model_arguments(name: str) -> dict[str, type]:
    """The recipe-settable keyword arguments of a model and their annotated types. A class
    constructor that takes ``**kwargs`` passes them to its parent class, whose arguments are then
    the class's too (e.g. ``siggate_gt`` = ``gps`` + the gate)."""
    builder = _builder(name)
    targets = [builder]
    if inspect.isclass(builder):
        targets = [vars(cls)["__init__"] for cls in builder.__mro__ if "__init__" in vars(cls)]
    arguments: dict[str, type] = {}
    for target in targets:
        hints, params = get_type_hints(target), inspect.signature(target).parameters
        arguments.update({p: hints.get(p, object) for p, param in params.items()
                          if p not in ("self", *DATA_ARGUMENTS, *arguments)
                          and param.default is not inspect.Parameter.empty})
        if not any(param.kind is param.VAR_KEYWORD for param in params.values()):
            break
    return arguments


def create_model(name: str, **kwargs) -> torch.nn.Module:
    """Build a registered model: ``create_model("gat", in_feats=1433, num_classes=7, heads=8)``."""
    return _builder(name)(**kwargs)
