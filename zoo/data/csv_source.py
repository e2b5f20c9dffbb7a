"""SMILES CSVs: cards of ``source.kind: csv`` (and ``dgllife``, the same CSV read by a dgllife
class, :mod:`zoo.data.dgllife_source`) and a user's own CSV, featurized with the featurizer asked
for (:mod:`zoo.data.featurizers`; a card's ``featurizer`` by default, OGB's for a user's CSV).

A CSV card's table is ``source.table`` (needed when ``source.files`` lists more than one file,
else the one file); its targets are the CSV columns
``source.target_columns`` or ``source.target_function(smiles)`` (a dotted path) computed here.
The split follows ``split.protocol``: ``fixed_index_file`` (columns train / val / test of
``split.index_file`` hold 0-based data rows), ``scaffold`` (:func:`zoo.data.scaffold.scaffold_split`
over all CSV rows, unparseable ones included, with ``split.fractions``) or ``random`` (a seeded
permutation of the kept molecules). Rows whose SMILES RDKit rejects are reported and dropped
after the split. Featurized cards are cached under ``$ZOO_CACHE/featurized/``, so the slow
RDKit pass runs once per file, card, featurizer and ``limit``; a cache hit neither mirrors nor
verifies the raw folder (the cache key holds the card's sha256s of its files).
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import uuid
from dataclasses import asdict
from pathlib import Path
from typing import Sequence

import dgl
import numpy as np
import pandas as pd
import torch

from zoo._progress import progress as show_progress
from zoo.data.cards import DatasetError, card_path, import_source_object, load_card
from zoo.data.dgllife_source import read_dgllife_table
from zoo.data.featurizers import DEFAULT_FEATURIZER, Featurizer, featurizer_from_spec, smiles_featurizers
from zoo.data.graph_data import GRAPH_TASKS, SPLITS, GraphData
from zoo.data.mirror import Roots, ensure_raw_folder, resolve_roots, sha256_file
from zoo.data.molecules import BadSmiles, SmilesTable, read_smiles_csv
from zoo.data.scaffold import scaffold_split

CACHE_VERSION = 2  # bump when a cached featurized dataset would change
CSV_KINDS = ("csv", "dgllife")
"""The source kinds whose table is a CSV of SMILES featurized here."""


def load_csv_card(card: dict, roots: Roots, *, limit: int | None, seed: int, progress: bool,
                  featurizer: Featurizer) -> GraphData:
    """The dataset of a ``csv`` or ``dgllife`` card (module docstring), its SMILES featurized by
    ``featurizer``; ``seed`` draws a ``random`` split."""
    src, split = card["source"], card["split"]
    if not featurizer.featurizes_smiles:
        raise DatasetError(f"{card_path(card['name'])}: a {src['kind']} source is featurized from SMILES, which "
                           f"{featurizer.name!r} does not do; use one of {', '.join(smiles_featurizers())}.")
    what = {"v": CACHE_VERSION, "files": src["files"], "table": table_file(src), "smiles": src["smiles_column"],
            "targets": src.get("target_columns"), "function": src.get("target_function"), "limit": limit,
            "split": {k: split.get(k) for k in ("protocol", "index_file", "fractions")}, "feat": featurizer.spec,
            **({"dgllife_class": src["dgllife_class"]} if src["kind"] == "dgllife" else {})}
    key = _digest(what)  # everything the cached graphs, targets and fixed split depend on
    cached = roots.cache / "featurized" / f"{card['name']}-{key}"
    if not (cached / "meta.json").is_file():  # a hit reads no raw file: the key holds their sha256s
        folder = _ensure_csv_folder(card, roots)
        table = _read_table(card, folder, roots, limit, progress, featurizer)
        fixed = None if split["protocol"] == "random" else _rows_to_positions(
            table.rows, _row_split(card, folder, table, progress))
        _save_featurized(cached, table, fixed, featurizer.spec)
    graphs, tensors = dgl.load_graphs(str(cached / "graphs.bin"))
    meta = json.loads((cached / "meta.json").read_text())
    split_source = split["split_source"]
    if split["protocol"] == "random":
        parts, split_source = random_split(len(graphs), split["fractions"], seed), f"{split_source}, seed {seed}"
    else:
        parts = {k: tensors[f"split_{k}"] for k in SPLITS}
    return GraphData(
        name=card["name"], graphs=graphs, targets=tensors["targets"], split=parts, task=card["task"],
        metric=card["metric"], featurizer=meta["featurizer"],
        source=" ".join(filter(None, (src["kind"], src.get("dgllife_class"), src["raw_folder"]))),
        split_source=split_source, dataset_id=f"{card['name']}-{key}", card=card,
        smiles=meta["smiles"], report=[BadSmiles(**b) for b in meta["report"]],
    )


def load_csv_dataset(
    path: str | Path,
    smiles_col: str,
    target_cols: Sequence[str],
    *,
    task: str = "graph_regression",
    metric: str | None = None,
    split: str = "scaffold",
    frac_train: float = 0.8,
    frac_valid: float = 0.1,
    seed: int = 0,
    strict: bool = False,
    limit: int | None = None,
    pe=None,
    cache_root: str | Path | None = None,
    progress: bool = True,
    featurizer: Featurizer | dict | str | None = None,
) -> GraphData:
    """A user's CSV of SMILES and targets, featurized by ``featurizer`` (a featurizer, its spec or
    name; default OGB's ``smiles2graph`` layout, that of the shipped checkpoints).

    ``split`` is ``"scaffold"`` (:func:`zoo.data.scaffold.scaffold_split` of the valid
    molecules) or ``"random"`` (seeded permutation). ``metric`` defaults to ``mae`` for
    regression and ``roc_auc`` for classification.

    >>> from pathlib import Path
    >>> rows = [f"{smiles},{i / 10}" for i, smiles in enumerate(["CCO", "CCN", "CCC", "c1ccccc1", "CC(=O)O"] * 2)]
    >>> _ = Path("my_mols.csv").write_text("\\n".join(["smiles,pIC50", *rows]) + "\\n")
    >>> data = load_csv_dataset("my_mols.csv", "smiles", ["pIC50"], split="random", progress=False)
    >>> data.task, {name: len(rows) for name, rows in data.split.items()}
    ('graph_regression', {'train': 8, 'val': 1, 'test': 1})
    """
    if task not in GRAPH_TASKS:
        raise ValueError(f"task must be one of {GRAPH_TASKS}, got {task!r}")
    metric = metric or ("mae" if task == "graph_regression" else "roc_auc")
    path = Path(path)
    target_cols = [target_cols] if isinstance(target_cols, str) else list(target_cols)
    featurizer = featurizer_from_spec(featurizer or DEFAULT_FEATURIZER)
    table = read_smiles_csv(path, smiles_col, target_cols, strict=strict, limit=limit,
                            progress=progress, featurizer=featurizer)
    fractions = (frac_train, frac_valid, 1 - frac_train - frac_valid)
    if split == "scaffold":
        parts = scaffold_split(table.smiles, frac_train, frac_valid, progress=progress)
        parts = {k: torch.tensor(v, dtype=torch.long) for k, v in parts.items()}
        split_source = f"scaffold split computed here (frac {frac_train}/{frac_valid})"
    elif split == "random":
        parts = random_split(len(table.graphs), fractions, seed)
        split_source = f"random split computed here (frac {frac_train}/{frac_valid}, seed {seed})"
    else:
        raise ValueError(f"split must be 'scaffold' or 'random', got {split!r}")
    sha = sha256_file(path)
    ident = _digest({"sha": sha, "smiles": smiles_col, "limit": limit, "feat": featurizer.spec})
    card = {
        "name": f"csv:{path.stem}", "title": str(path), "task": task, "metric": metric,
        "source": {"kind": "csv", "path": str(path), "sha256": sha, "smiles_column": smiles_col,
                   "target_columns": target_cols},
    }
    data = GraphData(
        name=card["name"], graphs=table.graphs, targets=table.targets, split=parts, task=task,
        metric=metric, featurizer=featurizer.spec, source=f"csv {path}", split_source=split_source,
        dataset_id=f"csv-{path.stem}-{ident}", card=card, smiles=table.smiles,
        report=table.report, cache_root=resolve_roots(None, cache_root, None).cache,
    )
    if pe:
        data.add_positional_encodings(pe, progress=progress)
    return data


def csv_card_file(name: str, file: str | None = None, *, data_root: str | Path | None = None,
                  cache_root: str | Path | None = None, offline: bool | None = None) -> Path:
    """Path to a verified local copy of a CSV card's raw file (its table unless ``file``).

    Mirrored from ``$ZOO_DATA`` or the cache, else downloaded from the card's URL (unless offline).

    >>> path = csv_card_file("esol")  # in the cache, e.g. ~/.cache/zoo/moleculenet/ESOL/delaney-processed.csv
    >>> path.parts[-3:], len(path.read_text().splitlines())  # a header and 1128 molecules
    (('moleculenet', 'ESOL', 'delaney-processed.csv'), 1129)
    """
    card = load_card(name)
    src = card["source"]
    if src["kind"] not in CSV_KINDS:
        raise DatasetError(f"card {name!r} is not a CSV card (source kind {src['kind']!r})")
    file = file or table_file(src)
    if file not in src["files"]:
        raise DatasetError(f"card {name!r} has no file {file!r}; its files: {', '.join(src['files'])}")
    return _ensure_csv_folder(card, resolve_roots(data_root, cache_root, offline)) / file


def table_file(source: dict) -> str:
    """The file name of a CSV source's table: ``table``, else its only file."""
    return source.get("table") or next(iter(source["files"]))


