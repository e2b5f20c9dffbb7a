"""One molecular featurizer for every molecule dataset, and SMILES CSV reading with a bad-row report.

The featurizer is OGB's ``smiles2graph`` spec: 9 categorical atom features and 3 categorical
bond features (``ogb.utils.features``), each bond stored as two directed edges (i->j, j->i) in
RDKit bond order. ZINC-from-SMILES, molhiv, molpcba, peptides and user CSVs all use it, so
pretrained weights transfer between them. :data:`FEATURIZER_SPEC` identifies it in checkpoints.

>>> g = smiles_to_graph("CCO")
>>> g.num_nodes(), g.num_edges(), tuple(g.ndata["feat"].shape), tuple(g.edata["feat"].shape)
(3, 4, (3, 9), (4, 3))
"""
from __future__ import annotations

import csv
import gzip
import math
import os
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple, Sequence

import dgl
import numpy as np
import ogb
import rdkit
import torch
from ogb.utils.features import (
    atom_to_feature_vector,
    bond_to_feature_vector,
    get_atom_feature_dims,
    get_bond_feature_dims,
)
from rdkit import Chem, RDConfig
from rdkit.Chem import Crippen
from rdkit.rdBase import BlockLogs
from tqdm.auto import tqdm

from zoo.data.cards import DatasetError

FEATURIZER_SPEC = {
    "name": "ogb-smiles2graph",
    "ogb_version": ogb.__version__,
    "rdkit_version": rdkit.__version__,
    "atom_feature_dims": list(get_atom_feature_dims()),
    "bond_feature_dims": list(get_bond_feature_dims()),
}
"""What a checkpoint stores about the featurizer. Only ``name`` and the feature dims must match
for weights to transfer (see :func:`check_featurizer_spec`); the versions are informational."""

_MUST_MATCH = ("name", "atom_feature_dims", "bond_feature_dims")


class InvalidSmilesError(DatasetError):
    """A SMILES string that RDKit cannot turn into a molecule with at least one atom."""


@dataclass(frozen=True)
class BadSmiles:
    """One skipped CSV row: ``row`` is the 0-based data row, ``line`` the 1-based file line."""

    row: int
    line: int
    smiles: str
    reason: str

    def __str__(self) -> str:
        return f"line {self.line} (row {self.row}): {self.smiles!r}: {self.reason}"


class SmilesTable(NamedTuple):
    """What :func:`read_smiles_csv` returns (unpacks as a tuple, or use the names).

    ``rows`` are the 0-based data-row indices (header excluded) of the kept molecules, so
    ``graphs[i]`` and ``targets[i]`` come from data row ``rows[i]`` of the file.
    """

    graphs: list
    targets: torch.Tensor
    rows: torch.Tensor
    report: list
    smiles: list


def check_featurizer_spec(stored: dict, current: dict | None = None) -> None:
    """Raise :class:`DatasetError` unless ``stored`` (e.g. from a checkpoint) matches ``current``.

    >>> check_featurizer_spec(dict(FEATURIZER_SPEC, ogb_version="0.0"))  # versions may differ
    """
    current = FEATURIZER_SPEC if current is None else current
    diff = [f"{k}: stored {stored.get(k)!r}, current {current.get(k)!r}"
            for k in _MUST_MATCH if stored.get(k) != current.get(k)]
    if diff:
        raise DatasetError(
            "Featurizer mismatch, so embeddings trained on one cannot read the other: "
            + "; ".join(diff) + ". Featurize the data with the checkpoint's featurizer."
        )


def smiles_problem(smiles) -> str | None:
    """Why ``smiles`` cannot be featurized (a short reason), or None if it can.

    >>> smiles_problem("C1CC"), smiles_problem("")
    ('RDKit parse failure: syntax error (e.g. unclosed ring or bad token)', 'empty SMILES')
    """
    return _parse(smiles)[1]


def smiles_to_graph(smiles: str) -> dgl.DGLGraph:
    """Featurize one SMILES string; raise :class:`InvalidSmilesError` with the reason if invalid.

    ``ndata['feat']`` is int64 ``[N, 9]``, ``edata['feat']`` int64 ``[E, 3]`` (E = 2 x bonds).
    """
    mol, problem = _parse(smiles)
    if problem:
        raise InvalidSmilesError(f"Cannot featurize SMILES {smiles!r}: {problem}.")
    return mol_to_graph(mol)


