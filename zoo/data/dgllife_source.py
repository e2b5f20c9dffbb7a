"""Cards of ``source.kind: dgllife``: a MoleculeNet CSV read by dgllife's dataset class for it
(``source.dgllife_class``, e.g. ``dgllife.data.ESOL``), featurized with the zoo's featurizer.

dgllife's classes download ``$DGL_DOWNLOAD_DIR/<zip>`` unless it exists, then extract it and
read the CSV inside. So the zip (``source.dgllife_zip``) is built in ``$ZOO_CACHE/dgllife/`` from
the verified CSV (mirrored from ``$ZOO_DATA``, never written there) before every load, and
``DGL_DOWNLOAD_DIR`` points there for the call: dgllife finds its file and downloads nothing. The
SMILES it read are checked against the verified CSV. Its graph cache is written, never read back.
Split, caching of the featurized graphs and the bad-row report are those of
:mod:`zoo.data.csv_source`.
"""
from __future__ import annotations

import contextlib
import io
import os
import zipfile
from pathlib import Path

import torch

from zoo._atomic import atomic_write
from zoo.data.cards import DatasetError, card_path, import_source_object
from zoo.data.featurizers import Featurizer, parse_smiles
from zoo.data.molecules import BadSmiles, SmilesTable, column_indices, read_csv_rows


def read_dgllife_table(card: dict, csv_path: Path, cache: Path, featurizer: Featurizer, *,
                       limit: int | None) -> SmilesTable:
    """The card's molecules as dgllife's class reads them from ``csv_path`` (a verified copy), graphs
    made by ``featurizer``; missing labels (dgllife's mask) become NaN. ``limit`` keeps rows below it."""
    src, where = card["source"], card_path(card["name"])
    cls = import_source_object(card, "dgllife_class")
    folder = cache / "dgllife"
    folder.mkdir(parents=True, exist_ok=True)
    _write_zip(folder / src["dgllife_zip"], csv_path)

    def to_graph(smiles, **_):  # dgllife passes node_featurizer= / edge_featurizer= (unused)
        mol, problem = parse_smiles(smiles)
        return None if problem else featurizer.mol_to_graph(mol)

    with _download_dir(folder), contextlib.redirect_stdout(io.StringIO()):  # dgllife prints progress
        dataset = cls(smiles_to_graph=to_graph, load=False, cache_file_path=str(folder / f"{card['name']}_graphs.bin"))
    if list(dataset.task_names) != list(src["target_columns"]):
        raise DatasetError(f"{where}: {src['dgllife_class']} reads targets {dataset.task_names}, the card names "
                           f"{src['target_columns']}; make source.target_columns match.")
    header, records = read_csv_rows(csv_path, None)
    (column,) = column_indices(csv_path, header, [src["smiles_column"]])
    raw = [cells[column] if column < len(cells) else "" for _, cells in records]
    if [str(s) for s in dataset.df[src["smiles_column"]].fillna("")] != raw:
        raise DatasetError(f"{where}: {src['dgllife_class']} read other molecules than the verified {csv_path}; "
                           f"check source.dgllife_zip ({src['dgllife_zip']!r}) against the class.")
    rows = torch.tensor(dataset.valid_ids, dtype=torch.long)
    targets = dataset.labels.clone().reshape(len(rows), -1)
    if dataset.mask is not None:
        targets[dataset.mask.reshape(targets.shape) == 0] = float("nan")
    valid = set(dataset.valid_ids)
    report = [BadSmiles(i, records[i][0], raw[i].strip(), parse_smiles(raw[i])[1] or "dgllife could not build it")
              for i in range(len(raw)) if i not in valid]
    keep = rows < limit if limit is not None else torch.ones(len(rows), dtype=torch.bool)
    return SmilesTable(graphs=[g for g, k in zip(dataset.graphs, keep) if k], targets=targets[keep], rows=rows[keep],
                       report=[b for b in report if limit is None or b.row < limit],
                       smiles=[raw[i].strip() for i in rows[keep].tolist()])


def _write_zip(path: Path, csv_path: Path) -> None:
    """``path``: a zip holding ``csv_path`` at its top level (dgllife's layout), replaced atomically."""
    def write(handle) -> None:
        with zipfile.ZipFile(handle, "w", zipfile.ZIP_DEFLATED) as archive:
            archive.write(csv_path, arcname=csv_path.name)

    atomic_write(path, write)


@contextlib.contextmanager
def _download_dir(folder: Path):
    """``DGL_DOWNLOAD_DIR`` set to ``folder`` inside the block, restored after."""
    before = os.environ.get("DGL_DOWNLOAD_DIR")
    os.environ["DGL_DOWNLOAD_DIR"] = str(folder)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("DGL_DOWNLOAD_DIR", None)
        else:
            os.environ["DGL_DOWNLOAD_DIR"] = before
