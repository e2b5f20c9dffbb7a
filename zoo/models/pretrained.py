"""Pretrained checkpoints with model cards (a timm-style extension of the model registry).

A pretrained file is one ``torch.save`` of ``{"format", "card", "state_dict"}``. The card says
how to rebuild the model (``architecture`` + ``model_args`` for :func:`create_model`), what it was
trained on and how well it did; ``weights_sha256`` guards the weights against corruption.

>>> model = load_pretrained("zinc_siggate")                      # doctest: +SKIP
>>> model.card["metrics"]["test"]                                # doctest: +SKIP
"""
from __future__ import annotations

import difflib
import hashlib
import io
import json
import re
from datetime import datetime, timezone
from pathlib import Path

import torch

from zoo.data import FEATURIZER_SPEC, DatasetError, check_featurizer_spec, load_card
from zoo.engine.checkpoint import load_checkpoint, save_checkpoint
from zoo.engine.recipe import RecipeError, build_recipe
from zoo.models.registry import create_model, list_models

PRETRAINED_DIR = Path(__file__).resolve().parent / "pretrained"
FORMAT = "zoo-pretrained/1"
REQUIRED_CARD_KEYS = ("architecture", "model_args")
MAX_EXPORT_BYTES = 10_000_000
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]*")


class PretrainedError(ValueError):
    """A pretrained checkpoint (or the run or card behind one) is not usable; the message says why."""


