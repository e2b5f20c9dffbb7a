"""Pretrained checkpoints with model cards (a timm-style extension of the model registry).

A checkpoint is two files with one stem: ``NAME.safetensors``, the weights (metadata
``{"format": "zoo-pretrained/2"}``), and ``NAME.json``, the model card. Neither format can run
code when read. The card is a file of its own, not a string in the safetensors metadata, so that
people can read, diff and review it as indented JSON (the shipped cards are reviewed in git), while
the weights stay a plain safetensors file. Either path of the pair, or ``NAME`` in a folder, loads it.
The weights are written first, then the card, each atomically: a kill between the two leaves a
pair whose digests disagree, which is refused like any other mismatch.

The card says how to rebuild the model (``architecture`` + ``model_args`` for :func:`create_model`),
what it was trained on and how well it did. Integrity: the card's ``sha256`` record
(:func:`card_digests`) holds ``card``, the sha256 of :func:`canonical_card` (every field but
``sha256``, keys sorted, no whitespace), ``weights``, that of the tensors (:func:`weights_sha256`,
also the card's ``weights_sha256`` field), and ``checkpoint``, one sha256 over the canonical card
followed by the bytes ``weights`` hashes. :func:`load_pretrained` recomputes all three and refuses
a changed card, changed weights or an edited record, saying which.
They detect corruption and edits, not forgery (an editor can recompute them): to authenticate a
file, compare ``card["sha256"]["checkpoint"]`` with a value from a source you trust.

Legacy, for this release only: ``NAME.pt`` files of format ``zoo-pretrained/1`` (one ``torch.save``
of ``{"format", "card", "state_dict"}``) are read with ``torch.load(weights_only=True)`` and their
weights hash checked; their card has no digest, so a FutureWarning asks to convert them with
``save_pretrained(model, model.card, "NAME.safetensors")``. Only the new format is written.
Export of a training run is :mod:`zoo.engine.export`.

>>> model = load_pretrained("zinc_siggate")
>>> round(model.card["metrics"]["test"]["mae"], 4)  # as trained, recorded in its card
0.069
"""
from __future__ import annotations

import difflib
import hashlib
import json
import warnings
from pathlib import Path

import safetensors
import safetensors.torch
import torch

from zoo._atomic import atomic_write
from zoo._safe_load import load_weights_only, reason
from zoo.data import DatasetError, download, featurizer_from_spec
from zoo.data.mirror import resolve_roots, sha256_file
from zoo.models.registry import PRETRAINED_DIR, REMOTE_PRETRAINED, create_model, list_models, pretrained_names

FORMAT = "zoo-pretrained/2"
LEGACY_FORMAT = "zoo-pretrained/1"
REQUIRED_CARD_KEYS = ("architecture", "model_args")
_AS_PATH = (".safetensors", ".json", ".pt")
_AGAIN = "export or download the checkpoint again"


class PretrainedError(ValueError):
    """A pretrained checkpoint (or the run or card behind one) is not usable; the message says why."""


def weights_sha256(state_dict) -> str:
    """sha256 over ``f"{key}\\0{dtype}\\0{shape}\\0"`` and the raw bytes of each tensor, keys sorted.

    ``shape`` is the sizes joined by commas (``"3,4"``; ``""`` for a scalar), ``dtype`` as
    ``str(tensor.dtype)``; the bytes are those of the contiguous CPU tensor.
    """
    digest = hashlib.sha256()
    for chunk in _weight_bytes(state_dict):
        digest.update(chunk)
    return digest.hexdigest()


def canonical_card(card: dict) -> bytes:
    """The bytes the card digests cover: ``card`` without ``sha256``, as
    ``json.dumps(..., sort_keys=True, separators=(",", ":"))`` (ASCII) encoded."""
    return json.dumps({k: v for k, v in card.items() if k != "sha256"}, sort_keys=True, separators=(",", ":")).encode()


