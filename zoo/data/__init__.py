"""Data floor: dataset cards, offline-first raw files, node and graph dataset loaders (dispatched
on each card's ``source.kind``), molecule featurizers chosen by spec (OGB's, dgllife's) and cached
positional encodings."""
from zoo.data.cards import (
    ChecksumMismatchError,
    DatasetError,
    DatasetNotFoundError,
    list_cards,
    load_card,
)
from zoo.data.csv_source import csv_card_file, load_csv_dataset
from zoo.data.featurizers import (
    FEATURIZER_SPEC,
    FEATURIZERS,
    DgllifeFeaturizer,
    Featurizer,
    InvalidSmilesError,
    OgbFeaturizer,
    featurizer_from_spec,
    smiles_to_graph,
)
from zoo.data.graph_data import GraphData, collate, make_dataloaders
from zoo.data.graph_datasets import load_graph_dataset
from zoo.data.molecules import BadSmiles, CsvError, SmilesTable, penalized_logp, read_smiles_csv
from zoo.data.node_datasets import NodeData, load_node_dataset
from zoo.data.positional import PESpec, add_positional_encodings, laplacian_pe, random_walk_se
from zoo.data.remote import DownloadError, download
from zoo.data.scaffold import scaffold_split
from zoo.data.synthetic import contextual_sbm_card, synthetic_sbm_graph

__all__ = [
    "FEATURIZERS", "FEATURIZER_SPEC", "BadSmiles", "ChecksumMismatchError", "CsvError", "DatasetError",
    "DatasetNotFoundError", "DgllifeFeaturizer", "DownloadError", "Featurizer", "GraphData", "InvalidSmilesError",
    "NodeData", "OgbFeaturizer", "PESpec", "SmilesTable", "add_positional_encodings", "collate",
    "contextual_sbm_card", "csv_card_file", "download", "featurizer_from_spec", "laplacian_pe", "list_cards", "load_card",
    "load_csv_dataset", "load_graph_dataset", "load_node_dataset", "make_dataloaders", "penalized_logp",
    "random_walk_se", "read_smiles_csv", "scaffold_split", "smiles_to_graph", "synthetic_sbm_graph",
]
