"""A timm-style model registry: one decorator per architecture, no global config; it also lists
the shipped pretrained checkpoints (loaded by :mod:`zoo.models.pretrained`).

A model's keyword arguments are its recipe keys. An argument annotated with a range
(``Annotated[float, Interval(0, 1, high_open=True)]``, see :mod:`zoo.models.constraints`) is
checked whenever the model is built; :func:`model_arguments` reports type, default and range.
"""
from __future__ import annotations

import dataclasses
import difflib
import functools
import inspect
import typing
from pathlib import Path
from typing import Any, Callable

import torch

from zoo.models.constraints import Interval

_MODELS: dict[str, Callable[..., torch.nn.Module]] = {}
PRETRAINED_DIR = Path(__file__).resolve().parents[1] / "pretrained"


@dataclasses.dataclass(frozen=True)
class RemoteCheckpoint:
    """A pretrained checkpoint served from URLs: its weights and card, each pinned by sha256."""

    weights_url: str
    weights_sha256: str
    card_url: str
    card_sha256: str


REMOTE_PRETRAINED: dict[str, RemoteCheckpoint] = {}
"""Checkpoints :func:`zoo.load_pretrained` downloads by name (none are hosted yet; see
:func:`register_remote_pretrained`)."""

# Arguments a trainer fills in from the data, never from a recipe, with the placeholder a dry build
# uses (0 feature widths: the default, OGB's categorical features).
DATA_ARGUMENTS = {"in_feats": 1, "num_classes": 1, "num_outputs": 1, "atom_features": 0, "bond_features": 0}
REQUIRED = inspect.Parameter.empty


@dataclasses.dataclass(frozen=True)
class Argument:
    """A model's keyword argument: its type, its default (:data:`REQUIRED` if none) and its ranges."""

    type: Any
    default: Any = REQUIRED
    ranges: tuple[Interval, ...] = ()

    def check(self, key: str, value) -> None:
        """Raise ``ValueError("<key> is <value>; it must be <range>")`` if ``value`` is out of range."""
        for valid in self.ranges:
            if isinstance(value, (int, float)) and value not in valid:
                raise ValueError(f"{key} is {value!r}; it must be {valid}")


def register_model(name: str):
    """Register a model class (or factory) under ``name``; its declared argument ranges are
    checked on every construction.

    >>> @register_model("my_gcn")           # doctest: +SKIP
    ... class MyGCN(torch.nn.Module): ...
    """

    def decorate(builder):
        if name in _MODELS:
            raise ValueError(f"model {name!r} is registered twice")
        builder = _checked(builder)
        _MODELS[name] = builder
        return builder

    return decorate


def _checked(builder):
    """``builder`` whose constructor (or the factory itself) first checks the declared ranges."""
    target = builder.__init__ if inspect.isclass(builder) else builder
    signature = inspect.signature(target)
    forwarded = next((p.name for p in signature.parameters.values() if p.kind is p.VAR_KEYWORD), None)

    @functools.wraps(target)
    def checked(*args, **kwargs):
        values = signature.bind(*args, **kwargs).arguments
        values = {**values, **values.pop(forwarded, {})}
        arguments = _arguments(builder)
        for key, value in values.items():
            if key in arguments:
                arguments[key].check(key, value)
        return target(*args, **kwargs)

    if inspect.isclass(builder):
        builder.__init__ = checked
        return builder
    return checked


@functools.lru_cache(maxsize=None)
def _arguments(builder) -> dict[str, Argument]:
    """Every named argument of a builder. A class constructor that takes ``**kwargs`` passes them
    to its parent class, whose arguments are then the class's too (e.g. ``siggate_gt`` = ``gps`` + gate)."""
    if not inspect.isclass(builder):
        return declared_arguments(builder)
    arguments: dict[str, Argument] = {}
    for cls in builder.__mro__:
        if "__init__" in vars(cls):
            init = vars(cls)["__init__"]
            arguments.update({k: v for k, v in declared_arguments(init).items() if k not in arguments})
            if not any(p.kind is p.VAR_KEYWORD for p in inspect.signature(init).parameters.values()):
                break
    return arguments


