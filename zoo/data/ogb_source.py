"""Cards of ``source.kind: ogb``: OGB's graph-property datasets through ``DglGraphPropPredDataset``
and its node-property datasets (ogbn-arxiv, ogbn-products) through ``DglNodePropPredDataset``,
always with OGB's official split (``get_idx_split``).

OGB reads and writes ``$ZOO_CACHE/ogb/<folder>`` (``<folder>`` is the OGB name with ``_`` for
``-``). The zoo fills it first, so OGB never downloads: a verified private copy of
``$ZOO_DATA/ogb/<folder>`` when that exists, else the folder of the card's zip, downloaded and
checked against ``source.archive_sha256``. Every file placed is recorded and hashed again on each
load; processed files OGB writes are verified before OGB reads them
(:func:`zoo.data.mirror.guard_derived`).
"""
from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import dgl
import ogb
import torch

from zoo.data.cards import DatasetError, DatasetNotFoundError
from zoo.data.graph_data import GraphData, from_graphs
from zoo.data.mirror import (
    STAMP,
    Roots,
    check_sha,
    guard_derived,
    mirror_files,
    read_stamp,
    sha256_file,
    warn_unpinned,
    write_stamp,
)
from zoo.data.remote import DownloadError, download, unzip

_READY = ("raw/edge.csv.gz", "raw/data.npz", "processed/dgl_data_processed")
"""What OGB reads instead of downloading: its raw files (csv or npz), or its processed file."""


def load_ogb(card: dict, roots: Roots, *, limit: int | None, **_) -> GraphData:
    """The card's OGB dataset with OGB's split; labels as float32 ``[n, T]`` (NaN kept)."""
    from ogb.graphproppred import DglGraphPropPredDataset  # noqa: PLC0415 (heavy import)

    dataset, split = _read_ogb(card, roots, DglGraphPropPredDataset)
    targets = dataset.labels.float().reshape(len(dataset.graphs), -1)
    return from_graphs(card, list(dataset.graphs), targets, split, limit=limit,
                       source=f"ogb {card['source']['ogb_name']}", version=f"ogb{ogb.__version__}")


def load_ogb_node_graph(card: dict, roots: Roots) -> tuple[dgl.DGLGraph, int]:
    """The card's OGB node dataset as one graph and its number of classes.

    ``ndata``: ``feat`` (float32), ``label`` (``[N]``) and the boolean masks ``train_mask``,
    ``val_mask``, ``test_mask`` of OGB's official split (``valid`` is ``val``). With
    ``source.to_bidirected: true`` (ogbn-arxiv, a directed citation graph) every edge is stored
    in both directions, as DGL's and OGB's ogbn-arxiv examples do.

    >>> graph, classes = load_ogb_node_graph(load_card("ogbn_arxiv"), resolve_roots())  # doctest: +SKIP
    """
    from ogb.nodeproppred import DglNodePropPredDataset  # noqa: PLC0415 (heavy import)

    dataset, split = _read_ogb(card, roots, DglNodePropPredDataset)
    source, labels = dataset.graph[0], dataset.labels
    graph = dgl.to_bidirected(source) if card["source"].get("to_bidirected") else source
    graph.ndata["feat"] = source.ndata["feat"].float()
    graph.ndata["label"] = labels.reshape(graph.num_nodes(), -1)[:, 0].long()
    for key, part in (("train_mask", "train"), ("val_mask", "valid"), ("test_mask", "test")):
        mask = torch.zeros(graph.num_nodes(), dtype=torch.bool)
        mask[split[part]] = True
        graph.ndata[key] = mask
    return graph, dataset.num_classes


