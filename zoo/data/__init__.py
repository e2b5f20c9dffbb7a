"""Data floor: dataset cards, offline-first raw files, and dataset loaders."""
from zoo.data.cards import (
    ChecksumMismatchError,
    DatasetError,
    DatasetNotFoundError,
    list_cards,
    load_card,
)
from zoo.data.node_datasets import NodeData, load_node_dataset

__all__ = [
    "ChecksumMismatchError",
    "DatasetError",
    "DatasetNotFoundError",
    "NodeData",
    "list_cards",
    "load_card",
    "load_node_dataset",
]
