"""Strict experiment recipes: YAML in, validated dataclasses out.

A recipe is an experiment's identity::

    dataset: cora                 # a card in datasets/
    model: {name: gat, hidden: 64, heads: 8}   # keyword arguments of a registered model
    optim: {lr: 0.01, weight_decay: 5.0e-4, epochs: 200, patience: 20}
    seeds: [0]
    train: {sampler: {fanouts: [10, 10], batch_size: 1024}}   # optional: mini-batches (node tasks)

A recipe may start from another with ``base: _base/ltga_node.yaml`` (a path relative to the
recipe's own folder) and state only its differences: mappings merge key by key, any other
value (a list of seeds, a number) replaces the base's. Bases chain; the recipe's name is always
its own file name.

Every key is checked, in every file of the chain: an unknown or misspelt key raises
:class:`RecipeError` naming the file, the key and the nearest valid key. Model keys are checked
against the registered model's constructor, and their values against its declared ranges
(``model.dropout is 2.0; it must be in [0, 1)``) and its own checks, before any run folder exists.
"""
from __future__ import annotations

import dataclasses
import difflib
import hashlib
import json
import math
from pathlib import Path
from typing import Any

import yaml

from zoo.data.featurizers import smiles_featurizers
from zoo.models.constraints import Count, EpochCount, NonNegative, Positive
from zoo.models.registry import Argument, check_model_arguments, declared_arguments, model_arguments


class RecipeError(ValueError):
    """A recipe (or an override of it) is not valid; the message says what to change."""


@dataclasses.dataclass
class OptimConfig:
    """Optimisation of a run: Adam with weight decay and early stopping on validation loss.

    Models with index parameters (LTGA's q, or a capacity-matched control) train them with a
    separate Adam (``q_lr``, no weight decay), frozen for the first ``q_warmup`` epochs, with the
    Shannon prior ``q_prior * mean (q - 1)^2`` added to the loss.
    """

    lr: Positive = 1e-2
    weight_decay: NonNegative = 5e-4
    epochs: Count = 200
    patience: Count = 20
    q_lr: Positive = 1e-2
    q_warmup: EpochCount = 20
    q_prior: NonNegative = 0.0
    # graph-level tasks (mini-batches of molecules)
    optimizer: str = "adam"
    batch_size: Count = 32
    scheduler: str = "none"
    warmup_epochs: EpochCount = 0
    clip_grad_norm: NonNegative = 0.0


OPTIM_ARGUMENTS = declared_arguments(OptimConfig.__init__)
"""The optimiser's settings with their types and declared ranges."""


@dataclasses.dataclass
class SamplerConfig:
    """Mini-batch node training on DGL's neighbour sampling (``dgl.dataloading.NeighborSampler``).

    ``fanouts``: neighbours sampled per destination node for each graph layer, input layer first
    (-1: all of them); one per layer of the model. ``batch_size``: training nodes per step.
    ``eval_batch_size``: nodes per chunk of the layer-wise inference that evaluates every node.
    """

    fanouts: list
    batch_size: Count = 1024
    eval_batch_size: Count = 4096


SAMPLER_ARGUMENTS = declared_arguments(SamplerConfig.__init__)


@dataclasses.dataclass
class TrainConfig:
    """How a node classifier sees the graph: the whole graph each step (no ``sampler``, the
    default) or mini-batches of sampled neighbourhoods (:class:`SamplerConfig`)."""

    sampler: SamplerConfig | None = None


