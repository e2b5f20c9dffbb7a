"""Predict with a zoo checkpoint on new SMILES, featurized by the featurizer its card names (OGB's
or dgllife's) and encoded exactly as in training.

>>> preds = predict("zinc_siggate", ["CCO", "c1ccccc1", "not a smiles"])  # a shipped name, or a .safetensors path
>>> preds.values.shape, preds.columns, [bad.reason for bad in preds.report]  # the bad SMILES' row is NaN
((3, 1), ['penalized_logp'], ['RDKit parse failure: syntax error (e.g. unclosed ring or bad token)'])
"""
from __future__ import annotations

import math
import os
from typing import NamedTuple, Sequence

import dgl
import numpy as np
import torch

from zoo._progress import progress as show_progress
from zoo.data.cards import DatasetError
from zoo.data.featurizers import Featurizer, InvalidSmilesError, featurizer_from_spec
from zoo.data.molecules import BadSmiles, featurize_smiles, format_report
from zoo.data.positional import add_positional_encodings
from zoo.engine.graph_trainer import outputs_or_nan
from zoo.models.capabilities import HasPositionalEncodings
from zoo.models.pretrained import load_pretrained


NONFINITE = "the model's prediction is not finite (its activations or attention overflow on this molecule)"


class TransferError(ValueError):
    """Invalid fine-tuning or prediction input; the message names the bad value and the fix."""


class Predictions(NamedTuple):
    """What :func:`predict` returns.

    ``values``: float64 ``[n_input, T]``, one row per input SMILES in input order (NaN rows for
    skipped ones); regression in target units, classification as probabilities. ``columns``:
    the T target names (the card's ``target_columns``, else ``"0"``, ``"1"``, ...). ``report``:
    :class:`~zoo.data.molecules.BadSmiles` of the skipped inputs (``row`` is the 0-based
    position, ``line`` the 1-based one). ``nonfinite``: those of valid molecules whose
    prediction is not finite (the model's activations overflow on them; NaN rows too).
    """

    values: np.ndarray
    columns: list
    report: list
    nonfinite: list


def is_classification(card: dict) -> bool:
    """Whether a model card's task is (binary, multi-label) classification."""
    return str(card.get("task", "")).endswith("classification")


def resolve_model(model) -> torch.nn.Module:
    """``model`` itself if it carries a ``.card``, else :func:`load_pretrained` of a name or path.

    Its featurizer is checked by the caller, which builds it (:func:`card_featurizer`).
    """
    if isinstance(model, (str, os.PathLike)):
        model = load_pretrained(model)
    card = getattr(model, "card", None)
    if not isinstance(card, dict):
        raise TransferError(
            f"{type(model).__name__} has no .card dict; pass a model from zoo.load_pretrained "
            "or a checkpoint name / path."
        )
    return model


def _num_outputs(card: dict) -> int:
    """Outputs per molecule: the card's ``model_args.num_outputs``, else its number of target columns."""
    return card.get("model_args", {}).get("num_outputs") or len(card.get("target_columns", [])) or 1


def card_featurizer(card: dict) -> Featurizer:
    """The featurizer a model card names, built from its stored spec; a card without one, one this
    installation does not build alike, or one that reads no SMILES is a :class:`TransferError`."""
    if "featurizer" not in card:
        raise TransferError(
            "the model card has no 'featurizer', so SMILES cannot be featurized as in its training; "
            "use a checkpoint trained on SMILES-featurized molecules (OGB smiles2graph features)."
        )
    try:
        featurizer = featurizer_from_spec(card["featurizer"])
    except DatasetError as err:
        raise TransferError(str(err)) from None
    if not featurizer.featurizes_smiles:
        raise TransferError(f"the model was trained on {featurizer.name!r} graphs, which no SMILES featurizer "
                            "makes; fine-tune or predict with a checkpoint trained on SMILES")
    return featurizer


def predict(model, smiles: Sequence[str] | str, *, batch_size: int = 128, strict: bool = False,
            progress: bool = True) -> Predictions:
    """Predictions of ``model`` (a loaded model with ``.card``, or a name / path) for ``smiles``.

    Invalid or empty SMILES are skipped (NaN rows) and listed in ``report``; with ``strict=True``
    they raise :class:`InvalidSmilesError`, as does an input where none is valid.

    >>> out = predict("zinc_siggate", ["CCO", "c1ccccc1O", "not a smiles"], progress=False)
    >>> out.values.shape, [bad.row for bad in out.report], str(out.values[2, 0])  # the invalid row is NaN
    ((3, 1), [2], 'nan')
    """
    model = resolve_model(model)
    smiles = [smiles] if isinstance(smiles, str) else list(smiles)
    if isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1:
        raise TransferError(f"batch_size must be an int >= 1, got {batch_size!r}")
    if not smiles:
        raise TransferError("no SMILES to predict: pass a non-empty list of SMILES strings")
    graphs, kept, problems = featurize_smiles(smiles, card_featurizer(model.card), progress=progress)
    report = [BadSmiles(i, i + 1, s, why) for i, s, why in problems]
    if report and (strict or not graphs):
        why = "strict mode" if strict else "none of them is valid"
        raise InvalidSmilesError(
            f"{len(report)} of {len(smiles)} SMILES cannot be featurized ({why}):\n{format_report(report)}\n"
            "Fix or remove them" + (", or pass strict=False to skip them." if strict else ".")
        )
    if isinstance(model, HasPositionalEncodings):
        add_positional_encodings(graphs, model.pe_spec(), progress=progress)
    device = next(model.parameters()).device
    model.eval()
    outputs = []
    with torch.no_grad():
        for start in show_progress(range(0, len(graphs), batch_size), "predicting", enabled=progress, unit="batches"):
            batch = dgl.batch(graphs[start:start + batch_size]).to(device)
            outputs.append(outputs_or_nan(model, batch, _num_outputs(model.card)))
    output = torch.cat(outputs).double()
    finite = torch.isfinite(output).all(1)
    output[~finite] = math.nan
    nonfinite = [BadSmiles(kept[i], kept[i] + 1, smiles[kept[i]], NONFINITE)
                 for i in (~finite).nonzero().flatten().tolist()]
    if is_classification(model.card):
        output = torch.sigmoid(output)
    columns = [str(c) for c in model.card.get("target_columns") or range(output.shape[1])]
    if len(columns) != output.shape[1]:
        raise TransferError(
            f"the model card lists {len(columns)} target column(s) {columns} but the model has "
            f"{output.shape[1]} output(s); fix the card's target_columns."
        )
    values = np.full((len(smiles), output.shape[1]), np.nan)
    values[kept] = output.numpy()
    return Predictions(values, columns, report, nonfinite)