def declared_arguments(function) -> dict[str, Argument]:
    """The keyword arguments of ``function`` with their types, defaults and declared ranges
    (also used for the optimiser's settings, :class:`zoo.engine.recipe.OptimConfig`)."""
    hints = typing.get_type_hints(function, include_extras=True)
    arguments = {}
    for key, param in inspect.signature(function).parameters.items():
        if key == "self" or param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            continue
        hint = hints.get(key, object)
        ranges = ()
        if typing.get_origin(hint) is typing.Annotated:
            ranges = tuple(m for m in hint.__metadata__ if isinstance(m, Interval))
            hint = typing.get_args(hint)[0]
        arguments[key] = Argument(hint, param.default, ranges)
    return arguments


def register_remote_pretrained(name: str, **entry: str) -> RemoteCheckpoint:
    """Make ``load_pretrained(name)`` download a checkpoint pair from URLs, verified by sha256.

    >>> register_remote_pretrained("my_model", weights_url="https://host/my_model.safetensors",
    ...     weights_sha256="ab" * 32, card_url="https://host/my_model.json", card_sha256="cd" * 32)  # doctest: +SKIP
    """
    remote = RemoteCheckpoint(**entry)
    for field in ("weights_sha256", "card_sha256"):
        digest = getattr(remote, field)
        if len(digest) != 64 or any(c not in "0123456789abcdef" for c in digest.lower()):
            raise ValueError(f"{field} of {name!r} is {digest!r}; it must be 64 hex digits (a sha256)")
    if name in REMOTE_PRETRAINED or name in pretrained_names():
        raise ValueError(f"pretrained model {name!r} is registered twice")
    REMOTE_PRETRAINED[name] = remote
    return remote


def list_models(pretrained: bool = False) -> list[str]:
    """Names of all registered architectures, sorted; with ``pretrained=True`` the names of the
    pretrained checkpoints instead, shipped and remote (what :func:`zoo.load_pretrained` accepts).

    >>> "siggate_gt" in list_models(), "zinc_siggate" in list_models(pretrained=True)
    (True, True)
    """
    return sorted({*pretrained_names(), *REMOTE_PRETRAINED}) if pretrained else sorted(_MODELS)


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


def model_arguments(name: str) -> dict[str, Argument]:
    """The recipe-settable keyword arguments of a model: type, default and declared ranges.

    >>> model_arguments("gat")["dropout"].ranges
    (Interval(low=0, high=1, low_open=False, high_open=True),)
    """
    return {key: argument for key, argument in _arguments(_builder(name)).items()
            if key not in DATA_ARGUMENTS and argument.default is not REQUIRED}


def data_arguments(name: str) -> tuple[str, ...]:
    """The arguments of a model a trainer fills in from the data: ``in_feats`` and ``num_classes``
    for a node classifier, ``num_outputs`` (and the featurizer's ``atom_features`` /
    ``bond_features``) for a graph model."""
    return tuple(key for key in _arguments(_builder(name)) if key in DATA_ARGUMENTS)


def check_model_arguments(name: str, **kwargs) -> None:
    """Check ``create_model(name, **kwargs)`` without building weights: the declared ranges, then
    the constructor's own checks (e.g. ``dim`` a multiple of ``heads``) in a dry build on the meta
    device (no memory, no random numbers). Data arguments not given are placeholders
    (:data:`DATA_ARGUMENTS`). Raises the constructor's ``ValueError`` or ``TypeError``."""
    placeholders = {key: DATA_ARGUMENTS[key] for key in data_arguments(name)}
    with torch.device("meta"):
        create_model(name, **{**placeholders, **kwargs})


def create_model(name: str, **kwargs) -> torch.nn.Module:
    """Build a registered model (:func:`list_models`; :func:`zoo.models.model_arguments` lists its keys).

    >>> model = create_model("gat", in_feats=1433, num_classes=7, heads=8)  # Cora-sized
    >>> type(model).__name__, sum(p.numel() for p in model.parameters())
    ('GAT', 764072)
    """
    return _builder(name)(**kwargs)
