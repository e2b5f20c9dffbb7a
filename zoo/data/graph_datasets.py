"""Graph-property datasets (molecules, peptides) from cards: graphs, targets, split, PE, batching.

Every loader returns a :class:`GraphData`: a list of DGL graphs, float32 targets ``[n, T]``
(NaN = missing label), and a split ``{"train", "val", "test"} -> index tensor``. Raw files come
from ``$ZOO_DATA`` (never written to), else the cache ``$ZOO_CACHE``, else a download unless
``$ZOO_OFFLINE`` (see :mod:`zoo.data.mirror`); featurized CSV datasets are cached under
``$ZOO_CACHE/featurized/``, so the slow RDKit pass runs once per file, featurizer and ``limit``.

Graph cards add to the node-card fields: ``num_tasks``; ``featurizer`` (``ogb-smiles2graph`` or
``benchmarking-gnns-zinc-typedict``); ``source.kind`` (``csv`` | ``ogb`` | ``dgl``) with
``ogb_name`` or ``dgl_class``, and for CSVs ``file_urls`` (download URL per file) and
``smiles_column``; molhiv's ``fallback`` (a CSV source with ``target_columns`` and
``split_source``); ``target`` (what is predicted); ``split.sizes`` and ``split.split_source``.

>>> data = load_graph_dataset("zinc_smiles", limit=200, pe={"rwse_k": 16})  # doctest: +SKIP
>>> loaders = make_dataloaders(data, batch_size=32)  # doctest: +SKIP
>>> graph, y = next(iter(loaders["train"]))  # a dgl.batch()ed graph and targets [32, 1]  # doctest: +SKIP
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import urllib.request
import uuid
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Callable, NamedTuple, Sequence

import dgl
import numpy as np
import ogb
import pandas as pd
import torch
from torch.utils.data import DataLoader, Dataset
from tqdm.auto import tqdm

from zoo.data.cards import DatasetError, DatasetNotFoundError, card_path, load_card
from zoo.data.dgl_source import dgl_class, ensure_dgl_raw_folder
from zoo.data.mirror import ensure_raw_folder, resolve_roots, sha256_file
from zoo.data.molecules import FEATURIZER_SPEC, BadSmiles, penalized_logp, read_smiles_csv
from zoo.data.positional import PESpec, add_positional_encodings
from zoo.data.scaffold import scaffold_split

SPLITS = ("train", "val", "test")
GRAPH_TASKS = ("graph_regression", "graph_classification")
ZINC_TYPEDICT_SPEC = {"name": "benchmarking-gnns-zinc-typedict", "atom_types": 28, "bond_types": 4}
CACHE_VERSION = 1  # bump when a cached featurized dataset would change


class _Roots(NamedTuple):
    data: Path | None
    cache: Path
    offline: bool


@dataclass
class GraphData:
    """One graph-property dataset with its split.

    ``split_source`` says where the split comes from (e.g. OGB's files, or "scaffold split
    computed here; OGB membership unverified"); ``source`` says which files were read.
    ``dataset_id`` names this exact list of graphs (it keys the PE cache). ``report`` lists the
    CSV rows skipped for invalid SMILES.
    """

    name: str
    graphs: list = field(repr=False)
    targets: torch.Tensor = field(repr=False)
    split: dict = field(repr=False)
    task: str
    metric: str
    featurizer: dict = field(repr=False)
    source: str
    split_source: str
    dataset_id: str
    card: dict = field(repr=False)
    smiles: list | None = field(default=None, repr=False)
    report: list = field(default_factory=list, repr=False)
    pe_spec: dict | None = None
    cache_root: Path | None = field(default=None, repr=False)

    @property
    def num_tasks(self) -> int:
        """Number of target columns T."""
        return self.targets.shape[1]

    @property
    def sizes(self) -> dict[str, int]:
        """Number of graphs per split."""
        return {k: len(v) for k, v in self.split.items()}

    def __len__(self) -> int:
        return len(self.graphs)

    def subset(self, split: str) -> "GraphSubset":
        """The ``train``, ``val`` or ``test`` part as a torch Dataset of ``(graph, target)``."""
        if split not in self.split:
            raise KeyError(f"unknown split {split!r}; available: {list(self.split)}")
        return GraphSubset(self.graphs, self.targets, self.split[split])

    def add_positional_encodings(self, spec, *, progress: bool = True) -> "GraphData":
        """Attach LapPE / RWSE (see :mod:`zoo.data.positional`), cached per dataset and spec."""
        spec = PESpec.from_any(spec)
        add_positional_encodings(
            self.graphs, spec, dataset_id=self.dataset_id, cache_root=self.cache_root,
            progress=progress,
        )
        self.pe_spec = spec.to_dict()
        return self


class GraphSubset(Dataset):
    """``(graph, target [T])`` pairs of the graphs at ``indices``."""

    def __init__(self, graphs: list, targets: torch.Tensor, indices: torch.Tensor):
        self.graphs, self.targets, self.indices = graphs, targets, indices

    def __len__(self) -> int:
        return len(self.indices)

    def __getitem__(self, i: int):
        j = int(self.indices[i])
        return self.graphs[j], self.targets[j]


def collate(samples: Sequence) -> tuple[dgl.DGLGraph, torch.Tensor]:
    """Batch ``(graph, target)`` pairs: ``(dgl.batch(graphs), targets [B, T])``."""
    graphs, targets = zip(*samples)
    return dgl.batch(graphs), torch.stack(targets)


def make_dataloaders(
    data: GraphData,
    batch_size: int = 128,
    *,
    eval_batch_size: int | None = None,
    shuffle_train: bool = True,
    seed: int = 0,
    num_workers: int = 0,
    drop_last_train: bool = False,
    **loader_kwargs,
) -> dict[str, DataLoader]:
    """One DataLoader per split; only train is shuffled, reproducibly from ``seed``.

    >>> loaders = make_dataloaders(data, batch_size=64, num_workers=2)  # doctest: +SKIP
    """
    loaders = {}
    for name in data.split:
        train = name == "train"
        loaders[name] = DataLoader(
            data.subset(name),
            batch_size=batch_size if train else (eval_batch_size or batch_size),
            shuffle=train and shuffle_train,
            generator=torch.Generator().manual_seed(seed) if train and shuffle_train else None,
            drop_last=train and drop_last_train,
            collate_fn=collate,
            num_workers=num_workers,
            **loader_kwargs,
        )
    return loaders


_LOADERS: dict[str, Callable] = {}


def register_graph_loader(name: str):
    """Decorator: ``fn(card, roots, limit, source, progress) -> GraphData`` loads card ``name``."""
    def wrap(fn):
        _LOADERS[name] = fn
        return fn
    return wrap


def graph_dataset_names() -> list[str]:
    """Cards that :func:`load_graph_dataset` can load."""
    return sorted(_LOADERS)


def load_graph_dataset(
    name: str,
    *,
    data_root: str | Path | None = None,
    cache_root: str | Path | None = None,
    offline: bool | None = None,
    limit: int | None = None,
    source: str = "auto",
    pe=None,
    progress: bool = True,
) -> GraphData:
    """Load the graph dataset of card ``name`` (zinc_smiles, zinc, molhiv, molpcba, peptides_*).

    ``limit`` keeps only the first ``limit`` molecules of the source (split indices are
    filtered to them): for quick tests. ``source`` applies to molhiv only: ``"ogb"``,
    ``"csv"`` (MoleculeNet HIV.csv + scaffold split computed here) or ``"auto"`` (OGB when its
    files are there or can be downloaded, else the CSV, with a warning). ``pe`` (e.g.
    ``{"lap_k": 8, "rwse_k": 16}``) attaches positional encodings, cached on disk.
    """
    card = load_card(name)
    if card["task"] not in GRAPH_TASKS:
        raise DatasetError(
            f"Card {card['name']!r} is a {card['task']!r} dataset; load_graph_dataset loads "
            f"{' / '.join(GRAPH_TASKS)} cards: {', '.join(graph_dataset_names())}."
        )
    if card["name"] not in _LOADERS:
        raise DatasetError(
            f"No graph loader for card {card['name']!r}; known: {', '.join(graph_dataset_names())}. "
            "Register one with zoo.data.graph_datasets.register_graph_loader."
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 2):
        raise ValueError(f"limit must be None or an int >= 2, got {limit!r}")
    if source != "auto" and card["name"] != "molhiv":
        raise ValueError(f"source={source!r} applies only to molhiv; leave it 'auto' for {name!r}")
    roots = _Roots(*resolve_roots(data_root, cache_root, offline))
    data = _LOADERS[card["name"]](card, roots, limit, source, progress)
    data.cache_root = roots.cache
    if pe:
        data.add_positional_encodings(pe, progress=progress)
    return data


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
) -> GraphData:
    """A user's CSV of SMILES and targets, featurized like every molecule card.

    ``split`` is ``"scaffold"`` (:func:`zoo.data.scaffold.scaffold_split` of the valid
    molecules) or ``"random"`` (seeded permutation). ``metric`` defaults to ``mae`` for
    regression and ``roc_auc`` for classification.

    >>> data = load_csv_dataset("my_mols.csv", "smiles", ["pIC50"])  # doctest: +SKIP
    """
    if task not in GRAPH_TASKS:
        raise ValueError(f"task must be one of {GRAPH_TASKS}, got {task!r}")
    metric = metric or ("mae" if task == "graph_regression" else "roc_auc")
    path = Path(path)
    target_cols = [target_cols] if isinstance(target_cols, str) else list(target_cols)
    table = read_smiles_csv(path, smiles_col, target_cols, strict=strict, limit=limit,
                            progress=progress)
    n = len(table.graphs)
    if split == "scaffold":
        parts = scaffold_split(table.smiles, frac_train, frac_valid, progress=progress)
    elif split == "random":
        perm = torch.randperm(n, generator=torch.Generator().manual_seed(seed)).tolist()
        a, b = int(round(frac_train * n)), int(round((frac_train + frac_valid) * n))
        parts = {"train": sorted(perm[:a]), "val": sorted(perm[a:b]), "test": sorted(perm[b:])}
    else:
        raise ValueError(f"split must be 'scaffold' or 'random', got {split!r}")
    sha = sha256_file(path)
    ident = _digest({"sha": sha, "smiles": smiles_col, "limit": limit, "feat": FEATURIZER_SPEC})
    card = {
        "name": f"csv:{path.stem}", "title": str(path), "task": task, "metric": metric,
        "source": {"kind": "csv", "path": str(path), "sha256": sha, "smiles_column": smiles_col,
                   "target_columns": target_cols},
    }
    data = GraphData(
        name=card["name"], graphs=table.graphs, targets=table.targets,
        split={k: torch.tensor(v, dtype=torch.long) for k, v in parts.items()},
        task=task, metric=metric, featurizer=dict(FEATURIZER_SPEC), source=f"csv {path}",
        split_source=f"{split} split computed here (frac {frac_train}/{frac_valid}, seed {seed})"
        if split == "random" else f"scaffold split computed here (frac {frac_train}/{frac_valid})",
        dataset_id=f"csv-{path.stem}-{ident}", card=card, smiles=table.smiles,
        report=table.report, cache_root=resolve_roots(None, cache_root, None)[1],
    )
    if pe:
        data.add_positional_encodings(pe, progress=progress)
    return data


def csv_card_file(name: str, file: str | None = None, *, data_root: str | Path | None = None,
                  cache_root: str | Path | None = None, offline: bool | None = None) -> Path:
    """Path to a verified local copy of a CSV card's raw file (the first one unless ``file``).

    Mirrored from ``$ZOO_DATA`` or the cache, else downloaded from the card's URL (unless offline).

    >>> csv_card_file("esol")  # doctest: +SKIP
    PosixPath('/home/me/.cache/zoo/moleculenet/ESOL/delaney-processed.csv')
    """
    card = load_card(name)
    src = card["source"]
    if src.get("kind") != "csv":
        raise DatasetError(f"card {name!r} is not a CSV card (source kind {src.get('kind')!r})")
    file = file or next(iter(src["files"]))
    if file not in src["files"]:
        raise DatasetError(f"card {name!r} has no file {file!r}; its files: {', '.join(src['files'])}")
    folder = _ensure_csv_folder(card, src, _Roots(*resolve_roots(data_root, cache_root, offline)))
    return folder / file


# ----------------------------------------------------------------------------- card loaders


@register_graph_loader("zinc_smiles")
def _load_zinc_smiles(card, roots: _Roots, limit, source, progress) -> GraphData:
    """Graphium's ZINC 12k CSV; target penalized logP computed here; fixed index-file split."""
    src = card["source"]
    folder = _ensure_csv_folder(card, src, roots)

    def build():
        table = read_smiles_csv(folder / "smiles_score.csv", src["smiles_column"], (),
                                limit=limit, progress=progress)
        scores = [penalized_logp(s) for s in tqdm(table.smiles, desc="penalized logP",
                                                  disable=not progress, leave=False)]
        targets = torch.tensor(scores, dtype=torch.float64).float().view(-1, 1)
        index = pd.read_csv(folder / "indexes_train_val_test.csv")
        split_rows = {k: index[k].dropna().astype(np.int64).to_numpy() for k in SPLITS}
        return table._replace(targets=targets), split_rows

    tag = {"files": src["files"], "target": "penalized_logp-v1"}
    return _cached_csv_dataset(card, roots, limit, tag, build, "csv " + src["raw_folder"],
                               card["split"]["split_source"])


@register_graph_loader("molhiv")
def _load_molhiv(card, roots: _Roots, limit, source, progress) -> GraphData:
    """OGB's ogbg-molhiv when available, else MoleculeNet HIV.csv with a scaffold split."""
    if source not in ("auto", "ogb", "csv"):
        raise ValueError(f"molhiv source must be 'auto', 'ogb' or 'csv', got {source!r}")
    if source == "ogb" or (source == "auto" and (_ogb_present(card, roots) or not roots.offline)):
        try:
            return _load_ogb(card, roots, limit, source, progress)
        except DatasetNotFoundError as exc:
            if source == "ogb":
                raise
            reason = str(exc)
    else:
        reason = "OGB's files are not in the cache or ZOO_DATA and downloads are off (offline)."
    if source == "auto":
        warnings.warn(
            f"molhiv: using MoleculeNet HIV.csv with a scaffold split computed here (OGB "
            f"membership unverified), not OGB's files. {reason} Pass source='csv' to silence "
            "this, or provide OGB's ogbg_molhiv folder to use its split.",
            stacklevel=3,
        )
    fb = card["fallback"]
    pseudo = {"name": card["name"], "source": fb}
    folder = _ensure_csv_folder(pseudo, fb, roots)
    csv_name = next(iter(fb["files"]))

    def build():
        table = read_smiles_csv(folder / csv_name, fb["smiles_column"], fb["target_columns"],
                                limit=limit, progress=progress)
        all_smiles = [""] * (len(table.rows) + len(table.report))
        for row, s in zip(table.rows.tolist(), table.smiles):
            all_smiles[row] = s
        for bad in table.report:
            all_smiles[bad.row] = bad.smiles
        return table, scaffold_split(all_smiles, progress=progress)

    tag = {"files": fb["files"], "targets": fb["target_columns"], "split": "scaffold-v1"}
    return _cached_csv_dataset(card, roots, limit, tag, build, f"csv {fb['raw_folder']}",
                               fb["split_source"])


@register_graph_loader("molpcba")
def _load_molpcba(card, roots: _Roots, limit, source, progress) -> GraphData:
    """OGB's ogbg-molpcba (NaN labels kept)."""
    return _load_ogb(card, roots, limit, source, progress)


@register_graph_loader("peptides_func")
@register_graph_loader("peptides_struct")
def _load_lrgb(card, roots: _Roots, limit, source, progress) -> GraphData:
    """DGL's Peptides-func / Peptides-struct on raw files mirrored into the cache."""
    cls = dgl_class(card)
    ensure_dgl_raw_folder(card, cls, data_root=roots.data, cache_root=roots.cache, offline=roots.offline)
    dataset = cls(raw_dir=str(roots.cache), verbose=False)
    split = {k: torch.as_tensor(v).long() for k, v in dataset.get_idx_split().items()}
    targets = dataset.labels.float().reshape(len(dataset.graphs), -1)
    return _dataset_from_graphs(card, list(dataset.graphs), targets, split, limit,
                                dict(FEATURIZER_SPEC), f"dgl {card['source']['dgl_class']}",
                                f"dgl{dgl.__version__}")


@register_graph_loader("zinc")
def _load_zinc(card, roots: _Roots, limit, source, progress) -> GraphData:
    """DGL's ZINCDataset (benchmarking-gnns ZINC 12k, type-dict features)."""
    cls = dgl_class(card)
    ensure_dgl_raw_folder(card, cls, data_root=roots.data, cache_root=roots.cache, offline=roots.offline)
    graphs, targets, split, start = [], [], {}, 0
    for part, mode in zip(SPLITS, ("train", "valid", "test")):
        dataset = cls(mode=mode, raw_dir=str(roots.cache))
        part_graphs, labels = dataset[:]
        graphs.extend(part_graphs)
        targets.append(torch.as_tensor(labels).float().reshape(-1, 1))
        split[part] = torch.arange(start, start + len(part_graphs))
        start += len(part_graphs)
    return _dataset_from_graphs(card, graphs, torch.cat(targets), split, limit,
                                dict(ZINC_TYPEDICT_SPEC), "dgl dgl.data.ZINCDataset",
                                f"dgl{dgl.__version__}")


# ----------------------------------------------------------------------------- OGB


def _ogb_folder(card) -> str:
    return card["source"]["ogb_name"].replace("-", "_")


def _ogb_present(card, roots: _Roots) -> bool:
    """True if OGB's folder is in the cache or under ``$ZOO_DATA/ogb``."""
    folder = _ogb_folder(card)
    places = [roots.cache / "ogb" / folder]
    if roots.data is not None:
        places.append(roots.data / "ogb" / folder)
    return any(p.is_dir() for p in places)


def _load_ogb(card, roots: _Roots, limit, source, progress) -> GraphData:
    """OGB's DglGraphPropPredDataset under ``$ZOO_CACHE/ogb`` (copied from ``$ZOO_DATA/ogb``)."""
    from ogb.graphproppred import DglGraphPropPredDataset  # noqa: PLC0415 (heavy import)

    src, folder = card["source"], _ogb_folder(card)
    root = roots.cache / "ogb"
    target = root / folder
    if roots.data is not None and (roots.data / "ogb" / folder).is_dir() and not target.is_dir():
        root.mkdir(parents=True, exist_ok=True)  # OGB writes processed files: work on a copy
        shutil.copytree(roots.data / "ogb" / folder, target)
    if target.is_dir() and not any(target.glob("RELEASE_v*.txt")):
        raise DatasetError(
            f"Dataset {card['name']!r}: {target} lacks OGB's RELEASE_v*.txt, so it is incomplete "
            "or from another OGB version. Delete the folder and load again."
        )
    if not target.is_dir() and roots.offline:
        raise DatasetNotFoundError(
            f"Dataset {card['name']!r}: OGB folder {folder!r} not found in {root} (or "
            f"$ZOO_DATA/ogb/), and offline mode is on. Fix: download {src['url']}, unzip it, "
            f"and put its folder there renamed {folder!r}; or load with network access "
            "(offline=False, ZOO_OFFLINE unset)."
        )
    try:
        dataset = DglGraphPropPredDataset(src["ogb_name"], root=str(root))
    except Exception as exc:  # OGB downloads with urllib; any failure means: not available
        raise DatasetNotFoundError(
            f"Dataset {card['name']!r}: OGB could not provide {src['ogb_name']} in {root} "
            f"({type(exc).__name__}: {exc}). Download {src['url']} by hand, or retry online."
        ) from exc
    split = {{"valid": "val"}.get(k, k): v.long() for k, v in dataset.get_idx_split().items()}
    targets = dataset.labels.float().reshape(len(dataset.graphs), -1)
    return _dataset_from_graphs(card, list(dataset.graphs), targets, split, limit,
                                dict(FEATURIZER_SPEC), f"ogb {src['ogb_name']}",
                                f"ogb{ogb.__version__}", card["split"]["split_source"])


# ----------------------------------------------------------------------------- DGL


# ----------------------------------------------------------------------------- CSV + cache


def _ensure_csv_folder(card, src, roots: _Roots) -> Path:
    """The verified cache copy of a CSV card's raw folder (mirrored, cached or downloaded)."""
    (roots.cache / src["raw_folder"]).parent.mkdir(parents=True, exist_ok=True)

    def download(scratch: Path) -> None:
        target = scratch / src["raw_folder"]
        target.mkdir(parents=True, exist_ok=True)
        for name, url in src["file_urls"].items():
            urllib.request.urlretrieve(url, target / name)

    return ensure_raw_folder(card, download, data_root=roots.data, cache_root=roots.cache,
                             offline=roots.offline)


def _cached_csv_dataset(card, roots: _Roots, limit, tag, build, source, split_source) -> GraphData:
    """Featurize with ``build() -> (SmilesTable, split over CSV rows)`` once; cache the result."""
    key = _digest({"v": CACHE_VERSION, "tag": tag, "limit": limit, "feat": FEATURIZER_SPEC})
    folder = roots.cache / "featurized" / f"{card['name']}-{key}"
    if not (folder / "meta.json").is_file():
        table, split_rows = build()
        split = _rows_to_positions(table.rows, split_rows)
        _save_featurized(folder, table, split)
    graphs, tensors = dgl.load_graphs(str(folder / "graphs.bin"))
    meta = json.loads((folder / "meta.json").read_text())
    return GraphData(
        name=card["name"], graphs=graphs, targets=tensors["targets"],
        split={k: tensors[f"split_{k}"] for k in SPLITS}, task=card["task"],
        metric=card["metric"], featurizer=meta["featurizer"], source=source,
        split_source=split_source, dataset_id=f"{card['name']}-{key}", card=card,
        smiles=meta["smiles"], report=[BadSmiles(**b) for b in meta["report"]],
    )


def _save_featurized(folder: Path, table, split: dict) -> None:
    """Write graphs + tensors + meta into a scratch folder, then rename it into place."""
    folder.parent.mkdir(parents=True, exist_ok=True)
    tmp = folder.with_name(f".{folder.name}.{uuid.uuid4().hex}.tmp")
    tmp.mkdir()
    try:
        tensors = {"targets": table.targets, "rows": table.rows,
                   **{f"split_{k}": v for k, v in split.items()}}
        dgl.save_graphs(str(tmp / "graphs.bin"), table.graphs, tensors)
        meta = {"featurizer": FEATURIZER_SPEC, "smiles": table.smiles,
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


def _dataset_from_graphs(card, graphs, targets, split, limit, featurizer, source, version,
                         split_source=None) -> GraphData:
    """GraphData from an OGB / DGL dataset, optionally cut to its first ``limit`` graphs."""
    if limit is not None and limit < len(graphs):
        graphs, targets = graphs[:limit], targets[:limit]
        split = {k: v[v < limit] for k, v in split.items()}
    expected = card.get("num_tasks")
    if expected is not None and targets.shape[1] != expected:
        raise DatasetError(
            f"Dataset {card['name']!r}: the source gives {targets.shape[1]} target column(s), "
            f"the card {card_path(card['name'])} says num_tasks: {expected}."
        )
    return GraphData(
        name=card["name"], graphs=graphs, targets=targets, split=split, task=card["task"],
        metric=card["metric"], featurizer=featurizer, source=source,
        split_source=split_source or card["split"]["split_source"],
        dataset_id=f"{card['name']}-{version}-n{len(graphs)}", card=card,
    )


def _digest(obj) -> str:
    """16 hex digits of the sha256 of ``obj`` as sorted JSON."""
    return hashlib.sha256(json.dumps(obj, sort_keys=True, default=str).encode()).hexdigest()[:16]