@dataclasses.dataclass
class Recipe:
    """One experiment: a dataset card, a model with its arguments, optimisation and seeds.

    ``featurizer`` names the molecule featurizer of a graph dataset of SMILES (one of
    ``zoo.data.featurizers.smiles_featurizers()``, e.g. ``dgllife-canonical``); ``None``: the
    dataset card's.
    """

    dataset: str
    model: dict
    optim: OptimConfig = dataclasses.field(default_factory=OptimConfig)
    task: str = "node_classification"
    seeds: list = dataclasses.field(default_factory=lambda: [0])
    description: str = ""
    name: str = "recipe"
    featurizer: str | None = None
    train: TrainConfig = dataclasses.field(default_factory=TrainConfig)

    def to_dict(self) -> dict:
        """The resolved recipe as plain data (what a run folder stores)."""
        return dataclasses.asdict(self)

    def model_args(self, inputs: dict | None = None, **extra) -> dict:
        """The model's arguments: the recipe's (without ``name``), then ``inputs`` (those the data's
        featurizer implies, e.g. dgllife's ``atom_features``), then ``extra`` (e.g. ``num_outputs``)."""
        return {**{k: v for k, v in self.model.items() if k != "name"}, **(inputs or {}), **extra}

    def config_hash(self) -> str:
        """Ten hex digits identifying everything that changes a result (not seeds or name; the
        featurizer and the train section only when the recipe sets them, so older recipes keep
        their hash)."""
        unset = {"featurizer": None, "train": dataclasses.asdict(TrainConfig())}
        identity = {k: v for k, v in self.to_dict().items()
                    if k not in ("seeds", "name", "description") and not (k in unset and v == unset[k])}
        blob = json.dumps(identity, sort_keys=True, default=str).encode()
        return hashlib.sha256(blob).hexdigest()[:10]


TASKS = ("node_classification", "graph_regression", "graph_classification")
OPTIMIZERS = ("adam", "adamw")
SCHEDULERS = ("none", "cosine")


def load_recipe(path: str | Path, overrides: list[str] | None = None, epochs: int | None = None) -> Recipe:
    """Read a YAML recipe, apply ``a.b=value`` overrides and an epoch cap, and validate it.

    An epoch cap shorter than the recipe's schedule shrinks the learning-rate warm-up
    (``optim.warmup_epochs``) and the index parameters' warm-up (``optim.q_warmup``, where the
    recipe states one) in proportion, so a short run is the same schedule compressed, not one
    stuck in warm-up.

    >>> r = load_recipe("recipes/cora_gat.yaml", ["model.heads=4"], epochs=50)
    >>> r.model["heads"], r.optim.epochs
    (4, 50)
    """
    path = Path(path)
    raw = resolve_bases(path)
    raw["name"] = path.stem
    for item in overrides or []:
        apply_override(raw, item)
    if epochs is not None:
        optim = raw.setdefault("optim", {})
        full = optim.get("epochs", OptimConfig.epochs)
        for key in ("warmup_epochs", "q_warmup"):
            if isinstance(full, int) and 0 < epochs < full and isinstance(optim.get(key), int):
                optim[key] = round(optim[key] * epochs / full)
        optim["epochs"] = epochs
    return build_recipe(raw)


def resolve_bases(path: Path) -> dict:
    """The raw mapping of ``path`` merged over its ``base:`` chain, every file's keys checked."""
    chain: list[tuple[Path, dict]] = []
    while True:
        raw = _read_mapping(path, chain)
        chain.append((path, raw))
        base = raw.pop("base", None)
        if base is None:
            break
        if not isinstance(base, str) or not base:
            raise RecipeError(f"{path}: base must be a recipe path such as _base/ltga_node.yaml, got {base!r}")
        path = path.parent / base
    merged: dict = {}
    for _, raw in reversed(chain):
        merged = _merge(merged, raw)
    for where, raw in chain:
        _check_file_keys(raw, merged, where)
    return merged


def _read_mapping(path: Path, chain: list) -> dict:
    seen = [p.resolve() for p, _ in chain]
    origin = f" (base of {chain[-1][0]})" if chain else ""
    if path.resolve() in seen:
        cycle = " -> ".join(str(p) for p, _ in chain)
        raise RecipeError(f"recipe bases form a cycle: {cycle} -> {path}; remove one base: line")
    try:
        if path.is_dir():
            raise RecipeError(f"{path} is a folder; give a recipe file such as {path / 'cora_gat.yaml'}")
        if not path.is_file():
            raise RecipeError(f"recipe file not found: {path}{origin}{_closest_recipe(path)}")
        text = path.read_text()
    except OSError as err:  # e.g. a name too long, or no permission
        unexpanded = "; the shell did not expand its {a,b} braces: run it in bash, or list the files" \
            if "{" in path.name and "," in path.name else ""
        raise RecipeError(f"recipe file {path}{origin} cannot be read: {err.strerror or err}{unexpanded}") from None
    try:
        raw = yaml.safe_load(text)
    except yaml.YAMLError as err:
        raise RecipeError(f"{path} is not valid YAML: {_yaml_problem(err)}") from None
    if not isinstance(raw, dict):
        raise RecipeError(f"{path} must hold a YAML mapping of recipe keys, got {type(raw).__name__}")
    return raw


