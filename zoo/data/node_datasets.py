"""Node-classification datasets: a card in (``source.kind: dgl``: DGL's dataset class underneath;
``ogb``: OGB's ``DglNodePropPredDataset`` with its official split; ``synthetic``:
:func:`zoo.data.synthetic.synthetic_sbm_graph` with the card's parameters), one split out."""
from __future__ import annotations

import inspect
import operator
from dataclasses import dataclass, field, replace
from pathlib import Path

import dgl
import torch

from zoo.data.cards import DatasetError, card_path, load_card
from zoo.data.dgl_source import build_dgl, dgl_class, ensure_dgl_raw_folder
from zoo.data.mirror import resolve_roots
from zoo.data.ogb_source import load_ogb_node_graph
from zoo.data.synthetic import synthetic_sbm_graph

MASKS = ("train_mask", "val_mask", "test_mask")


@dataclass
class NodeData:
    """One node-classification graph with one train/val/test split.

    ``graph`` carries structure only (no ndata): DGL's edges with self-loops removed and then
    exactly one self-loop per node added. ``split`` is the split index actually used.
    """

    graph: dgl.DGLGraph
    features: torch.Tensor = field(repr=False)
    labels: torch.Tensor = field(repr=False)
    train_mask: torch.Tensor = field(repr=False)
    val_mask: torch.Tensor = field(repr=False)
    test_mask: torch.Tensor = field(repr=False)
    num_classes: int
    split: int
    card: dict = field(repr=False)

    def to(self, device) -> "NodeData":
        """A copy with the graph, features, labels and masks on ``device`` (self when already there)."""
        if self.features.device == torch.device(device):
            return self
        return replace(self, graph=self.graph.to(device), features=self.features.to(device),
                       labels=self.labels.to(device), **{name: getattr(self, name).to(device) for name in MASKS})


def load_node_dataset(
    name: str,
    split: int = 0,
    *,
    data_root: str | Path | None = None,
    cache_root: str | Path | None = None,
    offline: bool | None = None,
) -> NodeData:
    """Load the node dataset of card ``name`` with split ``split % num_splits``.

    Raw files come from ``data_root`` (default ``$ZOO_DATA``, never written to), else the
    cache ``cache_root`` (default ``$ZOO_CACHE``, else ~/.cache/zoo), else a download unless
    ``offline`` (default: ``$ZOO_OFFLINE`` is 1/true). See :mod:`zoo.data.mirror`.

    >>> data = load_node_dataset("texas", split=3)  # ZOO_DATA or a download
    >>> data.graph.num_nodes(), data.num_classes
    (183, 5)
    """
    card = load_card(name)
    if card["task"] != "node_classification":
        raise DatasetError(
            f"Card {card['name']!r} is a {card['task']!r} dataset; "
            "load_node_dataset only loads node_classification cards."
        )
    index = _split_index(card, split)
    if card["source"]["kind"] == "synthetic":
        return _synthetic(card, index)
    roots = resolve_roots(data_root, cache_root, offline)
    if card["source"]["kind"] == "ogb":
        return _node_data(card, *load_ogb_node_graph(card, roots), index)
    cls = dgl_class(card)
    data_root, cache_root, offline = roots
    ensure_dgl_raw_folder(card, cls, data_root=data_root, cache_root=cache_root, offline=offline)
    dataset = build_dgl(card, cls, cache_root)
    return _node_data(card, dataset[0], dataset.num_classes, index)


def _synthetic(card: dict, index: int) -> NodeData:
    """The card's generated graph: ``synthetic_sbm_graph(**source.parameters)`` (no files)."""
    parameters = card["source"]["parameters"]
    try:
        arguments = inspect.signature(synthetic_sbm_graph).bind(**parameters)
    except TypeError as err:
        raise DatasetError(f"{card_path(card['name'])}: source.parameters {parameters} do not fit "
                           f"synthetic_sbm_graph ({err}); see help(zoo.data.synthetic_sbm_graph)") from None
    arguments.apply_defaults()
    try:
        g = synthetic_sbm_graph(**arguments.arguments)
    except ValueError as err:
        raise DatasetError(f"{card_path(card['name'])}: source.parameters: {err}") from None
    return _node_data(card, g, arguments.arguments["num_classes"], index)


def _split_index(card: dict, split: int) -> int:
    """Split column for ``split``: ``split mod num_splits`` (always 0 for a single split)."""
    try:
        split = operator.index(split)
    except TypeError:
        raise TypeError(f"split must be an int, got {split!r}") from None
    if split < 0:
        raise ValueError(f"split must be >= 0, got {split}")
    return split % card["split"]["num_splits"]


def _node_data(card: dict, g: dgl.DGLGraph, num_classes: int, index: int) -> NodeData:
    """Pick split column ``index`` and rebuild the graph with one self-loop per node."""
    if num_classes != card["num_classes"]:
        raise DatasetError(
            f"Dataset {card['name']!r}: DGL reports {num_classes} classes, the card "
            f"{card_path(card['name'])} says {card['num_classes']}."
        )
    num_splits = card["split"]["num_splits"]
    masks = {}
    for key in MASKS:
        mask = g.ndata[key]
        columns = mask.shape[1] if mask.dim() == 2 else 1
        if columns != num_splits:
            raise DatasetError(
                f"Dataset {card['name']!r}: DGL gives {columns} split(s) in {key}, the card "
                f"{card_path(card['name'])} says num_splits: {num_splits}."
            )
        masks[key] = (mask[:, index] if mask.dim() == 2 else mask).bool()
    graph = dgl.graph(g.edges(), num_nodes=g.num_nodes())
    graph = dgl.add_self_loop(dgl.remove_self_loop(graph))
    return NodeData(
        graph=graph,
        features=g.ndata["feat"].float(),
        labels=g.ndata["label"].long(),
        num_classes=num_classes,
        split=index,
        card=card,
        **masks,
    )