def random_split(n: int, fractions: Sequence[float], seed: int) -> dict[str, torch.Tensor]:
    """Positions ``0..n-1`` split by a permutation seeded with ``seed``: the first
    ``round(f_train n)`` to train, up to ``round((f_train + f_val) n)`` to val, the rest to test."""
    perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed))
    a, b = int(round(fractions[0] * n)), int(round((fractions[0] + fractions[1]) * n))
    return {k: part.sort().values for k, part in zip(SPLITS, (perm[:a], perm[a:b], perm[b:]))}


def _ensure_csv_folder(card: dict, roots: Roots) -> Path:
    """The verified cache copy of a CSV card's raw folder (mirrored, cached or downloaded)."""
    return ensure_raw_folder(card, data_root=roots.data, cache_root=roots.cache, offline=roots.offline)


def _read_table(card: dict, folder: Path, roots: Roots, limit: int | None, progress: bool,
                featurizer: Featurizer) -> SmilesTable:
    """Featurize the card's table (read by dgllife's class for a ``dgllife`` card); targets from its
    columns or its ``target_function``."""
    src = card["source"]
    if src["kind"] == "dgllife":
        return read_dgllife_table(card, folder / table_file(src), roots.cache, featurizer, limit=limit)
    table = read_smiles_csv(folder / table_file(src), src["smiles_column"], src.get("target_columns", ()),
                            limit=limit, progress=progress, featurizer=featurizer)
    if "target_function" not in src:
        return table
    function = import_source_object(card, "target_function")
    attr = src["target_function"].rpartition(".")[2]
    values = [function(s) for s in show_progress(table.smiles, attr, enabled=progress, unit="molecules")]
    return table._replace(targets=torch.tensor(values, dtype=torch.float64).float().view(-1, 1))