def _closest_recipe(path: Path) -> str:
    """``"; did you mean <the recipe beside it with the closest name>?"``, or "" when none is close."""
    names = [p.name for p in path.parent.glob("*.yaml")] if path.parent.is_dir() else []
    close = difflib.get_close_matches(path.name, names, n=1)
    return f"; did you mean {path.parent / close[0]}?" if close else ""


def _yaml_problem(err: yaml.YAMLError) -> str:
    """One line from a YAML error: what is wrong and where."""
    problem, mark = getattr(err, "problem", None), getattr(err, "problem_mark", None)
    if problem is None:
        return " ".join(str(err).split())
    return f"{problem} at line {mark.line + 1}, column {mark.column + 1}" if mark else problem


def _merge(base: dict, own: dict) -> dict:
    """``own`` over ``base``: mappings merge key by key, anything else replaces."""
    merged = dict(base)
    for key, value in own.items():
        merged[key] = _merge(merged[key], value) if isinstance(value, dict) and isinstance(merged.get(key), dict) else value
    return merged


def _check_file_keys(raw: dict, merged: dict, where: Path) -> None:
    """Strictness per file, so an error names the file of the chain that holds the bad key."""
    try:
        if "name" in raw:
            raise RecipeError("a recipe's name is its file name; remove the 'name:' line")
        _check_keys(raw, ["base", *(f.name for f in dataclasses.fields(Recipe) if f.name != "name")], "recipe")
        if isinstance(raw.get("optim"), dict):
            _check_keys(raw["optim"], [f.name for f in dataclasses.fields(OptimConfig)], "optim")
        if isinstance(raw.get("train"), dict):
            _check_keys(raw["train"], [f.name for f in dataclasses.fields(TrainConfig)], "train")
            if isinstance(raw["train"].get("sampler"), dict):
                _check_keys(raw["train"]["sampler"], list(SAMPLER_ARGUMENTS), "train.sampler")
        model, name = raw.get("model"), (merged.get("model") or {}).get("name")
        if isinstance(model, dict) and isinstance(name, str):
            try:
                arguments = model_arguments(name)
            except KeyError:
                return  # build_recipe names the unknown model
            _check_keys(model, ["name", *arguments], f"model ({name})")
    except RecipeError as err:
        raise RecipeError(f"{where}: {err}") from None


def apply_override(raw: dict, item: str) -> None:
    """Set ``section.key=value`` in a raw recipe mapping; the value is parsed as YAML."""
    key, sep, value = item.partition("=")
    if not sep or not key:
        raise RecipeError(f"override {item!r} must look like section.key=value, e.g. model.heads=4")
    *parents, leaf = key.split(".")
    node = raw
    for part in parents:
        node = node.setdefault(part, {})
        if not isinstance(node, dict):
            raise RecipeError(f"override {item!r}: {part!r} is not a section")
    try:
        node[leaf] = yaml.safe_load(value)
    except yaml.YAMLError as err:
        raise RecipeError(f"override {item!r}: {value!r} is not a YAML value ({_yaml_problem(err)}); "
                          "quote lists and strings whole, e.g. --set 'model.heads=[1, 2]'") from None


