"""Graph-dataset cards, loaders (offline), the scaffold split, and batching.

Full-size loads (all 12k ZINC molecules, all 41k HIV molecules, Peptides-func) run only with
ZOO_SLOW=1; the default run uses ``limit=`` subsets and stays well under a minute.
"""
import csv
import os
import re
import warnings

import dgl
import pandas as pd
import pytest
import torch

from zoo.data import DatasetError, DatasetNotFoundError, load_card
from zoo.data import dgl_source
from zoo.data import graph_datasets as gd
from zoo.data.graph_datasets import (
    GraphData,
    collate,
    graph_dataset_names,
    load_csv_dataset,
    load_graph_dataset,
    make_dataloaders,
)
from zoo.data.mirror import sha256_file
from zoo.data.molecules import FEATURIZER_SPEC, penalized_logp
from zoo.data.scaffold import murcko_scaffold, scaffold_split, split_by_scaffold

slow = pytest.mark.skipif(os.environ.get("ZOO_SLOW") != "1", reason="slow: set ZOO_SLOW=1")

GRAPH_CARDS = {
    # name: (task, metric, num_tasks, featurizer, staged offline)
    "zinc_smiles": ("graph_regression", "mae", 1, "ogb-smiles2graph", True),
    "zinc": ("graph_regression", "mae", 1, "benchmarking-gnns-zinc-typedict", False),
    "molhiv": ("graph_classification", "roc_auc", 1, "ogb-smiles2graph", False),
    "molpcba": ("graph_classification", "ap", 128, "ogb-smiles2graph", False),
    "peptides_func": ("graph_classification", "ap", 10, "ogb-smiles2graph", True),
    "peptides_struct": ("graph_regression", "mae", 11, "ogb-smiles2graph", False),
}


def _offline(zoo_data, zoo_cache):
    return {"data_root": zoo_data, "cache_root": zoo_cache, "offline": True, "progress": False}


# ----------------------------------------------------------------------------- cards


def test_every_graph_card_has_a_loader():
    assert sorted(GRAPH_CARDS) == graph_dataset_names()


@pytest.mark.parametrize("name", sorted(GRAPH_CARDS))
def test_graph_card_fields(name):
    task, metric, num_tasks, featurizer, _ = GRAPH_CARDS[name]
    card = load_card(name)
    assert card["name"] == name and card["title"] and card["citation"] and card["notes"]
    assert (card["task"], card["metric"], card["num_tasks"], card["featurizer"]) == (task, metric, num_tasks, featurizer)
    assert card["source"]["url"].startswith("http")
    assert card["split"]["protocol"] and card["split"]["rule"] and card["split"]["split_source"]
    assert set(card["split"]["sizes"]) == {"train", "val", "test"}


def test_zinc_smiles_card_says_it_is_not_canonical_zinc():
    card = load_card("zinc_smiles")
    assert "NOT the benchmarking-gnns" in card["title"]
    assert "never mix" in card["notes"] and "penalized logP" in card["target"]


def test_molhiv_card_names_its_fallback_split():
    fallback = load_card("molhiv")["fallback"]
    assert fallback["split_source"] == "scaffold split computed here; OGB membership unverified"
    assert fallback["target_columns"] == ["HIV_active"]


@pytest.mark.parametrize("name", ["zinc_smiles", "molhiv", "peptides_func"])
def test_card_hashes_match_offline_files(name, zoo_data):
    card = load_card(name)
    source = card.get("fallback", card["source"])
    for file, expected in source["files"].items():
        assert sha256_file(zoo_data / source["raw_folder"] / file) == expected, file


@pytest.mark.parametrize("name", ["zinc", "peptides_func", "peptides_struct"])
def test_dgl_cards_match_dgl_folder(name, tmp_path, monkeypatch):
    monkeypatch.delenv("DGL_REPO", raising=False)
    card = load_card(name)
    stub = dgl_source._stub(dgl_source.dgl_class(card), tmp_path)
    assert stub.raw_path.rsplit("/", 1)[1] == card["source"]["raw_folder"]
    assert stub.url.strip() == card["source"]["url"]


def test_non_graph_card_is_rejected():
    with pytest.raises(DatasetError, match="node_classification"):
        load_graph_dataset("cora")
    with pytest.raises(ValueError, match="limit"):
        load_graph_dataset("zinc_smiles", limit=1)
    with pytest.raises(ValueError, match="only to molhiv"):
        load_graph_dataset("zinc_smiles", source="csv")


# ----------------------------------------------------------------------------- ZINC from SMILES