def _row_split(card: dict, folder: Path, table: SmilesTable, progress: bool) -> dict:
    """The split over CSV data rows of a ``fixed_index_file`` or ``scaffold`` card."""
    split = card["split"]
    if split["protocol"] == "fixed_index_file":
        index = pd.read_csv(folder / split["index_file"])
        return {k: index[k].dropna().astype(np.int64).to_numpy() for k in SPLITS}
    all_smiles = [""] * (len(table.rows) + len(table.report))
    for row, s in zip(table.rows.tolist(), table.smiles):
        all_smiles[row] = s
    for bad in table.report:
        all_smiles[bad.row] = bad.smiles
    frac_train, frac_valid, _ = split["fractions"]
    return scaffold_split(all_smiles, frac_train, frac_valid, progress=progress)


def _rows_to_positions(rows: torch.Tensor, split_rows: dict) -> dict[str, torch.Tensor]:
    """Map CSV data rows to positions among the kept rows; rows not kept are dropped."""
    rows = rows.numpy()
    out = {}
    for k in SPLITS:
        wanted = np.asarray(split_rows[k], dtype=np.int64)
        pos = np.searchsorted(rows, wanted)
        hit = (pos < len(rows)) & (rows[np.minimum(pos, len(rows) - 1)] == wanted)
        out[k] = torch.from_numpy(np.sort(pos[hit]))
    return out


def _save_featurized(folder: Path, table: SmilesTable, split: dict | None, featurizer: dict) -> None:
    """Write graphs + tensors + meta into a scratch folder, then rename it into place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.tmp")
    tmp.mkdir()
    try:
        tensors = {"targets": table.targets, "rows": table.rows,
                   **{f"split_{k}": v for k, v in (split or {}).items()}}
        dgl.save_graphs(str(tmp / "graphs.bin"), table.graphs, tensors)
        meta = {"featurizer": featurizer, "smiles": table.smiles,
                "report": [asdict(b) for b in table.report]}
        (tmp / "meta.json").write_text(json.dumps(meta))
        if (folder / "meta.json").is_file():  # another process finished first: keep its copy
            return
        if folder.exists():  # an incomplete leftover
            shutil.rmtree(folder, ignore_errors=True)
        try:
            os.replace(tmp, folder)
        except OSError:
            if not (folder / "meta.json").is_file():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _digest(obj) -> str:
    """16 hex digits of the sha256 of ``obj`` as sorted JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]
