"""The graph-property dataset container and its batching.

A :class:`GraphData` holds a list of DGL graphs, float32 targets ``[n, T]`` (NaN = missing
label) and a split ``{"train", "val", "test"} -> index tensor``; :func:`make_dataloaders` gives one
DataLoader per split whose batches are ``(dgl.batch(graphs), targets [B, T])``.

>>> from zoo.data import load_graph_dataset
>>> data = load_graph_dataset("zinc_smiles", limit=200, pe={"rwse_k": 16})  # ZOO_DATA or a download
>>> loaders = make_dataloaders(data, batch_size=32)
>>> graph, y = next(iter(loaders["train"]))  # a dgl.batch()ed graph and targets [32, 1]
>>> graph.batch_size, y.shape, sorted(graph.ndata)
(32, torch.Size([32, 1]), ['feat', 'rwse'])
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Sequence

import dgl
import torch
from torch.utils.data import DataLoader, Dataset

from zoo.data.cards import card_path
from zoo.data.featurizers import featurizer_from_spec
from zoo.data.positional import PESpec, add_positional_encodings

SPLITS = ("train", "val", "test")
GRAPH_TASKS = ("graph_regression", "graph_classification")


@dataclass
class GraphData:
    """One graph-property dataset with its split.

    ``featurizer`` is the spec of the featurizer that made the graphs (see
    :mod:`zoo.data.featurizers`). ``split_source`` says where the split comes from (e.g. OGB's
    files, or "scaffold split computed here; OGB membership unverified"); ``source`` says which
    files were read.
    ``dataset_id`` names this exact list of graphs (it keys the PE cache). ``report`` lists the
    CSV rows skipped for invalid SMILES.

    >>> from zoo.data import load_graph_dataset
    >>> data = load_graph_dataset("esol", pe={"lap_k": 8, "rwse_k": 16})  # ZOO_DATA or a download
    >>> {split: len(rows) for split, rows in data.split.items()}, data.task, data.metric  # a scaffold split
    ({'train': 902, 'val': 113, 'test': 113}, 'graph_regression', 'rmse')
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
    def model_inputs(self) -> dict:
        """The model arguments the graphs' features imply (e.g. dgllife's ``atom_features``), which
        a trainer passes with ``num_outputs``."""
        return featurizer_from_spec(self.featurizer).model_inputs()

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
    """Batch ``(graph, target)`` pairs: ``(dgl.batch(graphs), targets [B, T])``.

    >>> g, y = collate([(dgl.graph(([0], [1])), torch.tensor([1.0])),
    ...                 (dgl.graph(([0, 1, 2], [1, 2, 0])), torch.tensor([0.0]))])
    >>> g.batch_num_nodes().tolist(), y.shape
    ([2, 3], torch.Size([2, 1]))
    """
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

    >>> from zoo.data import load_graph_dataset
    >>> data = load_graph_dataset("esol", pe={"lap_k": 8, "rwse_k": 16})  # ZOO_DATA or a download
    >>> graphs, targets = next(iter(make_dataloaders(data, batch_size=64)["train"]))
    >>> graphs.batch_size, tuple(targets.shape), sorted(graphs.ndata)
    (64, (64, 1), ['feat', 'lap_eigval', 'lap_eigvec', 'rwse'])
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


def featurizer_spec(card: dict) -> dict:
    """The spec of the featurizer the card names, or :class:`DatasetError` naming the card."""
    return featurizer_from_spec(card["featurizer"], where=str(card_path(card["name"]))).spec


def from_graphs(card: dict, graphs: list, targets: torch.Tensor, split: dict, *, limit: int | None,
                source: str, version: str) -> GraphData:
    """GraphData of a dataset class's graphs, optionally cut to the first ``limit`` of them.

    ``split`` may use OGB's key ``valid`` for ``val``; ``version`` (e.g. ``dgl2.1.0``) enters
    the ``dataset_id``.
    """
    split = {{"valid": "val"}.get(k, k): torch.as_tensor(v).long() for k, v in split.items()}
    if limit is not None and limit < len(graphs):
        graphs, targets = graphs[:limit], targets[:limit]
        split = {k: v[v < limit] for k, v in split.items()}
    return GraphData(
        name=card["name"], graphs=graphs, targets=targets, split=split, task=card["task"],
        metric=card["metric"], featurizer=featurizer_spec(card), source=source,
        split_source=card["split"]["split_source"],
        dataset_id=f"{card['name']}-{version}-n{len(graphs)}", card=card,
    )