def card_digests(card: dict, state_dict) -> dict:
    """``{"card", "weights", "checkpoint"}`` sha256 hex digests of ``card`` and ``state_dict`` (see the module doc)."""
    canonical = canonical_card(card)
    weights, checkpoint = hashlib.sha256(), hashlib.sha256(canonical)
    for chunk in _weight_bytes(state_dict):
        weights.update(chunk)
        checkpoint.update(chunk)
    return {"card": hashlib.sha256(canonical).hexdigest(), "weights": weights.hexdigest(),
            "checkpoint": checkpoint.hexdigest()}


def save_pretrained(model: torch.nn.Module, card: dict, path, *, max_bytes: int | None = None) -> Path:
    """Write ``model``'s weights to ``NAME.safetensors`` and ``card`` to ``NAME.json``; returns the first.

    ``path``: either file of the pair. ``card["architecture"]`` and ``card["model_args"]`` must
    rebuild a model with the same weight names and shapes; the card must be plain JSON data. It
    gains ``weights_sha256``, ``num_parameters`` and its ``sha256`` record (an old one is replaced).
    ``max_bytes``: refuse, before writing, weights larger than this. Each file is written atomically.

    >>> import os, tempfile
    >>> model = load_pretrained("zinc_siggate")
    >>> with tempfile.TemporaryDirectory() as folder:
    ...     path = save_pretrained(model, model.card, os.path.join(folder, "copy.safetensors"))
    ...     sorted(os.listdir(folder)), load_pretrained(path).card["num_parameters"]
    (['copy.json', 'copy.safetensors'], 617733)
    """
    path = Path(path)
    if path.suffix not in (".safetensors", ".json"):
        raise PretrainedError(f"{path}: name a checkpoint NAME.safetensors (its card is written beside it as "
                              "NAME.json); the .pt format is read for this release but no longer written")
    weights_path, card_path = path.with_suffix(".safetensors"), path.with_suffix(".json")
    card, state = _checked(model, card)
    weights = safetensors.torch.save(state, metadata={"format": FORMAT})
    if max_bytes is not None and len(weights) > max_bytes:
        raise PretrainedError(f"{weights_path.name} would be {len(weights) / 1e6:.1f} MB, over the "
                              f"{max_bytes / 1e6:g} MB limit")
    card["sha256"] = card_digests(card, state)
    text = (json.dumps(card, indent=2) + "\n").encode()
    atomic_write(weights_path, lambda handle: handle.write(weights))
    atomic_write(card_path, lambda handle: handle.write(text))
    return weights_path


def load_pretrained(name_or_path, *, check_featurizer: bool = True, directory=None) -> torch.nn.Module:
    """The model of a pretrained checkpoint, in eval mode, with its card as ``model.card``.

    ``name_or_path``: a name in ``directory`` (default :data:`PRETRAINED_DIR`), e.g.
    ``"zinc_siggate"``, or the path of a ``.safetensors`` file or its ``.json`` card (or of a
    legacy ``.pt`` file). The card and weights digests are checked first. ``check_featurizer``:
    refuse weights whose molecule featurizer differs from this installation's (see
    :func:`zoo.data.featurizer_from_spec`).

    >>> model = load_pretrained("zinc_siggate")  # shipped with the package
    >>> model.training, model.card["num_parameters"], model.card["task"]
    (False, 617733, 'graph_regression')
    """
    path = _resolve(name_or_path, directory)
    card, state = _read_legacy(path) if path.suffix == ".pt" else _read_verified(path)
    if check_featurizer and "featurizer" in card:
        try:
            featurizer_from_spec(card["featurizer"])
        except DatasetError as err:
            raise PretrainedError(f"{path}: {err}") from None
    model = model_from_card(card, path)
    try:
        model.load_state_dict(state, strict=True)
    except RuntimeError as err:
        first = str(err).strip().splitlines()[0]
        raise PretrainedError(f"{path}: the weights do not fit {card['architecture']!r} built from the card's "
                              f"model_args: {first}") from None
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


def _weight_bytes(state_dict):
    """The byte chunks :func:`weights_sha256` hashes, in order."""
    for key in sorted(state_dict):
        tensor = state_dict[key].detach().cpu().contiguous()
        shape = ",".join(str(size) for size in tensor.shape)
        yield f"{key}\0{tensor.dtype}\0{shape}\0".encode()
        yield tensor.reshape(-1).view(torch.uint8).numpy().tobytes()