def mol_to_graph(mol: Chem.Mol) -> dgl.DGLGraph:
    """Featurize an RDKit molecule with OGB's atom/bond feature functions (see module doc)."""
    x = np.array([atom_to_feature_vector(atom) for atom in mol.GetAtoms()], dtype=np.int64)
    x = x.reshape(-1, len(FEATURIZER_SPEC["atom_feature_dims"]))
    bonds = mol.GetBonds()
    src = np.empty(2 * len(bonds), dtype=np.int64)
    dst = np.empty(2 * len(bonds), dtype=np.int64)
    efeat = np.empty((2 * len(bonds), len(FEATURIZER_SPEC["bond_feature_dims"])), dtype=np.int64)
    for k, bond in enumerate(bonds):
        i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
        src[2 * k], dst[2 * k], src[2 * k + 1], dst[2 * k + 1] = i, j, j, i
        efeat[2 * k] = efeat[2 * k + 1] = bond_to_feature_vector(bond)
    g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=len(x))
    g.ndata["feat"] = torch.from_numpy(x)
    g.edata["feat"] = torch.from_numpy(efeat)
    return g


def featurize_smiles(smiles: Sequence[str], *, progress: bool = True, desc: str = "featurizing"):
    """Featurize many SMILES; return ``(graphs, kept_positions, problems)``.

    ``problems`` is a list of ``(position, smiles, reason)`` for the skipped ones.
    """
    graphs, kept, problems = [], [], []
    with BlockLogs():  # RDKit's own stderr messages; the reasons are collected instead
        for i, s in enumerate(tqdm(smiles, desc=desc, disable=not progress, leave=False)):
            mol, problem = _parse(s)
            if problem:
                problems.append((i, s, problem))
                continue
            graphs.append(mol_to_graph(mol))
            kept.append(i)
    return graphs, kept, problems


def read_smiles_csv(
    path: str | Path,
    smiles_col: str,
    target_cols: Sequence[str] = (),
    *,
    strict: bool = False,
    min_rows: int = 2,
    limit: int | None = None,
    progress: bool = True,
) -> SmilesTable:
    """Read a CSV (or .csv.gz) of SMILES and targets and featurize it.

    Invalid or empty SMILES are skipped and listed in ``report`` (:class:`BadSmiles`: row, file
    line, SMILES, reason); with ``strict=True`` they raise :class:`InvalidSmilesError` instead.
    Empty or ``nan`` target cells become NaN (mask them per task); any other non-number is an
    error naming the line. ``targets`` is float32 ``[n, len(target_cols)]``. Fewer than
    ``min_rows`` usable molecules is an error. ``limit`` reads only the first ``limit`` data rows.
    Blank lines are skipped and not counted as rows; ``line`` is the true file line all the same.

    >>> graphs, targets, rows, report, smiles = read_smiles_csv("mols.csv", "smiles", ["y"])  # doctest: +SKIP
    """
    path = Path(path)
    target_cols = [target_cols] if isinstance(target_cols, str) else list(target_cols)
    header, records = read_csv_rows(path, limit)
    cols = column_indices(path, header, [smiles_col, *target_cols])
    smiles, lines = [], []
    targets = np.empty((len(records), len(target_cols)), dtype=np.float64)
    for r, (line, cells) in enumerate(records):
        cells = cells + [""] * (len(header) - len(cells))
        smiles.append(cells[cols[0]].strip())
        lines.append(line)
        for t, c in enumerate(cols[1:]):
            targets[r, t] = _to_float(cells[c], path, line, target_cols[t])
    graphs, kept, problems = featurize_smiles(smiles, progress=progress, desc=f"featurizing {path.name}")
    report = [BadSmiles(i, lines[i], s, why) for i, s, why in problems]
    if report and strict:
        raise InvalidSmilesError(
            f"{path}: {len(report)} invalid SMILES in column {smiles_col!r} (strict mode):\n"
            + format_report(report)
            + "\nFix or remove these rows, or read with strict=False to skip them."
        )
    if len(kept) < min_rows:
        detail = f" Skipped rows:\n{format_report(report)}" if report else ""
        raise DatasetError(
            f"{path}: {len(kept)} usable molecule(s) in column {smiles_col!r} out of "
            f"{len(records)} data rows; at least {min_rows} are needed.{detail}"
        )
    kept_t = torch.tensor(kept, dtype=torch.long)
    return SmilesTable(
        graphs=graphs,
        targets=torch.from_numpy(targets[kept]).float(),
        rows=kept_t,
        report=report,
        smiles=[smiles[i] for i in kept],
    )


