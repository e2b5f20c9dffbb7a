"""Export a finished training run as a pretrained checkpoint, and the model card every checkpoint carries.

:func:`model_card` is the one card builder: :func:`export_run` and fine-tuning
(:mod:`zoo.transfer.finetuning`) both use it, so every card records the resolved recipe, data,
metrics, library versions and git commit in the same form.

>>> export_run("runs/zinc_siggate/1a2b3c4d5e/seed0", "zinc_siggate", "python tools/train.py ...")  # doctest: +SKIP
"""
from __future__ import annotations

import json
import re
from datetime import datetime, timezone
from pathlib import Path

import torch

from zoo.data import DatasetError, featurizer_from_spec, load_card
from zoo.engine.card_command import CommandError, check_command
from zoo.engine.checkpoint import CheckpointError, load_checkpoint
from zoo.engine.recipe import Recipe, RecipeError, build_recipe
from zoo.models.capabilities import HasPositionalEncodings
from zoo.models.pretrained import PretrainedError, model_from_card, save_pretrained
from zoo.models.registry import PRETRAINED_DIR

MAX_EXPORT_BYTES = 20_000_000
"""Largest weights file an export writes: the paper's molhiv model (4.74 M float32 parameters,
19 MB) fits; a larger model is refused, so that the checkpoints shipped in the package stay small."""
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


