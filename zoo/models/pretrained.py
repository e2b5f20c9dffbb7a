"""Pretrained checkpoints with model cards (a timm-style extension of the model registry).

A pretrained file is one ``torch.save`` of ``{"format", "card", "state_dict"}``. The card says
how to rebuild the model (``architecture`` + ``model_args`` for :func:`create_model`), what it was
trained on and how well it did; ``weights_sha256`` guards the weights against corruption. The
card is plain data: only its architecture and model arguments are checked here (through the
registry, which also lists the shipped names). Export of a training run is :mod:`zoo.engine.export`.

>>> model = load_pretrained("zinc_siggate")                      # doctest: +SKIP
>>> model.card["metrics"]["test"]                                # doctest: +SKIP
"""
from __future__ import annotations

import difflib
import hashlib
import io
import json
from pathlib import Path

import torch

from zoo._atomic import atomic_write
from zoo.data import DatasetError, check_featurizer_spec
from zoo.models.registry import PRETRAINED_DIR, create_model, list_models, pretrained_names

FORMAT = "zoo-pretrained/1"
REQUIRED_CARD_KEYS = ("architecture", "model_args")


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


def save_pretrained(model: torch.nn.Module, card: dict, path, *, max_bytes: int | None = None) -> Path:
    """Write ``model``'s weights and ``card`` (plus ``weights_sha256``, ``num_parameters``) to ``path``.

    ``card["architecture"]`` and ``card["model_args"]`` must rebuild a model with the same
    weight names and shapes; the card must be plain JSON data. ``max_bytes``: refuse, before
    writing, a file larger than this. The file is written atomically.
    """
    path = Path(path)
    buffer = io.BytesIO()
    torch.save(_payload(model, card), buffer)
    if max_bytes is not None and buffer.tell() > max_bytes:
        raise PretrainedError(f"{path.name} would be {buffer.tell() / 1e6:.1f} MB, over the "
                              f"{max_bytes / 1e6:g} MB limit")
    atomic_write(path, lambda handle: handle.write(buffer.getvalue()))
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
    model = model_from_card(card, path)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        raise PretrainedError(f"{path}: the weights do not fit {card['architecture']!r} built from the card's "
                              f"model_args: {err}") from None
    model.eval()
    model.card = card
    return model


def model_from_card(card: dict, where="the card") -> torch.nn.Module:
    """A fresh model of ``card["architecture"]`` built with ``card["model_args"]``; a card the
    registry cannot build raises :class:`PretrainedError` naming ``where`` (a path or a phrase)."""
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


def _payload(model: torch.nn.Module, card: dict) -> dict:
    try:
        json.dumps(card)
    except (TypeError, ValueError) as err:
        raise PretrainedError(f"the card must be plain JSON data (str, number, bool, None, list, dict): {err}") from None
    state = {key: tensor.detach().cpu() for key, tensor in model.state_dict().items()}
    expected = model_from_card(card, "the card").state_dict()
    differ = sorted(set(state) ^ set(expected)) or [k for k in state if state[k].shape != expected[k].shape]
    if differ:
        raise PretrainedError(f"the card's architecture {card['architecture']!r} with model_args "
                              f"{card['model_args']} does not rebuild this model: weights differ at {differ[:5]}; "
                              "record the arguments the model was created with")
    card = {**card, "weights_sha256": weights_sha256(state),
            "num_parameters": sum(p.numel() for p in model.parameters())}
    return {"format": FORMAT, "card": card, "state_dict": state}


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