def penalized_logp(smiles: str) -> float:
    """Penalized logP: Crippen logP - SA score - max(0, largest ring size - 6).

    SA is RDKit Contrib's ``SA_Score/sascorer.calculateScore`` (Ertl and Schuffenhauer 2009);
    the ring penalty uses ``GetRingInfo().AtomRings()`` (0 for acyclic molecules).

    >>> round(penalized_logp("c1ccccc1"), 4)
    0.6866
    """
    mol, problem = _parse(smiles)
    if problem:
        raise InvalidSmilesError(f"Cannot score SMILES {smiles!r}: {problem}.")
    rings = mol.GetRingInfo().AtomRings()
    cycle = max(0, max((len(r) for r in rings), default=0) - 6)
    return Crippen.MolLogP(mol) - _sascorer().calculateScore(mol) - cycle


def _sascorer():
    """RDKit Contrib's SA_Score module, imported the documented way (its folder on sys.path)."""
    folder = os.path.join(RDConfig.RDContribDir, "SA_Score")
    if folder not in sys.path:
        if not os.path.isfile(os.path.join(folder, "sascorer.py")):
            raise DatasetError(
                f"RDKit's Contrib SA_Score is missing ({folder}); penalized logP needs it. "
                "Install an RDKit build that ships Contrib (the PyPI 'rdkit' wheel does)."
            )
        sys.path.append(folder)
    import sascorer  # noqa: PLC0415  (found only after the path change above)

    return sascorer


def format_report(report: Sequence[BadSmiles], max_lines: int = 20) -> str:
    """The skipped rows, one per line, at most ``max_lines`` then a count of the rest."""
    shown = [f"  {bad}" for bad in report[:max_lines]]
    if len(report) > max_lines:
        shown.append(f"  ... and {len(report) - max_lines} more")
    return "\n".join(shown)


def _parse(smiles) -> tuple[Chem.Mol | None, str | None]:
    """RDKit molecule (parsed exactly as OGB does) or the reason it cannot be featurized."""
    if smiles is None or (isinstance(smiles, float) and math.isnan(smiles)):
        return None, "empty SMILES"
    if not isinstance(smiles, str):
        return None, f"not a string ({type(smiles).__name__})"
    if not smiles.strip():
        return None, "empty SMILES"
    with BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            return None, _parse_failure(smiles)
    if mol.GetNumAtoms() == 0:
        return None, "zero atoms after parsing"
    return mol, None


def _parse_failure(smiles: str) -> str:
    """RDKit's reason for rejecting ``smiles``: syntax, or the sanitization message."""
    raw = Chem.MolFromSmiles(smiles, sanitize=False)
    if raw is None:
        return "RDKit parse failure: syntax error (e.g. unclosed ring or bad token)"
    try:
        Chem.SanitizeMol(raw)
    except Exception as exc:  # RDKit raises several sanitization exception types
        return f"RDKit parse failure: {str(exc).strip() or type(exc).__name__}"
    return "RDKit parse failure"


def read_csv_rows(path: Path, limit: int | None) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and ``(file line, cells)`` of each non-blank data row."""
    if not path.is_file():
        raise DatasetError(f"CSV file {path} does not exist.")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise DatasetError(f"{path} is empty; expected a header row with column names.")
            records = []
            for cells in reader:
                if limit is not None and len(records) >= limit:
                    break
                if any(cell.strip() for cell in cells):
                    records.append((reader.line_num, cells))
    except (UnicodeDecodeError, csv.Error, OSError, EOFError) as err:
        raise DatasetError(f"{path} cannot be read as a UTF-8 CSV{' (gzip)' if path.suffix == '.gz' else ''}: "
                           f"{err}. Save it as UTF-8 CSV (e.g. 'CSV UTF-8' in Excel).") from None
    return [h.strip() for h in header], records


def column_indices(path: Path, header: list[str], wanted: list[str]) -> list[int]:
    """Index of each wanted column; a missing one is an error listing the columns there."""
    missing = [c for c in wanted if c not in header]
    if missing:
        raise DatasetError(
            f"{path}: column(s) {missing} not found. Columns in the file: {header}. "
            "Pass the SMILES and target column names exactly as in the header."
        )
    return [header.index(c) for c in wanted]


def _to_float(cell: str, path: Path, line: int, column: str) -> float:
    """A target cell as float; empty / nan / NA become NaN."""
    cell = cell.strip()
    if cell.lower() in ("", "nan", "na", "n/a", "none", "null"):
        return math.nan
    try:
        return float(cell)
    except ValueError:
        raise DatasetError(
            f"{path}, line {line}: target column {column!r} holds {cell!r}, which is not a "
            "number. Use a number, or leave the cell empty for a missing label."
        ) from None
