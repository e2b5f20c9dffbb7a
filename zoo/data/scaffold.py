"""Deterministic Bemis-Murcko scaffold split, the rule OGB's molecule datasets were split with.

Rule: group molecules by scaffold (``MurckoScaffoldSmiles(includeChirality=True)``; acyclic
and unparseable molecules share the empty scaffold ``""``); sort the groups by (size, first
index) descending; walk them in that order, putting a group in train while train stays within
``frac_train * n``, else in valid while train + valid stays within ``(frac_train + frac_valid) * n``,
else in test. No randomness: the same SMILES list always gives the same split.

>>> split = scaffold_split(["c1ccccc1C", "c1ccccc1O", "CCO", "C1CCCCC1N", "CC", "c1ccncc1"])
>>> [len(split[k]) for k in ("train", "val", "test")]
[4, 1, 1]
"""
from __future__ import annotations

from collections import defaultdict
from typing import Sequence

from rdkit import Chem
from rdkit.Chem.Scaffolds import MurckoScaffold
from rdkit.rdBase import BlockLogs

from zoo._progress import progress as show_progress


def murcko_scaffold(smiles: str, include_chirality: bool = True) -> str:
    """Canonical SMILES of the Murcko scaffold; ``""`` for acyclic or unparseable molecules.

    >>> murcko_scaffold("Cc1ccccc1CCO"), murcko_scaffold("CCO"), murcko_scaffold("C1CC")
    ('c1ccccc1', '', '')
    """
    if not isinstance(smiles, str) or not smiles.strip():
        return ""
    with BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
    if mol is None:
        return ""
    return MurckoScaffold.MurckoScaffoldSmiles(mol=mol, includeChirality=include_chirality)


def scaffold_split(
    smiles: Sequence[str],
    frac_train: float = 0.8,
    frac_valid: float = 0.1,
    *,
    include_chirality: bool = True,
    progress: bool = False,
) -> dict[str, list[int]]:
    """Split positions ``0..len(smiles)-1`` into ``{"train", "val", "test"}`` by scaffold.

    >>> scaffold_split(["c1ccccc1O", "c1ccccc1N", "C1CCCCC1O", "CCO", "CCN"], 0.6, 0.2)  # 0, 1: benzene
    {'train': [2, 3, 4], 'val': [0, 1], 'test': []}
    """
    scaffolds = [
        murcko_scaffold(s, include_chirality)
        for s in show_progress(smiles, "scaffolds", enabled=progress, unit="molecules")
    ]
    return split_by_scaffold(scaffolds, frac_train, frac_valid)


def split_by_scaffold(
    scaffolds: Sequence[str], frac_train: float = 0.8, frac_valid: float = 0.1
) -> dict[str, list[int]]:
    """The split rule of the module docstring, from precomputed scaffold strings.

    >>> split_by_scaffold(["a", "a", "b", "c", "a", "b"], 0.5, 0.25)
    {'train': [0, 1, 4], 'val': [3], 'test': [2, 5]}
    """
    if not (0 < frac_train <= 1 and 0 <= frac_valid and frac_train + frac_valid <= 1):
        raise ValueError(
            f"need 0 < frac_train <= 1, frac_valid >= 0 and frac_train + frac_valid <= 1; "
            f"got frac_train={frac_train}, frac_valid={frac_valid}"
        )
    groups: dict[str, list[int]] = defaultdict(list)
    for i, scaffold in enumerate(scaffolds):
        groups[scaffold].append(i)
    ordered = sorted(groups.values(), key=lambda g: (len(g), g[0]), reverse=True)
    n = len(scaffolds)
    train_cut, valid_cut = frac_train * n, (frac_train + frac_valid) * n
    split: dict[str, list[int]] = {"train": [], "val": [], "test": []}
    for group in ordered:
        if len(split["train"]) + len(group) <= train_cut:
            split["train"].extend(group)
        elif len(split["train"]) + len(split["val"]) + len(group) <= valid_cut:
            split["val"].extend(group)
        else:
            split["test"].extend(group)
    return {k: sorted(v) for k, v in split.items()}