def weights_sha256(state_dict) -> str:
    """sha256 over ``f"{key}\\0{dtype}\\0{shape}\\0"`` and the raw bytes of each tensor, keys sorted.

    ``shape`` is the sizes joined by commas (``"3,4"``; ``""`` for a scalar), ``dtype`` as
    ``str(tensor.dtype)``; the bytes are those of the contiguous CPU tensor.
    """
    digest = hashlib.sha256()
    for key in sorted(state_dict):
        tensor = state_dict[key].detach().cpu().contiguous()
        shape = ",".join(str(size) for size in tensor.shape)
        digest.update(f"{key}\0{tensor.dtype}\0{shape}\0".encode())
        digest.update(tensor.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def save_pretrained(model: torch.nn.Module, card: dict, path) -> Path:
    """Write ``model``'s weights and ``card`` (plus ``weights_sha256``, ``num_parameters``) to ``path``.

    ``card["architecture"]`` and ``card["model_args"]`` must rebuild a model with the same
    weight names and shapes; the card must be plain JSON data.
    """
    path = Path(path)
    save_checkpoint(_payload(model, card), path)
    return path


def load_pretrained(name_or_path, *, check_featurizer: bool = True, directory=None) -> torch.nn.Module:
    """The model of a pretrained checkpoint, in eval mode, with its card as ``model.card``.

    ``name_or_path``: a name in ``directory`` (default :data:`PRETRAINED_DIR`), e.g.
    ``"zinc_siggate"``, or the path of a ``.pt`` file. ``check_featurizer``: refuse weights whose
    molecule featurizer differs from this installation's (see
    :func:`zoo.data.molecules.check_featurizer_spec`).
    """
    path = _resolve(name_or_path, directory)
    try:
        payload = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # any unreadable or non-tensor pickle
        raise PretrainedError(f"{path} is not a readable zoo pretrained checkpoint ({err}); "
                              "write one with zoo.save_pretrained or tools/export_pretrained.py") from None
    found = payload.get("format") if isinstance(payload, dict) else None
    if found != FORMAT or not {"card", "state_dict"} <= payload.keys():
        raise PretrainedError(f"{path} is not a zoo pretrained checkpoint (format {found!r}, expected {FORMAT!r}); "
                              "write one with zoo.save_pretrained or tools/export_pretrained.py")
    card, state = dict(payload["card"]), payload["state_dict"]
    actual = weights_sha256(state)
    if actual != card.get("weights_sha256"):
        raise PretrainedError(f"checkpoint weights do not match their recorded sha256 in {path} "
                              f"(recorded {card.get('weights_sha256')!r}, computed {actual!r}): the file is "
                              "corrupt or edited; download or export it again")
    if check_featurizer and "featurizer" in card:
        try:
            check_featurizer_spec(card["featurizer"])
        except DatasetError as err:
            raise PretrainedError(f"{path}: {err}") from None
    model = _build(card, path)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise PretrainedError(f"{path}: the weights do not fit {card['architecture']!r} built from the card's "
                              f"model_args: {err}") from None
    model.eval()
    model.card = card
    return model


def pretrained_names(directory=None) -> list[str]:
    """Names of the pretrained checkpoints in ``directory`` (default :data:`PRETRAINED_DIR`), sorted."""
    return sorted(path.stem for path in Path(directory or PRETRAINED_DIR).glob("*.pt"))


def export_run(run_dir, name: str, command: str, directory=None) -> Path:
    """Save the best weights of a finished run with their card as ``<directory>/<name>.pt``.

    Refuses unfinished runs (no ``metrics.json``) and files over 10 MB.
    """
    card, model = _export_parts(run_dir, name, command)
    payload = _payload(model, card)
    buffer = io.BytesIO()
    torch.save(payload, buffer)
    if buffer.tell() > MAX_EXPORT_BYTES:
        raise PretrainedError(f"{name}.pt would be {buffer.tell() / 1e6:.1f} MB, over the "
                              f"{MAX_EXPORT_BYTES / 1e6:g} MB limit for shipped weights; export a smaller model")
    path = Path(directory or PRETRAINED_DIR) / f"{name}.pt"
    save_checkpoint(payload, path)
    return path


def _payload(model: torch.nn.Module, card: dict) -> dict:
    try:
        json.dumps(card)
    except (TypeError, ValueError) as err:
        raise PretrainedError(f"the card must be plain JSON data (str, number, bool, None, list, dict): {err}") from None
    state = {key: tensor.detach().cpu() for key, tensor in model.state_dict().items()}
    expected = _build(card, "the card").state_dict()
    differ = sorted(set(state) ^ set(expected)) or [k for k in state if state[k].shape != expected[k].shape]
    if differ:
        raise PretrainedError(f"the card's architecture {card['architecture']!r} with model_args "
                              f"{card['model_args']} does not rebuild this model: weights differ at {differ[:5]}; "
                              "record the arguments the model was created with")
    card = {**card, "weights_sha256": weights_sha256(state),
            "num_parameters": sum(p.numel() for p in model.parameters())}
    return {"format": FORMAT, "card": card, "state_dict": state}


def _build(card: dict, where) -> torch.nn.Module:
    missing = [key for key in REQUIRED_CARD_KEYS if key not in card]
    if missing:
        raise PretrainedError(f"{where} lacks {missing}: a card needs 'architecture' (one of {list_models()}) and "
                              "'model_args' (keyword arguments of create_model, including num_outputs)")
    architecture, args = card["architecture"], card["model_args"]
    if architecture not in list_models():
        raise PretrainedError(f"{where}: architecture {architecture!r} is not registered in this zoo version "
                              f"(registered: {', '.join(list_models())}); upgrade zoo or fix the card")
    if not isinstance(args, dict):
        raise PretrainedError(f"{where}: model_args must be a mapping of create_model keywords, got {args!r}")
    try:
        return create_model(architecture, **args)
    except (TypeError, ValueError) as err:
        raise PretrainedError(f"{where}: create_model({architecture!r}, **{args}) failed: {err}") from None


def _resolve(name_or_path, directory) -> Path:
    """A checkpoint name in ``directory`` or a file path, as an existing path."""
    text = str(name_or_path)
    if isinstance(name_or_path, Path) or text.endswith(".pt") or "/" in text or "\\" in text:
        path = Path(name_or_path)
        if not path.is_file():
            raise PretrainedError(f"no pretrained checkpoint file at {path}; check the path, or pass a name "
                                  f"from zoo.list_models(pretrained=True)")
        return path
    folder = Path(directory or PRETRAINED_DIR)
    path = folder / f"{text}.pt"
    if not path.is_file():
        known = pretrained_names(folder)
        near = difflib.get_close_matches(text, known, n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise PretrainedError(f"no pretrained model named {text!r} in {folder}.{hint} "
                              f"Available: {', '.join(known) or 'none'}.")
    return path


def _export_parts(run_dir, name: str, command: str) -> tuple[dict, torch.nn.Module]:
    """The card of a finished run and its model holding the best weights."""
    run_dir = Path(run_dir)
    if not _NAME.fullmatch(name) or name.endswith(".pt"):
        raise PretrainedError(f"name {name!r} must be a file stem of letters, digits, '_', '.', '-' "
                              "(without .pt), e.g. zinc_siggate")
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
    best = load_checkpoint(run_dir / "best.pt")
    try:
        recipe = build_recipe(best["recipe"])
    except RecipeError as err:
        raise PretrainedError(f"{run_dir}/best.pt holds a recipe this zoo version rejects: {err}") from None
    if recipe.task == "node_classification":
        raise PretrainedError(f"{run_dir} is a node_classification run; only graph-level runs "
                              "(graph_regression, graph_classification) can be exported")
    options = {k: v for k, v in recipe.model.items() if k != "name"}
    model_args = {**options, "num_outputs": _num_outputs(recipe.model["name"], options, best["model"])}
    model = _build({"architecture": recipe.model["name"], "model_args": model_args}, run_dir)
    try:
        model.load_state_dict(best["model"], strict=True)
    except RuntimeError as err:
        raise PretrainedError(f"{run_dir}/best.pt does not fit its recipe's model {model_args}: {err}") from None
    model.eval()
    try:
        dataset = load_card(recipe.dataset)
    except DatasetError:
        dataset = None
    source = (dataset or {}).get("source") or {}
    columns = next((place["target_columns"] for place in (dataset or {}, source, (dataset or {}).get("fallback") or {})
                    if "target_columns" in place), [])
    if len(columns) != model_args["num_outputs"]:  # a run on other targets than the card's (e.g. a test subset)
        columns = []
    split = {"split_source": metrics.get("split_source")}
    if "split_sizes" in metrics:  # what the run used (rows whose SMILES fail to parse are left out)
        split["sizes"] = metrics["split_sizes"]
    elif dataset and "sizes" in (dataset.get("split") or {}):  # runs written before split_sizes was recorded
        split["sizes"], split["sizes_from"] = dataset["split"]["sizes"], "dataset card"
    card = {
        "name": name,
        "architecture": recipe.model["name"],
        "model_args": model_args,
        "recipe": recipe.to_dict(),
        "task": recipe.task,
        "metric": metrics.get("main_metric"),
        **({"featurizer": FEATURIZER_SPEC} if dataset and dataset.get("featurizer") == FEATURIZER_SPEC["name"] else {}),
        **({"pe_spec": model.pe_spec()} if hasattr(model, "pe_spec") else {}),
        **({"dataset": dataset} if dataset else {}),
        "split": split,
        "target_columns": list(columns),
        "metrics": {"val": metrics["final"]["val"], "test": metrics["final"]["test"]},
        "best_epoch": metrics.get("best_epoch", best.get("epoch")),
        "command": command,
        "zoo_version": environment.get("zoo"),
        "git_commit": environment.get("git_commit"),
        "versions": {"python": environment.get("python"), **(environment.get("packages") or {})},
        "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
    }
    return json.loads(json.dumps(card, default=str)), model  # plain JSON data, as save_pretrained requires


def _num_outputs(architecture: str, options: dict, state: dict) -> int:
    """The head width of ``state``: the size of the weights that differ from a 1-output model's."""
    probe = _build({"architecture": architecture, "model_args": {**options, "num_outputs": 1}}, "the run's recipe")
    differ = [key for key, tensor in probe.state_dict().items() if key in state and tensor.shape != state[key].shape]
    return int(state[differ[0]].shape[0]) if differ else 1