def test_zinc_smiles_subset(zoo_data, zoo_cache, monkeypatch):
    data = load_graph_dataset("zinc_smiles", limit=300, **_offline(zoo_data, zoo_cache))
    assert isinstance(data, GraphData) and len(data) == 300 and data.num_tasks == 1
    assert data.sizes == {"train": 300, "val": 0, "test": 0}  # rows 0-9999 are train
    assert data.featurizer == FEATURIZER_SPEC and data.task == "graph_regression"
    assert data.split_source == "Graphium indexes_train_val_test.csv" and not data.report
    g = data.graphs[0]
    assert (g.num_nodes(), g.num_edges()) == (28, 60)  # as MANIFEST documents row 0
    assert g.ndata["feat"].shape == (28, 9) and g.edata["feat"].shape == (60, 3)
    df = pd.read_csv(zoo_data / "zinc12k_graphium_csv" / "smiles_score.csv", nrows=300)
    assert data.smiles == df.SMILES.tolist()
    expected = torch.tensor([penalized_logp(s) for s in df.SMILES[:20]])
    torch.testing.assert_close(data.targets[:20, 0], expected, atol=1e-5, rtol=0)
    # the CSV's score lacks the ring penalty; the target has it
    cycle = torch.tensor(df.score.values) - data.targets[:, 0].double()  # score = logp - SA
    assert (cycle > -1e-4).all() and (cycle > 0.5).any()

    def no_rebuild(*args, **kwargs):
        raise AssertionError("featurized again instead of reading the cache")

    monkeypatch.setattr(gd, "read_smiles_csv", no_rebuild)
    again = load_graph_dataset("zinc_smiles", limit=300, **_offline(zoo_data, zoo_cache))
    torch.testing.assert_close(again.targets, data.targets)
    assert again.dataset_id == data.dataset_id


def test_zinc_smiles_with_pe_and_loaders(zoo_data, zoo_cache):
    data = load_graph_dataset("zinc_smiles", limit=64, pe={"lap_k": 4, "rwse_k": 8}, **_offline(zoo_data, zoo_cache))
    assert data.pe_spec == {"lap_k": 4, "rwse_k": 8, "version": 1}
    loaders = make_dataloaders(data, batch_size=16, seed=1)
    graph, y = next(iter(loaders["train"]))
    assert graph.batch_size == 16 and y.shape == (16, 1)
    assert graph.ndata["lap_eigvec"].shape[1] == 4 and graph.ndata["rwse"].shape[1] == 8
    assert len(loaders["val"]) == 0
    order = lambda: torch.cat([b[1] for b in make_dataloaders(data, batch_size=16, seed=1)["train"]])
    torch.testing.assert_close(order(), order())  # seeded shuffling is reproducible
    assert sorted(order()[:, 0].tolist()) == sorted(data.targets[:, 0].tolist())


@slow
def test_zinc_smiles_full(zoo_data, zoo_cache):
    data = load_graph_dataset("zinc_smiles", **_offline(zoo_data, zoo_cache))
    assert data.sizes == {"train": 10000, "val": 1000, "test": 1000}
    df = pd.read_csv(zoo_data / "zinc12k_graphium_csv" / "smiles_score.csv")
    assert data.split["val"][0].item() == 10000 and len(data.smiles) == len(df)
    diff = (torch.tensor(df.logp.values - df.SA.values) - data.targets[:, 0].double()).abs()
    assert (diff > 1e-4).sum().item() == 449  # the molecules with rings larger than 6 (MANIFEST)


# ----------------------------------------------------------------------------- molhiv


def test_molhiv_offline_falls_back_to_csv(zoo_data, zoo_cache):
    with pytest.warns(UserWarning, match="scaffold split computed here"):
        data = load_graph_dataset("molhiv", limit=300, **_offline(zoo_data, zoo_cache))
    assert data.split_source == "scaffold split computed here; OGB membership unverified"
    assert data.source == "csv moleculenet/hiv" and data.metric == "roc_auc"
    assert len(data) == 299 and sum(data.sizes.values()) == 299
    assert [(b.row, b.line) for b in data.report] == [(137, 139)]
    assert "valence" in data.report[0].reason
    assert set(data.targets[:, 0].tolist()) <= {0.0, 1.0}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        quiet = load_graph_dataset("molhiv", limit=300, source="csv", **_offline(zoo_data, zoo_cache))
    assert quiet.dataset_id == data.dataset_id


def test_molhiv_ogb_offline_is_not_found(zoo_data, zoo_cache):
    with pytest.raises(DatasetNotFoundError, match=re.escape(load_card("molhiv")["source"]["url"])):
        load_graph_dataset("molhiv", source="ogb", **_offline(zoo_data, zoo_cache))


_HIV = {}


