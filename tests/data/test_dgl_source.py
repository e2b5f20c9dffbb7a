"""DGL sources: the class named by a card, the raw folder DGL must read, and graph-level loading
through ``get_idx_split()`` (a stand-in Peptides-func folder) or ``split_modes`` (stand-in ZINC bins)."""
import os
import pickle

import dgl
import numpy as np
import pandas as pd
import pytest
import torch
import yaml
from ogb.utils import smiles2graph

from zoo.data import DatasetError, load_card, load_graph_dataset
from zoo.data import dgl_source
from zoo.data.cards import card_path
from zoo.data.mirror import Roots, sha256_file

slow = pytest.mark.skipif(os.environ.get("ZOO_SLOW") != "1", reason="slow: set ZOO_SLOW=1")
PEPTIDES = "Peptides-func_1ca91230"


def test_unimportable_class_is_named():
    card = {**load_card("cora"), "source": {**load_card("cora")["source"], "dgl_class": "dgl.data.NoSuchDataset"}}
    with pytest.raises(DatasetError, match="source.dgl_class 'dgl.data.NoSuchDataset' cannot be imported") as info:
        dgl_source.dgl_class(card)
    assert str(card_path("cora")) in str(info.value)


def test_card_must_name_the_folder_dgl_reads(tmp_path, monkeypatch):
    monkeypatch.delenv("DGL_REPO", raising=False)
    card = load_card("texas")
    card["source"]["raw_folder"] = "texas_00000000"
    with pytest.raises(DatasetError, match="DGL would read 'texas_205d1148' from https://data.dgl.ai/dataset/texas.zip"):
        dgl_source.ensure_dgl_raw_folder(card, dgl.data.TexasDataset, data_root=None, cache_root=tmp_path, offline=True)


def test_peptides_func_offline_files_resolve(zoo_data, zoo_cache):
    card = load_card("peptides_func")
    folder = dgl_source.ensure_dgl_raw_folder(card, dgl_source.dgl_class(card), data_root=zoo_data,
                                              cache_root=zoo_cache, offline=True)
    assert folder == zoo_cache / PEPTIDES
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(card["source"]["files"])
    assert not (zoo_data / PEPTIDES / "Peptides-func.bin").exists()


def test_a_dgl_graph_dataset_from_one_card(tmp_path, monkeypatch):
    """A new card for DGL's Peptides-func class over a 4-peptide stand-in: graphs as OGB's
    smiles2graph gives them, the labels column, the pickled split."""
    smiles = ["CC(N)C(=O)O", "NCC(=O)NCC(=O)O", "CC(C)C(N)C(=O)O", "OCC(N)C(=O)O"]
    labels = [[i % 2] * 5 + [1 - i % 2] * 5 for i in range(4)]
    raw = tmp_path / "data" / PEPTIDES
    raw.mkdir(parents=True)
    pd.DataFrame({"smiles": smiles, "labels": [str(row) for row in labels]}).to_csv(
        raw / "peptide_multi_class_dataset.csv.gz", index=False)
    split = {"train": np.array([0, 3]), "val": np.array([1]), "test": np.array([2])}
    (raw / "splits_random_stratified_peptide.pickle").write_bytes(pickle.dumps(split))
    card = load_card("peptides_func")
    card["name"], card["source"]["files"] = "tiny_peptides", {p.name: sha256_file(p) for p in raw.iterdir()}
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "tiny_peptides.yaml").write_text(yaml.safe_dump(card))
    monkeypatch.setenv("ZOO_CARDS", str(tmp_path / "cards"))
    data = load_graph_dataset("tiny_peptides", data_root=tmp_path / "data", cache_root=tmp_path / "cache",
                              offline=True, progress=False)
    assert {k: v.tolist() for k, v in data.split.items()} == {"train": [0, 3], "val": [1], "test": [2]}
    assert data.targets.tolist() == labels and data.source == "dgl dgl.data.PeptidesFunctionalDataset"
    for g, s in zip(data.graphs, smiles):
        ref = smiles2graph(s)
        assert g.num_nodes() == ref["num_nodes"] and g.num_edges() == ref["edge_index"].shape[1]
        assert torch.equal(g.ndata["feat"], torch.from_numpy(ref["node_feat"]))
    assert not (tmp_path / "data" / PEPTIDES / "Peptides-func.bin").exists()  # DGL wrote into the cache


def test_split_modes_build_one_instance_per_split(tmp_path):
    """Stand-in ZINC binaries in the cache (the real ones are not staged), pinned in a card: train,
    val, test files."""
    folder = tmp_path / "zinc_8af4f93b"
    folder.mkdir()
    for mode, n in [("train", 5), ("valid", 2), ("test", 3)]:
        graphs = [dgl.graph(([0], [1]), num_nodes=2 + i) for i in range(n)]
        dgl.save_graphs(str(folder / f"ZincDGL_{mode}.bin"), graphs, {"g_label": torch.arange(n).float()})
    card = load_card("zinc")
    card["source"]["files"] = {name: sha256_file(folder / name) for name in card["source"]["files"]}
    data = dgl_source.load_dgl_graphs(card, Roots(None, tmp_path, True), limit=None)
    assert {k: v.tolist() for k, v in data.split.items()} == {"train": [0, 1, 2, 3, 4], "val": [5, 6], "test": [7, 8, 9]}
    assert data.targets[:, 0].tolist() == [0, 1, 2, 3, 4, 0, 1, 0, 1, 2]
    assert [g.num_nodes() for g in data.graphs[5:7]] == [2, 3]
    assert data.featurizer["name"] == "benchmarking-gnns-zinc-typedict"
    assert data.split_source.startswith("benchmarking-gnns")
    small = dgl_source.load_dgl_graphs(card, Roots(None, tmp_path, True), limit=6)
    assert small.sizes == {"train": 5, "val": 1, "test": 0}


@slow
def test_peptides_func_full(zoo_data, zoo_cache):
    data = load_graph_dataset("peptides_func", data_root=zoo_data, cache_root=zoo_cache, offline=True, progress=False)
    assert len(data) == 15535 and data.num_tasks == 10
    assert data.sizes == {"train": 10873, "val": 2331, "test": 2331}
    assert data.graphs[0].ndata["feat"].shape[1] == 9
    assert not (zoo_data / PEPTIDES / "Peptides-func.bin").exists()