def model_card(name: str, model: torch.nn.Module, recipe: Recipe, metrics: dict, environment: dict, *,
               num_outputs: int, split: dict, target_columns, command: str, dataset: dict | None = None,
               featurizer: dict | None = None, **extra) -> dict:
    """The card of ``model``, trained by ``recipe``, as plain JSON data.

    ``metrics``: what the graph trainer returned (``metrics.json``); ``environment``: what
    :func:`zoo.engine.environment.record_environment` recorded for the training process; a run
    resumed in other environments (commits, machines) lists them under ``earlier_environments``. ``featurizer``:
    the spec of the featurizer of the training data; the model arguments it implies (e.g.
    dgllife's ``atom_features``) join ``model_args``. ``extra`` keys (e.g. a fine-tuned model's
    ``parent``) are added as given.

    >>> card = model_card("my_zinc", model, recipe, metrics, environment, num_outputs=1,  # as export_run
    ...                   split={"split_source": metrics["split_source"]}, target_columns=["penalized_logp"],
    ...                   command="python tools/train.py recipes/zinc_siggate.yaml --seeds 0")  # doctest: +SKIP
    >>> save_pretrained(model, card, "checkpoints/my_zinc.safetensors")  # doctest: +SKIP
    """
    inputs = featurizer_from_spec(featurizer).model_inputs() if featurizer else {}
    card = {
        "name": name,
        "architecture": recipe.model["name"],
        "model_args": recipe.model_args(inputs, num_outputs=num_outputs),
        "recipe": recipe.to_dict(),
        "task": recipe.task,
        "metric": metrics["main_metric"],
        **({"featurizer": featurizer} if featurizer else {}),
        **({"pe_spec": model.pe_spec()} if isinstance(model, HasPositionalEncodings) else {}),
        **({"dataset": dataset} if dataset else {}),
        "split": split,
        "target_columns": list(target_columns),
        "metrics": {part: metrics["final"][part] for part in ("val", "test")},
        "best_epoch": metrics["best_epoch"],
        "command": command,
        **extra,
        "zoo_version": environment.get("zoo"),
        "git_commit": environment.get("git_commit"),
        "versions": {"python": environment.get("python"), **(environment.get("packages") or {})},
        **({"earlier_environments": environment["earlier"]} if environment.get("earlier") else {}),
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    return json.loads(json.dumps(card, default=str))


def export_run(run_dir, name: str, command: str, directory=None) -> Path:
    """Save the best weights of a finished graph-level run with their card as ``<directory>/<name>.safetensors``
    and ``<name>.json`` (see :mod:`zoo.models.pretrained`); returns the first.

    ``directory`` defaults to the shipped :data:`zoo.models.registry.PRETRAINED_DIR`. Refuses
    unfinished runs (no ``metrics.json``), node-level runs, weights over 20 MB and a ``command``
    that would not retrain the run (:mod:`zoo.engine.card_command`; an empty one records none).
    ``best.pt`` is read with ``weights_only=True``: a file that holds more than tensors and plain
    data is refused.

    >>> export_run("runs/zinc_siggate/<config-hash>/seed0", "my_zinc",  # a finished run  # doctest: +SKIP
    ...            "python tools/train.py recipes/zinc_siggate.yaml --seeds 0", directory="checkpoints")
    PosixPath('checkpoints/my_zinc.safetensors')
    """
    run_dir = Path(run_dir)
    if not _NAME.fullmatch(name) or name.endswith((".pt", ".safetensors", ".json")):
        raise PretrainedError(f"name {name!r} must be a file stem of letters, digits, '_', '.', '-' "
                              "(without .safetensors), e.g. zinc_siggate")
    if not run_dir.is_dir():
        raise PretrainedError(f"run folder {run_dir} does not exist; pass runs/<recipe>/<hash>/seed<k>")
    if not (run_dir / "metrics.json").is_file():
        raise PretrainedError(f"{run_dir} has no metrics.json, so its run is unfinished; "
                              "rerun tools/train.py with the same recipe to finish it")
    if not (run_dir / "best.pt").is_file():
        raise PretrainedError(f"{run_dir} has no best.pt; retrain it with tools/train.py --force")
    metrics = json.loads((run_dir / "metrics.json").read_text())
    environment = json.loads((run_dir / "environment.json").read_text()) \
        if (run_dir / "environment.json").is_file() else {}
    try:
        best = load_checkpoint(run_dir / "best.pt")
    except CheckpointError as err:
        raise PretrainedError(str(err)) from None
    if not isinstance(best, dict) or not {"model", "recipe"} <= best.keys():
        raise PretrainedError(f"{run_dir}/best.pt is not a best-epoch checkpoint of tools/train.py (no model and "
                              "recipe); retrain it with tools/train.py --force")
    try:
        recipe = build_recipe(best["recipe"])
    except RecipeError as err:
        raise PretrainedError(f"{run_dir}/best.pt holds a recipe this zoo version rejects: {err}") from None
    if command:
        try:
            seed = metrics.get("seed", int(run_dir.name[4:]) if re.fullmatch(r"seed\d+", run_dir.name) else None)
            check_command(command, recipe, seed)
        except CommandError as err:
            raise PretrainedError(f"{run_dir}: {err}") from None
    if recipe.task == "node_classification":
        raise PretrainedError(f"{run_dir} is a node_classification run; only graph-level runs "
                              "(graph_regression, graph_classification) can be exported")
    try:
        dataset = load_card(recipe.dataset)
    except DatasetError:
        dataset = None
    chosen = recipe.featurizer or (dataset or {}).get("featurizer")  # the recipe's, else the dataset card's
    featurizer = featurizer_from_spec(chosen) if chosen else None
    inputs = featurizer.model_inputs() if featurizer else {}
    num_outputs = _num_outputs(recipe.model["name"], recipe.model_args(inputs), best["model"])
    model_args = recipe.model_args(inputs, num_outputs=num_outputs)
    model = model_from_card({"architecture": recipe.model["name"], "model_args": model_args}, run_dir)
    try:
        model.load_state_dict(best["model"], strict=True)
    except RuntimeError as err:
        raise PretrainedError(f"{run_dir}/best.pt does not fit its recipe's model {model_args}: {err}") from None
    model.eval()
    source = (dataset or {}).get("source") or {}
    columns = next((place["target_columns"] for place in (dataset or {}, source, (dataset or {}).get("fallback") or {})
                    if "target_columns" in place), [])
    if len(columns) != num_outputs:  # a run on other targets than the card's (e.g. a test subset)
        columns = []
    split = {"split_source": metrics.get("split_source")}
    if "split_sizes" in metrics:  # what the run used (rows whose SMILES fail to parse are left out)
        split["sizes"] = metrics["split_sizes"]
    elif dataset and "sizes" in (dataset.get("split") or {}):  # runs written before split_sizes was recorded
        split["sizes"], split["sizes_from"] = dataset["split"]["sizes"], "dataset card"
    card = model_card(name, model, recipe, metrics, environment, num_outputs=num_outputs, split=split,
                      target_columns=columns, command=command, dataset=dataset,
                      featurizer=featurizer.spec if featurizer else None)
    path = Path(directory or PRETRAINED_DIR) / f"{name}.safetensors"
    return save_pretrained(model, card, path, max_bytes=MAX_EXPORT_BYTES)


def _num_outputs(architecture: str, options: dict, state: dict) -> int:
    """The head width of ``state``: the size of the weights that differ from a 1-output model's."""
    probe = model_from_card({"architecture": architecture, "model_args": {**options, "num_outputs": 1}},
                            "the run's recipe")
    differ = [key for key, tensor in probe.state_dict().items() if key in state and tensor.shape != state[key].shape]
    return int(state[differ[0]].shape[0]) if differ else 1