def _hiv_smiles(zoo_data):
    if not _HIV:
        _HIV["smiles"] = pd.read_csv(zoo_data / "moleculenet" / "hiv" / "HIV.csv").smiles.tolist()
    return _HIV["smiles"]


def test_hiv_scaffold_split_sizes_match_manifest(zoo_data):
    smiles = _hiv_smiles(zoo_data)
    assert len(smiles) == 41127
    split = scaffold_split(smiles)
    assert {k: len(v) for k, v in split.items()} == {"train": 32901, "val": 4113, "test": 4113}
    assert sorted(split["train"] + split["val"] + split["test"]) == list(range(41127))


def test_scaffold_split_rule():
    assert murcko_scaffold("CC(=O)Oc1ccccc1C(=O)O") == "c1ccccc1"
    assert murcko_scaffold("C[C@H](N)C(=O)O") == "" and murcko_scaffold("not a smiles") == ""
    # the largest groups go to train first; ties broken by the first index, later first
    split = split_by_scaffold(["x", "y", "x", "z", "y", "w", "v", "u", "t", "s"], 0.6, 0.2)
    assert split == {"train": [0, 1, 2, 4, 8, 9], "val": [6, 7], "test": [3, 5]}
    with pytest.raises(ValueError, match="frac_train"):
        split_by_scaffold(["a"], 0.9, 0.2)


@slow
def test_molhiv_csv_full(zoo_data, zoo_cache):
    data = load_graph_dataset("molhiv", source="csv", **_offline(zoo_data, zoo_cache))
    assert len(data) == 41120 and len(data.report) == 7
    assert data.sizes == {"train": 32894, "val": 4113, "test": 4113}
    assert data.targets.sum().item() == 1443


# ----------------------------------------------------------------------------- not staged


@pytest.mark.parametrize("name", ["molpcba", "zinc", "peptides_struct"])
def test_not_staged_datasets_raise_not_found_with_url(name, zoo_data, zoo_cache):
    url = load_card(name)["source"]["url"]
    with pytest.raises(DatasetNotFoundError, match=re.escape(url)):
        load_graph_dataset(name, **_offline(zoo_data, zoo_cache))


def _toy_graphs(n, ogb_features=False):
    graphs = []
    for i in range(n):
        g = dgl.graph(([0, 1], [1, 0]), num_nodes=2 + i % 3)
        g.ndata["feat"] = torch.zeros((g.num_nodes(), 9) if ogb_features else g.num_nodes(), dtype=torch.int64)
        g.edata["feat"] = torch.zeros((2, 3) if ogb_features else 2, dtype=torch.int64)
        graphs.append(g)
    return graphs


def test_zinc_reads_dgl_bins_from_the_cache(tmp_path):
    """Stand-in DGL binaries in the cache (the real ones are not staged) exercise the loader."""
    folder = tmp_path / "zinc_8af4f93b"
    folder.mkdir()
    for mode, n in [("train", 5), ("valid", 2), ("test", 3)]:
        dgl.save_graphs(str(folder / f"ZincDGL_{mode}.bin"), _toy_graphs(n), {"g_label": torch.arange(n).float()})
    data = load_graph_dataset("zinc", data_root=None, cache_root=tmp_path, offline=True, progress=False)
    assert data.sizes == {"train": 5, "val": 2, "test": 3} and data.targets.shape == (10, 1)
    assert data.split["val"].tolist() == [5, 6] and data.targets[5:7, 0].tolist() == [0.0, 1.0]
    assert data.featurizer["name"] == "benchmarking-gnns-zinc-typedict"
    assert data.split_source.startswith("benchmarking-gnns")
    small = load_graph_dataset("zinc", cache_root=tmp_path, offline=True, limit=6, progress=False)
    assert small.sizes == {"train": 5, "val": 1, "test": 0}


def test_molhiv_uses_ogb_files_when_present(tmp_path):
    """A stand-in OGB folder (processed graphs + split files) is used instead of the CSV."""
    root = tmp_path / "ogb" / "ogbg_molhiv"
    (root / "processed").mkdir(parents=True)
    (root / "RELEASE_v1.txt").write_text("")
    dgl.save_graphs(str(root / "processed" / "dgl_data_processed"), _toy_graphs(10, ogb_features=True),
                    {"labels": torch.tensor([[0], [1]] * 5)})
    (root / "split" / "scaffold").mkdir(parents=True)
    for part, idx in [("train", range(8)), ("valid", [8]), ("test", [9])]:
        pd.DataFrame(list(idx)).to_csv(root / "split" / "scaffold" / f"{part}.csv.gz", header=False, index=False)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        data = load_graph_dataset("molhiv", cache_root=tmp_path, offline=True, progress=False)
    assert data.source == "ogb ogbg-molhiv" and data.split_source == "OGB scaffold split (ogbg-molhiv)"
    assert data.sizes == {"train": 8, "val": 1, "test": 1}
    assert data.targets.dtype == torch.float32 and data.targets[:2, 0].tolist() == [0.0, 1.0]
    (tmp_path / "ogb" / "ogbg_molhiv" / "RELEASE_v1.txt").unlink()
    with pytest.raises(DatasetError, match="RELEASE"):
        load_graph_dataset("molhiv", cache_root=tmp_path, offline=True, progress=False)