def build_recipe(raw: dict) -> Recipe:
    """Validate a raw mapping into a :class:`Recipe` (strict keys and types)."""
    raw = dict(raw)
    _check_keys(raw, [f.name for f in dataclasses.fields(Recipe)], "recipe")
    for required in ("dataset", "model"):
        if required not in raw:
            raise RecipeError(f"recipe needs a {required!r} key")
    optim = raw.get("optim") or {}
    if not isinstance(optim, dict):
        raise RecipeError(f"'optim' must be a mapping, got {optim!r}")
    _check_keys(optim, [f.name for f in dataclasses.fields(OptimConfig)], "optim")
    raw["optim"] = OptimConfig(**{k: _checked(v, OPTIM_ARGUMENTS[k], f"optim.{k}") for k, v in optim.items()})
    raw["model"] = _check_model(raw["model"])
    if raw.get("task", "node_classification") not in TASKS:
        raise RecipeError(f"task {raw['task']!r} is not supported; choose one of {TASKS}")
    raw["train"] = _train_config(raw.get("train"), raw.get("task", "node_classification"), raw["model"])
    raw["seeds"] = parse_seeds(raw.get("seeds", [0]))
    if not isinstance(raw["dataset"], str):
        raise RecipeError(f"dataset must be a card name such as 'cora', got {raw['dataset']!r}")
    _check_featurizer(raw.get("featurizer"), raw.get("task", "node_classification"))
    recipe = Recipe(**raw)
    if recipe.optim.optimizer not in OPTIMIZERS or recipe.optim.scheduler not in SCHEDULERS:
        raise RecipeError(f"optim.optimizer must be one of {OPTIMIZERS} and optim.scheduler one of "
                          f"{SCHEDULERS}, got {recipe.optim.optimizer!r} and {recipe.optim.scheduler!r}")
    return recipe


def _train_config(train: Any, task: str, model: dict) -> TrainConfig:
    """The ``train`` section: none (full batch) or ``sampler: {fanouts: [...], ...}``."""
    if train is None:
        return TrainConfig()
    if not isinstance(train, dict):
        raise RecipeError(f"'train' must be a mapping such as {{sampler: {{fanouts: [10, 10]}}}}, got {train!r}")
    _check_keys(train, [f.name for f in dataclasses.fields(TrainConfig)], "train")
    sampler = train.get("sampler")
    if sampler is None:
        return TrainConfig()
    if isinstance(sampler, dict):
        _check_keys(sampler, list(SAMPLER_ARGUMENTS), "train.sampler")
    if not isinstance(sampler, dict) or "fanouts" not in sampler:
        raise RecipeError("train.sampler must be a mapping with fanouts, e.g. {fanouts: [10, 10], batch_size: 1024}, "
                          f"got {sampler!r}")
    if task != "node_classification":
        raise RecipeError(f"train.sampler samples node neighbourhoods, for node_classification; a {task} recipe "
                          "trains on mini-batches of graphs (optim.batch_size): remove train.sampler")
    fanouts = sampler["fanouts"]
    if not (isinstance(fanouts, list) and fanouts
            and all(isinstance(f, int) and not isinstance(f, bool) and (f >= 1 or f == -1) for f in fanouts)):
        raise RecipeError(f"train.sampler.fanouts is {fanouts!r}; it must be a list of neighbour counts, one per "
                          "graph layer, each >= 1 or -1 for all neighbours, e.g. [10, 10]")
    layers = _model_layers(model)
    if layers is not None and len(fanouts) != layers:
        raise RecipeError(f"train.sampler.fanouts {fanouts} has {len(fanouts)} entries but the model has "
                          f"{layers} graph layers (model.layers): give one fanout per layer, e.g. {[10] * layers}")
    values = {k: _checked(v, SAMPLER_ARGUMENTS[k], f"train.sampler.{k}") for k, v in sampler.items() if k != "fanouts"}
    return TrainConfig(sampler=SamplerConfig(fanouts=list(fanouts), **values))


def _model_layers(model: dict) -> int | None:
    """The model's ``layers`` (its recipe value, else its default); None for a model without one."""
    argument = model_arguments(model["name"]).get("layers")
    return None if argument is None else model.get("layers", argument.default)