def _read_ogb(card: dict, roots: Roots, dataset_class: type):
    """``dataset_class`` (an OGB DGL dataset) on the verified cache folder, and its official split."""
    src = card["source"]
    folder = src["ogb_name"].replace("-", "_")
    target = roots.cache / "ogb" / folder
    raw = ensure_ogb_folder(card, roots)
    if (target.parent / f"{folder}_dgl").exists():  # OGB prefers this older folder name to the verified one
        raise DatasetError(f"Dataset {card['name']!r}: OGB would read {target.parent / f'{folder}_dgl'} instead of "
                           f"the verified {target}; delete it.")
    if not any(target.glob("RELEASE_v*.txt")):  # without it OGB asks on stdin whether to update
        raise DatasetError(
            f"Dataset {card['name']!r}: {target} lacks OGB's RELEASE_v*.txt, so it is incomplete "
            "or from another OGB version. Delete the folder and load again."
        )
    with guard_derived(target, raw):
        if not any((target / name).is_file() for name in _READY):  # OGB would download: never let it
            raise DatasetError(f"Dataset {card['name']!r}: {target} holds neither OGB's raw files nor its "
                               "processed file. Delete the folder and load again.")
        try:
            dataset = dataset_class(src["ogb_name"], root=str(target.parent))
            split = dataset.get_idx_split()
        except Exception as exc:  # noqa: BLE001 (OGB raises anything on unreadable files)
            raise DatasetError(f"Dataset {card['name']!r}: OGB could not read {target} ({type(exc).__name__}: "
                               f"{exc}). Delete the folder and load again.") from exc
    return dataset, split


def ensure_ogb_folder(card: dict, roots: Roots) -> set[str]:
    """Fill and verify ``cache/ogb/<folder>``; return the paths of its raw files (relative)."""
    src = card["source"]
    folder = src["ogb_name"].replace("-", "_")
    target = roots.cache / "ogb" / folder
    offline_copy = roots.data / "ogb" / folder if roots.data is not None else None
    if offline_copy is not None and offline_copy.is_dir():
        files = {p.relative_to(offline_copy).as_posix(): None for p in sorted(offline_copy.rglob("*")) if p.is_file()}
        return set(mirror_files(card, offline_copy, target, files, warn_unpinned=False))
    if target.is_dir():
        recorded = read_stamp(target)["raw"]
        fix = f"delete {target} and load again"
        if not recorded:
            raise DatasetError(f"Dataset {card['name']!r}: {target} has no record of the files the zoo placed there "
                               f"({STAMP}), so it cannot be verified; {fix}, or put OGB's folder in $ZOO_DATA/ogb/.")
        for rel, sha in recorded.items():
            if not (target / rel).is_file():
                raise DatasetError(f"Dataset {card['name']!r}: {target / rel} is missing; {fix}.")
            check_sha(card, target / rel, sha, sha256_file(target / rel), fix, origin=target / STAMP)
        return set(recorded)
    if roots.offline:
        raise DatasetNotFoundError(
            f"Dataset {card['name']!r}: OGB folder {folder!r} not found in $ZOO_DATA/ogb/ (ZOO_DATA: "
            f"{roots.data or 'unset'}) or the cache {target.parent}, and offline mode is on. Fix: download "
            f"{src['url']}, unzip it, and put its folder in $ZOO_DATA/ogb/ renamed {folder!r}; or load with "
            "network access (offline=False, ZOO_OFFLINE unset)."
        )
    return _download(card, target)


def _download(card: dict, target: Path) -> set[str]:
    """Download the card's zip, check it, unpack its one folder into ``target`` and record its files."""
    src = card["source"]
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=target.parent))
    try:
        try:
            sha = download(src["url"], scratch / "archive.zip", src.get("archive_sha256"), offline=False)
        except DownloadError as exc:
            raise DatasetNotFoundError(f"Dataset {card['name']!r}: {exc}") from exc
        if src.get("archive_sha256") is None:
            warn_unpinned(card, Path(src["url"]).name, sha)
        unzip(scratch / "archive.zip", scratch / "unzipped", src["url"])
        tops = list((scratch / "unzipped").iterdir()) if (scratch / "unzipped").is_dir() else []
        if len(tops) != 1 or not tops[0].is_dir():
            raise DatasetError(f"Dataset {card['name']!r}: the archive {src['url']} does not hold exactly one "
                               "folder, as OGB's archives do.")
        raw = {p.relative_to(tops[0]).as_posix(): sha256_file(p) for p in sorted(tops[0].rglob("*")) if p.is_file()}
        write_stamp(tops[0], {"raw": raw, "processed": {}})
        if target.exists():  # an incomplete leftover
            shutil.rmtree(target)
        tops[0].rename(target)
        return set(raw)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
