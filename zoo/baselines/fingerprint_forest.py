"""Morgan-fingerprint random forest (scikit-learn): the classic baseline for small MoleculeNet sets.

>>> x = morgan_fingerprints(["CCO", "c1ccccc1"])
>>> x.shape, x.dtype
((2, 2048), dtype('uint8'))
"""
from __future__ import annotations

from typing import Sequence

import numpy as np
from rdkit import Chem
from rdkit.Chem import rdFingerprintGenerator
from sklearn.ensemble import RandomForestClassifier, RandomForestRegressor

TASKS = ("regression", "classification")


def morgan_fingerprints(smiles: Sequence[str], radius: int = 2, n_bits: int = 2048) -> np.ndarray:
    """Bit vectors ``[n, n_bits]`` (uint8) of the Morgan / ECFP fingerprint of each SMILES.

    >>> bits = morgan_fingerprints(["CCO", "c1ccccc1O"])
    >>> bits.shape, bits.dtype.name
    ((2, 2048), 'uint8')
    """
    generator = rdFingerprintGenerator.GetMorganGenerator(radius=radius, fpSize=n_bits)
    rows = []
    for i, s in enumerate(smiles):
        mol = Chem.MolFromSmiles(s)
        if mol is None:
            raise ValueError(f"SMILES {i} ({s!r}) cannot be parsed by RDKit; drop it before fingerprinting")
        rows.append(generator.GetFingerprintAsNumPy(mol).astype(np.uint8))
    return np.stack(rows) if rows else np.zeros((0, n_bits), dtype=np.uint8)


def fit_predict_forest(train_smiles: Sequence[str], train_targets, test_smiles: Sequence[str], *,
                       task: str = "regression", seed: int = 0, n_estimators: int = 500,
                       radius: int = 2, n_bits: int = 2048) -> np.ndarray:
    """Fit one forest per target column on its labelled (non-NaN) training rows; predict the test rows.

    ``train_targets`` is ``[n]`` or ``[n, T]``; returns ``[m, T]`` float64 (the positive-class
    probability for classification).

    >>> fit_predict_forest(["CCO", "CCCO", "CCCCO", "c1ccccc1"], [1.0, 2.0, 3.0, 6.0], ["CCCCCO"],
    ...                    n_estimators=10).shape
    (1, 1)
    """
    if task not in TASKS:
        raise ValueError(f"task must be one of {TASKS}, got {task!r}")
    y = np.asarray(train_targets, dtype=np.float64)
    y = y[:, None] if y.ndim == 1 else y
    if y.shape[0] != len(train_smiles):
        raise ValueError(f"{len(train_smiles)} training SMILES but {y.shape[0]} target rows")
    x_train = morgan_fingerprints(train_smiles, radius, n_bits)
    x_test = morgan_fingerprints(test_smiles, radius, n_bits)
    out = np.empty((len(x_test), y.shape[1]))
    for t in range(y.shape[1]):
        labelled = ~np.isnan(y[:, t])
        if labelled.sum() < 2:
            raise ValueError(f"target column {t} has {int(labelled.sum())} labelled training rows; need at least 2")
        kind = RandomForestRegressor if task == "regression" else RandomForestClassifier
        forest = kind(n_estimators=n_estimators, random_state=seed, n_jobs=1).fit(x_train[labelled], y[labelled, t])
        if task == "regression":
            out[:, t] = forest.predict(x_test)
        else:
            proba = forest.predict_proba(x_test)
            out[:, t] = proba[:, list(forest.classes_).index(1.0)] if 1.0 in forest.classes_ else 0.0
    return out
