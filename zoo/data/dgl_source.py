"""Cards of ``source.kind: dgl``: import the DGL dataset class, check that DGL reads the folder the
card names, have the folder mirrored, verified or downloaded by the zoo (DGL never downloads),
build the class with its processed caches verified (:func:`build_dgl`), and (graph-level cards)
read the graphs, labels and split."""
from __future__ import annotations

import os
from pathlib import Path

import dgl
import dgl.data
import torch

from zoo.data.cards import DatasetError, card_path, import_source_object
from zoo.data.graph_data import GraphData, from_graphs
from zoo.data.mirror import Roots, ensure_raw_folder, guard_derived


def dgl_class(card: dict) -> type:
    """Import the class named by ``source.dgl_class`` (e.g. ``dgl.data.CoraGraphDataset``)."""
    return import_source_object(card, "dgl_class", f" with dgl {dgl.__version__}")


def _stub(cls: type, raw_dir: Path):
    """An instance of ``cls`` that skips loading: DGL's own url, raw_path and download()."""
    stub_cls = type(cls.__name__, (cls,), {"_load": lambda self: None})
    return stub_cls(raw_dir=str(raw_dir), verbose=False)


def ensure_dgl_raw_folder(card: dict, cls: type, *, data_root: Path | None, cache_root: Path, offline: bool) -> Path:
    """Fail unless DGL reads the card's raw folder, then mirror / verify / download it into
    ``cache_root`` (see :func:`zoo.data.mirror.ensure_raw_folder`); ``cache_root`` is the
    ``raw_dir`` to give the DGL class."""
    source = card["source"]
    stub = _stub(cls, cache_root)
    folder = Path(stub.raw_path).name
    if folder != source["raw_folder"]:
        repo = os.environ.get("DGL_REPO")
        cause = (
            f"DGL_REPO is set to {repo!r}, which changes DGL's URL and folder name; unset it."
            if repo
            else f"The card does not match dgl {dgl.__version__}; update source.url and raw_folder."
        )
        raise DatasetError(
            f"Dataset {card['name']!r}: DGL would read {folder!r} from {stub.url.strip()}, but the card "
            f"{card_path(card['name'])} names {source['raw_folder']!r} from {source.get('url')}. {cause}"
        )
    return ensure_raw_folder(card, data_root=data_root, cache_root=cache_root, offline=offline)


def build_dgl(card: dict, cls: type, cache_root: Path, **kwargs):
    """``cls(raw_dir=cache_root, **kwargs)`` on the verified raw folder; DGL's processed caches
    there are checked against the zoo's record first (:func:`zoo.data.mirror.guard_derived`)."""
    with guard_derived(cache_root / card["source"]["raw_folder"], card["source"]["files"]):
        return cls(raw_dir=str(cache_root), verbose=False, **kwargs)


class PeptidesStructuralDataset(dgl.data.PeptidesStructuralDataset):
    """DGL's Peptides-struct class with its labels fixed: DGL 2.1.0's ``process`` collects each
    target row as a pandas Series and ``torch.as_tensor`` cannot stack those ("could not determine
    the shape of object type 'Series'"), so the class never loads. Rows are kept as floats here."""

    def process(self):
        self.labels = _FloatRows()
        super().process()


class _FloatRows(list):
    """A list that stores each row appended to it as a list of floats."""

    def append(self, row):
        super().append([float(value) for value in row])


def load_dgl_graphs(card: dict, roots: Roots, *, limit: int | None, **_) -> GraphData:
    """A graph-level DGL dataset on its raw files mirrored into the cache.

    The split is the class's ``get_idx_split()``, or, when the card has ``source.split_modes``
    (e.g. ``{train: train, val: valid, test: test}``), one instance per split built with
    ``mode=<value>``, concatenated in train, val, test order.
    """
    cls = dgl_class(card)
    ensure_dgl_raw_folder(card, cls, data_root=roots.data, cache_root=roots.cache, offline=roots.offline)
    modes = card["source"].get("split_modes")
    if modes:
        parts = {k: build_dgl(card, cls, roots.cache, mode=mode) for k, mode in modes.items()}
        starts = torch.tensor([0, *(len(part) for part in parts.values())]).cumsum(0).tolist()
        split = {k: torch.arange(a, b) for k, a, b in zip(parts, starts, starts[1:])}
    else:
        parts = {"all": build_dgl(card, cls, roots.cache)}
        split = parts["all"].get_idx_split()
    pairs = [part[i] for part in parts.values() for i in range(len(part))]
    graphs = [g for g, _ in pairs]
    targets = torch.stack([torch.as_tensor(y) for _, y in pairs]).float().reshape(len(graphs), -1)
    return from_graphs(card, graphs, targets, split, limit=limit,
                       source=f"dgl {card['source']['dgl_class']}", version=f"dgl{dgl.__version__}")