# ----------------------------------------------------------------------------- peptides


def test_peptides_func_offline_files_resolve(zoo_data, zoo_cache):
    card = load_card("peptides_func")
    folder = dgl_source.ensure_dgl_raw_folder(card, dgl_source.dgl_class(card), data_root=zoo_data,
                                              cache_root=zoo_cache, offline=True)
    assert folder == zoo_cache / "Peptides-func_1ca91230"
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith(".")) == sorted(card["source"]["files"])
    assert not (zoo_data / "Peptides-func_1ca91230" / "Peptides-func.bin").exists()


@slow
def test_peptides_func_full(zoo_data, zoo_cache):
    data = load_graph_dataset("peptides_func", **_offline(zoo_data, zoo_cache))
    assert len(data) == 15535 and data.num_tasks == 10
    assert data.sizes == {"train": 10873, "val": 2331, "test": 2331}
    assert data.graphs[0].ndata["feat"].shape[1] == 9
    assert not (zoo_data / "Peptides-func_1ca91230" / "Peptides-func.bin").exists()


# ----------------------------------------------------------------------------- user CSVs, collate


def _toy_csv(path):
    smiles = ["c1ccccc1C", "c1ccccc1O", "CCO", "C1CCCCC1N", "CC", "c1ccncc1", "C1CC", "CCCC", "c1ccccc1CC", "C1CCC1"]
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(["smiles", "y"])
        writer.writerows([s, i] for i, s in enumerate(smiles))
    return path


def test_load_csv_dataset_splits(tmp_path):
    path = _toy_csv(tmp_path / "toy.csv")
    data = load_csv_dataset(path, "smiles", ["y"], cache_root=tmp_path, progress=False)
    assert len(data) == 9 and [b.line for b in data.report] == [8]
    assert sum(data.sizes.values()) == 9 and data.metric == "mae"
    assert data.split_source.startswith("scaffold split computed here")
    rand = load_csv_dataset(path, "smiles", "y", split="random", seed=3, task="graph_classification",
                            cache_root=tmp_path, progress=False)
    assert rand.metric == "roc_auc" and rand.sizes == {"train": 7, "val": 1, "test": 1}
    with pytest.raises(ValueError, match="split must be"):
        load_csv_dataset(path, "smiles", "y", split="stratified", progress=False)
    with_pe = load_csv_dataset(path, "smiles", "y", pe={"rwse_k": 3}, cache_root=tmp_path, progress=False)
    assert with_pe.graphs[0].ndata["rwse"].shape == (7, 3)


def test_collate_batches_graphs_and_stacks_targets():
    graphs = [dgl.graph(([0], [1]), num_nodes=2), dgl.graph(([0, 1], [1, 2]), num_nodes=3)]
    batch, y = collate([(graphs[0], torch.tensor([1.0, 2.0])), (graphs[1], torch.tensor([3.0, float("nan")]))])
    assert batch.batch_size == 2 and batch.num_nodes() == 5 and y.shape == (2, 2)
    assert torch.isnan(y[1, 1])


@pytest.mark.parametrize("name, rows, target", [("esol", 1128, "measured log solubility in mols per litre"),
                                                ("freesolv", 642, "expt")])
def test_csv_card_file_gives_the_verified_moleculenet_csv(zoo_data, zoo_cache, name, rows, target):
    card = load_card(name)
    path = gd.csv_card_file(name, data_root=zoo_data, cache_root=zoo_cache, offline=True)
    assert sha256_file(path) == card["source"]["files"][path.name]
    table = pd.read_csv(path)
    assert len(table) == rows and card["source"]["target_columns"] == [target] and target in table
    with pytest.raises(DatasetError, match="no file 'x.csv'"):
        gd.csv_card_file(name, "x.csv", data_root=zoo_data, cache_root=zoo_cache, offline=True)
    with pytest.raises(DatasetError, match="not a CSV card"):
        gd.csv_card_file("molpcba", data_root=zoo_data, cache_root=zoo_cache, offline=True)
