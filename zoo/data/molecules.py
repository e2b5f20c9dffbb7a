"""SMILES tables: a CSV (or .csv.gz) of SMILES and targets read and featurized, with a report of
the rows skipped for invalid SMILES; and penalized logP, a target computed from SMILES.

The featurizer is an object (:mod:`zoo.data.featurizers`), by default OGB's ``smiles2graph``
layout; a dataset card, recipe or checkpoint card names the one to use.

>>> from pathlib import Path
>>> _ = Path("mols.csv").write_text("smiles,y\\nCCO,1.0\\nc1ccccc1,2.5\\n")
>>> dgllife = featurizer_from_spec("dgllife-canonical")
>>> table = read_smiles_csv("mols.csv", "smiles", ["y"], featurizer=dgllife)
>>> table.graphs[0].ndata["feat"].shape  # ethanol's 3 heavy atoms, dgllife's 74 atom features
torch.Size([3, 74])
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

import numpy as np
import torch
from rdkit import RDConfig
from rdkit.Chem import Crippen
from rdkit.rdBase import BlockLogs

from zoo._progress import progress as show_progress
from zoo.data.cards import DatasetError
from zoo.data.featurizers import (
    DEFAULT_FEATURIZER,
    Featurizer,
    InvalidSmilesError,
    featurizer_from_spec,
    parse_smiles,
)


class CsvError(DatasetError):
    """The CSV itself is unusable as given (missing, unreadable, a malformed row, a missing or
    repeated column, a target cell that is not a finite number); the message names it and the fix."""


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


def featurize_smiles(smiles: Sequence[str], featurizer: Featurizer | None = None, *, progress: bool = True,
                     desc: str = "featurizing"):
    """Featurize many SMILES with ``featurizer`` (default OGB's); return ``(graphs, kept_positions, problems)``.

    ``problems`` is a list of ``(position, smiles, reason)`` for the skipped ones.
    """
    featurizer = featurizer_from_spec(featurizer or DEFAULT_FEATURIZER)
    graphs, kept, problems = [], [], []
    with BlockLogs():  # RDKit's own stderr messages; the reasons are collected instead
        for i, s in enumerate(show_progress(smiles, desc, enabled=progress, unit="molecules")):
            mol, problem = parse_smiles(s)
            if problem:
                problems.append((i, s, problem))
                continue
            graphs.append(featurizer.mol_to_graph(mol))
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
    featurizer: Featurizer | None = None,
) -> SmilesTable:
    """Read a CSV (or .csv.gz) of SMILES and targets and featurize it with ``featurizer`` (default OGB's).

    Invalid or empty SMILES are skipped and listed in ``report`` (:class:`BadSmiles`: row, file
    line, SMILES, reason); with ``strict=True`` they raise :class:`InvalidSmilesError` instead.
    Empty or ``nan`` target cells become NaN (mask them per task); any other non-number, and
    ``inf``, is an error naming the line (as are the CSV problems of :func:`read_csv_rows`).
    ``targets`` is float32 ``[n, len(target_cols)]``. Fewer than ``min_rows`` usable molecules is
    an error. ``limit`` reads only the first ``limit`` data rows.
    Blank lines are skipped and not counted as rows; ``line`` is the true file line all the same.

    >>> from pathlib import Path
    >>> _ = Path("mols.csv").write_text("smiles,y\\nCCO,1.0\\nc1ccccc1,2.5\\nnot a smiles,0.0\\n")
    >>> graphs, targets, rows, report, smiles = read_smiles_csv("mols.csv", "smiles", ["y"])
    >>> targets.tolist(), smiles, [(bad.line, bad.smiles) for bad in report]
    ([[1.0], [2.5]], ['CCO', 'c1ccccc1'], [(4, 'not a smiles')])
    """
    path = Path(path)
    target_cols = [target_cols] if isinstance(target_cols, str) else list(target_cols)
    header, records = read_csv_rows(path, limit)
    cols = column_indices(path, header, [smiles_col, *target_cols])
    if not records:
        raise CsvError(f"{path} has a header but no data rows.")
    smiles, lines = [], []
    targets = np.empty((len(records), len(target_cols)), dtype=np.float64)
    for r, (line, cells) in enumerate(records):
        cells = cells + [""] * (len(header) - len(cells))
        smiles.append(cells[cols[0]].strip())
        lines.append(line)
        for t, c in enumerate(cols[1:]):
            targets[r, t] = _to_float(cells[c], path, line, target_cols[t])
    graphs, kept, problems = featurize_smiles(smiles, featurizer, progress=progress, desc=f"featurizing {path.name}")
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
    mol, problem = parse_smiles(smiles)
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


def read_csv_rows(path: Path, limit: int | None) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """Header and ``(file line, cells)`` of each non-blank data row (the first ``limit`` of them).

    A missing file, a folder, an empty file, a file that is not UTF-8 CSV and a row with more
    cells than the header are :class:`CsvError`.
    """
    if path.is_dir():
        raise CsvError(f"{path} is a folder; give the path of a CSV file.")
    if not path.is_file():
        raise CsvError(f"CSV file {path} does not exist.")
    opener = gzip.open if path.suffix == ".gz" else open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
            reader = csv.reader(f)
            header = next(reader, None)
            if not header:
                raise CsvError(f"{path} is empty; expected a header row with column names.")
            records = []
            for cells in reader:
                if limit is not None and len(records) >= limit:
                    break
                if len(cells) > len(header):
                    raise CsvError(f"{path}: row {len(records)} (line {reader.line_num}) has {len(cells)} cells but "
                                   f"the header has {len(header)} columns; remove the stray comma or quote the cell.")
                if any(cell.strip() for cell in cells):
                    records.append((reader.line_num, cells))
    except (UnicodeDecodeError, csv.Error, OSError, EOFError) as err:
        raise CsvError(f"{path} cannot be read as a UTF-8 CSV{' (gzip)' if path.suffix == '.gz' else ''}: "
                       f"{err}. Save it as UTF-8 CSV (e.g. 'CSV UTF-8' in Excel).") from None
    return [h.strip() for h in header], records


def column_indices(path: Path, header: list[str], wanted: list[str]) -> list[int]:
    """Index of each wanted column; a missing or repeated one is a :class:`CsvError` naming the columns."""
    missing = [c for c in wanted if c not in header]
    if missing:
        raise CsvError(
            f"{path}: column(s) {missing} not found. Columns in the file: {header}. "
            "Pass the SMILES and target column names exactly as in the header."
        )
    repeated = [c for c in dict.fromkeys(wanted) if header.count(c) > 1]
    if repeated:
        where = [i + 1 for i, h in enumerate(header) if h == repeated[0]]
        raise CsvError(f"{path}: the header names column {repeated[0]!r} {len(where)} times (columns {where}), "
                       "so it is unclear which one to read; rename the others.")
    return [header.index(c) for c in wanted]


def _to_float(cell: str, path: Path, line: int, column: str) -> float:
    """A target cell as float; empty / nan / NA become NaN (a missing label); inf is an error."""
    cell = cell.strip()
    if cell.lower() in ("", "nan", "na", "n/a", "none", "null"):
        return math.nan
    try:
        value = float(cell)
    except ValueError:
        raise CsvError(
            f"{path}, line {line}: target column {column!r} holds {cell!r}, which is not a "
            "number. Use a number, or leave the cell empty for a missing label."
        ) from None
    if math.isinf(value):
        raise CsvError(f"{path}, line {line}: target column {column!r} holds {cell!r}, which is not a finite "
                       "number. Use a finite number, or leave the cell empty for a missing label.")
    return value