def _checked(model: torch.nn.Module, card: dict) -> tuple[dict, dict]:
    """The card as it reads back from JSON, with ``weights_sha256`` and ``num_parameters``, and the
    weights as separate contiguous CPU tensors; refuses a card that does not rebuild ``model``."""
    try:
        card = json.loads(json.dumps({k: v for k, v in card.items() if k != "sha256"}))
    except (TypeError, ValueError) as err:
        raise PretrainedError(f"the card must be plain JSON data (str, number, bool, None, list, dict): {err}") from None
    state = {key: tensor.detach().to("cpu", copy=True).contiguous() for key, tensor in model.state_dict().items()}
    expected = model_from_card(card, "the card").state_dict()
    lazy = torch.nn.parameter.UninitializedTensorMixin  # e.g. LINKX's one row per node: sized when loaded
    differ = sorted(set(state) ^ set(expected)) or [k for k in state if not isinstance(expected[k], lazy)
                                                    and state[k].shape != expected[k].shape]
    if differ:
        raise PretrainedError(f"the card's architecture {card['architecture']!r} with model_args "
                              f"{card['model_args']} does not rebuild this model: weights differ at {differ[:5]}; "
                              "record the arguments the model was created with")
    card.update(weights_sha256=weights_sha256(state), num_parameters=sum(p.numel() for p in model.parameters()))
    return card, state


def _read_verified(weights_path: Path) -> tuple[dict, dict]:
    """Card and weights of a safetensors/JSON pair whose digests match; else one-line errors."""
    card_path = weights_path.with_suffix(".json")
    try:
        card = json.loads(card_path.read_text(encoding="utf-8"), object_pairs_hook=_unique_keys)
    except (OSError, UnicodeDecodeError, ValueError) as err:
        raise PretrainedError(f"model card {card_path} is not readable JSON ({reason(err)}); {_AGAIN}") from None
    if not isinstance(card, dict):
        raise PretrainedError(f"model card {card_path} holds a {type(card).__name__}, not a JSON object; {_AGAIN}")
    try:
        with safetensors.safe_open(weights_path, "pt") as handle:
            found = (handle.metadata() or {}).get("format")
            state = {key: handle.get_tensor(key) for key in handle.keys()}
    except Exception as err:  # SafetensorError, or anything else a foreign file provokes
        raise PretrainedError(f"{weights_path} is not a readable safetensors file ({reason(err)}); "
                              f"{_AGAIN}") from None
    if found != FORMAT:
        raise PretrainedError(f"{weights_path} is not a zoo pretrained checkpoint (format {found!r}, expected "
                              f"{FORMAT!r}); write one with zoo.save_pretrained or tools/export_pretrained.py")
    recorded = card.get("sha256")
    if not isinstance(recorded, dict):
        raise PretrainedError(f"model card {card_path} has no sha256 record, so it cannot be checked; {_AGAIN}")
    actual = card_digests(card, state)
    same = {part: actual[part] == recorded.get(part) for part in actual}
    if same["checkpoint"] != (same["card"] and same["weights"]):  # the parts and the whole disagree: the record
        raise PretrainedError(f"the sha256 record of model card {card_path} was edited (computed {actual}, recorded "
                              f"{recorded}); {_AGAIN}")
    if not same["card"] and not same["weights"]:
        raise PretrainedError(f"both the card {card_path} and the weights {weights_path} changed since they were "
                              f"written (card sha256 {actual['card']}, recorded {recorded.get('card')}; weights "
                              f"sha256 {actual['weights']}, recorded {recorded.get('weights')}); {_AGAIN}")
    if not same["card"]:
        raise PretrainedError(f"the model card {card_path} changed since it was written (canonical card sha256 "
                              f"{actual['card']}, recorded {recorded.get('card')}): a field was edited; {_AGAIN}")
    if not same["weights"]:
        raise PretrainedError(f"the weights {weights_path} changed since their card was written (weights sha256 "
                              f"{actual['weights']}, the card records {recorded.get('weights')}): the file is "
                              f"corrupt or replaced; {_AGAIN}")
    return card, state