def _check_featurizer(featurizer: Any, task: str) -> None:
    """A recipe's featurizer: ``None``, or a SMILES featurizer's name for a graph-level task."""
    if featurizer is None:
        return
    names = smiles_featurizers()
    if featurizer not in names:
        near = difflib.get_close_matches(str(featurizer), names, n=1)
        hint = f" (did you mean {near[0]!r}?)" if near else ""
        raise RecipeError(f"featurizer {featurizer!r} is not a SMILES featurizer{hint}; choose one of "
                          f"{', '.join(names)}, or leave it out for the dataset card's")
    if task == "node_classification":
        raise RecipeError(f"featurizer {featurizer!r} featurizes molecules; a node_classification recipe takes none")


def parse_seeds(value: Any) -> list[int]:
    """Seeds from a list, an int, or a string like ``"0-9"`` or ``"0,3,5"``: distinct and >= 0.

    >>> parse_seeds("0-2,7")
    [0, 1, 2, 7]
    """
    if isinstance(value, int) and not isinstance(value, bool):
        seeds = [value]
    elif isinstance(value, list) and all(isinstance(s, int) and not isinstance(s, bool) for s in value):
        seeds = list(value)
    elif isinstance(value, str):
        seeds = []
        for part in value.split(","):
            lo, dash, hi = part.strip().partition("-")
            try:
                first, last = int(lo), int(hi if dash else lo)
            except ValueError:
                raise RecipeError(f"seeds {value!r}: {part.strip()!r} is not a seed or a range; "
                                  "write them like 0-9 or 0,3,5") from None
            if last < first:
                raise RecipeError(f"seeds {value!r}: the range {part.strip()!r} is empty; write it low-high, "
                                  f"e.g. {last}-{first}")
            seeds.extend(range(first, last + 1))
    else:
        raise RecipeError(f"seeds {value!r} must be an int, a list of ints, or a range like 0-9")
    if not seeds:
        raise RecipeError("seeds is empty; give at least one, e.g. 0 or 0-9")
    if any(s < 0 for s in seeds):
        raise RecipeError(f"seeds {value!r} has a negative seed; seeds are 0 or more")
    repeated = sorted({s for s in seeds if seeds.count(s) > 1})
    if repeated:
        raise RecipeError(f"seeds {value!r} names seed(s) {repeated} more than once; list each seed once")
    return seeds


def _check_model(model: Any) -> dict:
    if not isinstance(model, dict) or "name" not in model:
        raise RecipeError(f"'model' must be a mapping with a 'name', got {model!r}")
    try:
        arguments = model_arguments(model["name"])
    except KeyError as err:
        raise RecipeError(str(err.args[0])) from None
    _check_keys(model, ["name", *arguments], f"model ({model['name']})")
    checked = {"name": model["name"]}
    for key, value in model.items():
        if key != "name":
            checked[key] = _checked(value, arguments[key], f"model.{key}")
    try:  # the constructor's own checks across arguments, e.g. dim a multiple of heads
        check_model_arguments(checked["name"], **{k: v for k, v in checked.items() if k != "name"})
    except (TypeError, ValueError) as err:
        raise RecipeError(f"model ({checked['name']}): {err}") from None
    return checked


def _check_keys(mapping: dict, valid: list[str], where: str) -> None:
    for key in mapping:
        if key not in valid:
            near = difflib.get_close_matches(str(key), valid, n=1)
            hint = f"; did you mean {near[0]!r}?" if near else ""
            raise RecipeError(f"unknown key {key!r} in {where}{hint} Valid keys: {', '.join(valid)}")


def _checked(value: Any, argument: Argument, where: str) -> Any:
    """``value`` coerced to the argument's type and checked against its declared ranges."""
    value = _coerce(value, argument.type, where)
    try:
        argument.check(where, value)
    except ValueError as err:
        raise RecipeError(str(err)) from None
    return value


def _coerce(value: Any, kind: Any, where: str) -> Any:
    """Check a scalar against its annotated type (int -> float is allowed, '1e-3' too)."""
    if kind is float and isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if kind is float and isinstance(value, float) and not math.isfinite(value):
        raise RecipeError(f"{where} is {value!r}; it must be a finite number")
    if kind in (int, float, bool, str) and not (isinstance(value, kind) and not (kind is int and isinstance(value, bool))):
        raise RecipeError(f"{where} must be {kind.__name__}, got {value!r}")
    return value
