"""Cards of ``source.kind: ogb``: OGB's graph-property datasets through ``DglGraphPropPredDataset``.

OGB writes processed files next to its raw ones, so it works on ``$ZOO_CACHE/ogb/<folder>``
(``<folder>`` is the OGB name with ``_`` for ``-``), copied from ``$ZOO_DATA/ogb/<folder>`` when
that exists; online, OGB downloads into the cache itself.
"""
from __future__ import annotations

import shutil

import ogb

from zoo.data.cards import DatasetError, DatasetNotFoundError
from zoo.data.graph_data import GraphData, from_graphs
from zoo.data.mirror import Roots


def load_ogb(card: dict, roots: Roots, *, limit: int | None, **_) -> GraphData:
    """The card's OGB dataset with OGB's split; labels as float32 ``[n, T]`` (NaN kept)."""
    from ogb.graphproppred import DglGraphPropPredDataset  # noqa: PLC0415 (heavy import)

    src = card["source"]
    folder = src["ogb_name"].replace("-", "_")
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
    targets = dataset.labels.float().reshape(len(dataset.graphs), -1)
    return from_graphs(card, list(dataset.graphs), targets, dataset.get_idx_split(), limit=limit,
                       source=f"ogb {src['ogb_name']}", version=f"ogb{ogb.__version__}")