def _read_legacy(path: Path) -> tuple[dict, dict]:
    """Card and weights of a ``zoo-pretrained/1`` ``.pt`` file, read with ``weights_only=True``."""
    payload = load_weights_only(path, lambda why: PretrainedError(
        f"{path} is not a readable zoo pretrained checkpoint ({why}); "
        "write one with zoo.save_pretrained or tools/export_pretrained.py"))
    found = payload.get("format") if isinstance(payload, dict) else None
    if found != LEGACY_FORMAT or not {"card", "state_dict"} <= payload.keys():
        raise PretrainedError(f"{path} is not a zoo pretrained checkpoint (format {found!r}, expected "
                              f"{LEGACY_FORMAT!r} in a .pt file); write one with zoo.save_pretrained "
                              "or tools/export_pretrained.py")
    card, state = dict(payload["card"]), payload["state_dict"]
    actual = weights_sha256(state)
    if actual != card.get("weights_sha256"):
        raise PretrainedError(f"checkpoint weights do not match their recorded sha256 in {path} "
                              f"(recorded {card.get('weights_sha256')!r}, computed {actual!r}): the file is "
                              f"corrupt or edited; {_AGAIN}")
    warnings.warn(f"{path} is a {LEGACY_FORMAT} .pt checkpoint, read for this release only, and its card is not "
                  f"covered by a sha256; convert it with zoo.save_pretrained(model, model.card, "
                  f"{str(path.with_suffix('.safetensors'))!r})", FutureWarning, stacklevel=3)
    return card, state


def _unique_keys(pairs: list) -> dict:
    """A JSON object as a dict; a repeated key (a reader sees one value, the loader another) is refused."""
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        raise ValueError(f"key(s) {repeated} appear more than once in one object")
    return dict(pairs)


def _fetched(name: str) -> Path:
    """The weights of remote checkpoint ``name`` in ``$ZOO_CACHE/pretrained``, downloaded (with a
    progress bar) unless a copy with the pinned sha256 is there; each file is checked on every load."""
    remote = REMOTE_PRETRAINED[name]
    folder = resolve_roots().cache / "pretrained"
    weights = folder / f"{name}.safetensors"
    for path, url, digest in ((weights, remote.weights_url, remote.weights_sha256),
                              (weights.with_suffix(".json"), remote.card_url, remote.card_sha256)):
        if not (path.is_file() and sha256_file(path) == digest.lower()):
            try:
                download(url, path, digest)
            except DatasetError as err:
                raise PretrainedError(f"pretrained model {name!r}: {err}") from None
    return weights


def _resolve(name_or_path, directory) -> Path:
    """The weights file (``.safetensors`` or legacy ``.pt``) of a checkpoint name in ``directory`` or a path."""
    text = str(name_or_path)
    path = Path(name_or_path)
    if isinstance(name_or_path, Path) or path.suffix in _AS_PATH or "/" in text or "\\" in text:
        if path.suffix == ".json":
            path = path.with_suffix(".safetensors")
        if path.suffix not in (".safetensors", ".pt"):
            raise PretrainedError(f"{path} is not a checkpoint path: pass NAME.safetensors or its card NAME.json "
                                  "(or a legacy NAME.pt)")
        for needed in (path, path.with_suffix(".json")) if path.suffix == ".safetensors" else (path,):
            if not needed.is_file():
                raise PretrainedError(f"no pretrained checkpoint file at {needed}; check the path, or pass a "
                                      "name from zoo.list_models(pretrained=True)")
        return path
    folder = Path(directory or PRETRAINED_DIR)
    for suffix in (".safetensors", ".pt"):
        if (folder / f"{text}{suffix}").is_file():
            return _resolve(folder / f"{text}{suffix}", None)
    if directory is None and text in REMOTE_PRETRAINED:
        return _fetched(text)
    known = sorted({*pretrained_names(folder), *(REMOTE_PRETRAINED if directory is None else ())})
    near = difflib.get_close_matches(text, known, n=1)
    hint = f" Did you mean {near[0]!r}?" if near else ""
    raise PretrainedError(f"no pretrained model named {text!r} in {folder}.{hint} Available: {', '.join(known) or 'none'}.")
