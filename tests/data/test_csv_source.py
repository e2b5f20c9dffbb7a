"""CSV sources: the shipped CSV cards against their files, new CSV cards written in a temporary
cards folder (index-file, scaffold and random splits, a computed target), and user CSVs."""
import csv
import os

import pandas as pd
import pytest
import torch
import yaml

from zoo.data import DatasetError, FEATURIZER_SPEC, csv_card_file, load_card, load_csv_dataset, load_graph_dataset
from zoo.data import csv_source
from zoo.data.csv_source import random_split
from zoo.data.mirror import sha256_file
from zoo.data.featurizers import smiles_to_graph
from zoo.data.molecules import penalized_logp

slow = pytest.mark.skipif(os.environ.get("ZOO_SLOW") != "1", reason="slow: set ZOO_SLOW=1")
TOY = ["c1ccccc1C", "c1ccccc1O", "CCO", "C1CCCCC1N", "CC", "c1ccncc1", "C1CC", "CCCC", "c1ccccc1CC", "C1CCC1"]


def _offline(zoo_data, zoo_cache):
    return {"data_root": zoo_data, "cache_root": zoo_cache, "offline": True, "progress": False}


def _write_csv(path, header, rows):
    with open(path, "w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(header)
        writer.writerows(rows)
    return path


def _toy_card(tmp_path, monkeypatch, split, **source):
    """A CSV card ``toy`` in a temporary cards folder, its raw folder ``toy_raw`` in a data root."""
    raw = tmp_path / "data" / "toy_raw"
    raw.mkdir(parents=True)
    _write_csv(raw / "mols.csv", ["smiles", "y"], [[s, i] for i, s in enumerate(TOY)])
    files = {"mols.csv": None}
    if split["protocol"] == "fixed_index_file":
        pd.DataFrame({"train": [0, 1, 2, 3, 6, 7], "val": [4, 5, None, None, None, None],
                      "test": [8, 9, None, None, None, None]}).to_csv(raw / "idx.csv", index=False)
        files["idx.csv"] = None
        source["table"] = "mols.csv"
    files = {name: sha256_file(raw / name) for name in files}
    card = {"name": "toy", "title": "toy", "task": "graph_regression", "num_tasks": 1, "metric": "mae",
            "featurizer": "ogb-smiles2graph", "citation": "none",
            "source": {"kind": "csv", "url": "https://example.org/mols.csv", "raw_folder": "toy_raw", "files": files,
                       "file_urls": {name: "https://example.org/" + name for name in files},
                       "smiles_column": "smiles", **source},
            "split": {"split_source": "toy split", **split}}
    (tmp_path / "cards").mkdir()
    (tmp_path / "cards" / "toy.yaml").write_text(yaml.safe_dump(card))
    monkeypatch.setenv("ZOO_CARDS", str(tmp_path / "cards"))
    return {"data_root": tmp_path / "data", "cache_root": tmp_path / "cache", "offline": True, "progress": False}


# ----------------------------------------------------------------------------- new CSV cards


def test_index_file_card_with_a_computed_target(tmp_path, monkeypatch):
    roots = _toy_card(tmp_path, monkeypatch, {"protocol": "fixed_index_file", "index_file": "idx.csv"},
                      target_function="zoo.data.molecules.penalized_logp")
    data = load_graph_dataset("toy", **roots)
    # row 6 (C1CC) does not parse: positions after it shift down by one
    assert [b.row for b in data.report] == [6] and len(data) == 9
    assert {k: v.tolist() for k, v in data.split.items()} == {"train": [0, 1, 2, 3, 6], "val": [4, 5], "test": [7, 8]}
    kept = TOY[:6] + TOY[7:]
    assert data.smiles == kept and data.source == "csv toy_raw" and data.split_source == "toy split"
    torch.testing.assert_close(data.targets[:, 0], torch.tensor([penalized_logp(s) for s in kept]))
    assert data.graphs[3].num_nodes() == smiles_to_graph(kept[3]).num_nodes() == 7
    assert data.featurizer == FEATURIZER_SPEC


def test_scaffold_card_splits_over_all_rows(tmp_path, monkeypatch):
    roots = _toy_card(tmp_path, monkeypatch, {"protocol": "scaffold", "fractions": [0.6, 0.2, 0.2]},
                      target_columns=["y"])
    data = load_graph_dataset("toy", **roots)
    # scaffolds over the 10 rows: "" {2, 4, 6 (unparseable), 7}, benzene {0, 1, 8}, cyclobutane {9},
    # pyridine {5}, cyclohexane {3}, in that order (size, first index descending). Train takes a group
    # while it stays within 6 rows, else val within 8 rows in all, else test:
    by_row = {"train": [2, 4, 6, 7, 9, 5], "val": [0, 1, 8], "test": [3]}
    to_position = lambda row: row - (row > 6)
    assert {k: v.tolist() for k, v in data.split.items()} == {
        k: sorted(to_position(r) for r in rows if r != 6) for k, rows in by_row.items()}
    assert data.targets[:, 0].tolist() == [0, 1, 2, 3, 4, 5, 7, 8, 9]  # the y column, row 6 dropped


def test_random_card_draws_its_split_from_the_seed(tmp_path, monkeypatch):
    roots = _toy_card(tmp_path, monkeypatch, {"protocol": "random", "fractions": [0.5, 0.25, 0.25]},
                      target_columns=["y"])
    first, again, other = (load_graph_dataset("toy", seed=s, **roots) for s in (1, 1, 2))
    assert first.sizes == {"train": 4, "val": 3, "test": 2}  # round(4.5) = 4, round(6.75) = 7 of 9
    assert first.split_source == "toy split, seed 1" and first.dataset_id == other.dataset_id
    assert all(torch.equal(first.split[k], again.split[k]) for k in first.split)
    assert any(not torch.equal(first.split[k], other.split[k]) for k in first.split)


def test_csv_card_is_featurized_once(tmp_path, monkeypatch):
    roots = _toy_card(tmp_path, monkeypatch, {"protocol": "scaffold", "fractions": [0.6, 0.2, 0.2]},
                      target_columns=["y"])
    data = load_graph_dataset("toy", **roots)

    def no_rebuild(*args, **kwargs):
        raise AssertionError("featurized again instead of reading the cache")

    def no_raw_folder(*args, **kwargs):
        raise AssertionError("the raw folder was mirrored or verified on a cache hit")

    monkeypatch.setattr(csv_source, "read_smiles_csv", no_rebuild)
    monkeypatch.setattr(csv_source, "ensure_raw_folder", no_raw_folder)
    again = load_graph_dataset("toy", **roots)
    assert again.dataset_id == data.dataset_id and again.smiles == data.smiles
    assert [b.row for b in again.report] == [6]


def test_csv_card_needs_the_smiles_featurizer(tmp_path, monkeypatch):
    roots = _toy_card(tmp_path, monkeypatch, {"protocol": "scaffold", "fractions": [0.6, 0.2, 0.2]},
                      target_columns=["y"])
    card = yaml.safe_load((tmp_path / "cards" / "toy.yaml").read_text())
    (tmp_path / "cards" / "toy.yaml").write_text(yaml.safe_dump({**card, "featurizer": "benchmarking-gnns-zinc-typedict"}))
    with pytest.raises(DatasetError, match="a csv source is featurized from SMILES, which "
                                           "'benchmarking-gnns-zinc-typedict' does not do; use one of ogb-smiles2graph"):
        load_graph_dataset("toy", **roots)


# ----------------------------------------------------------------------------- shipped CSV cards


def test_zinc_smiles_subset(zoo_data, zoo_cache):
    data = load_graph_dataset("zinc_smiles", limit=300, **_offline(zoo_data, zoo_cache))
    assert len(data) == 300 and data.num_tasks == 1 and data.featurizer == FEATURIZER_SPEC
    assert data.sizes == {"train": 300, "val": 0, "test": 0}  # rows 0-9999 are train
    assert data.split_source == "Graphium indexes_train_val_test.csv" and not data.report
    g = data.graphs[0]
    assert (g.num_nodes(), g.num_edges()) == (28, 60)  # as the card documents row 0
    assert g.ndata["feat"].shape == (28, 9) and g.edata["feat"].shape == (60, 3)
    df = pd.read_csv(zoo_data / "zinc12k_graphium_csv" / "smiles_score.csv", nrows=300)
    assert data.smiles == df.SMILES.tolist()
    expected = torch.tensor([penalized_logp(s) for s in df.SMILES[:20]])
    torch.testing.assert_close(data.targets[:20, 0], expected, atol=1e-5, rtol=0)
    # the CSV's score lacks the ring penalty; the target has it
    cycle = torch.tensor(df.score.values) - data.targets[:, 0].double()  # score = logp - SA
    assert (cycle > -1e-4).all() and (cycle > 0.5).any()


@slow
def test_zinc_smiles_full(zoo_data, zoo_cache):
    data = load_graph_dataset("zinc_smiles", **_offline(zoo_data, zoo_cache))
    assert data.sizes == {"train": 10000, "val": 1000, "test": 1000}
    df = pd.read_csv(zoo_data / "zinc12k_graphium_csv" / "smiles_score.csv")
    assert data.split["val"][0].item() == 10000 and len(data.smiles) == len(df)
    diff = (torch.tensor(df.logp.values - df.SA.values) - data.targets[:, 0].double()).abs()
    assert (diff > 1e-4).sum().item() == 449  # the molecules with rings larger than 6 (MANIFEST)


@slow
def test_molhiv_csv_full(zoo_data, zoo_cache):
    data = load_graph_dataset("molhiv", source="csv", **_offline(zoo_data, zoo_cache))
    assert len(data) == 41120 and len(data.report) == 7
    assert data.sizes == {"train": 32894, "val": 4113, "test": 4113}
    assert data.targets.sum().item() == 1443


def test_esol_card_split_is_the_user_csv_random_split(zoo_data, zoo_cache):
    data = load_graph_dataset("esol", seed=3, **_offline(zoo_data, zoo_cache))
    assert data.sizes == {"train": 902, "val": 113, "test": 113}  # round(902.4), round(1015.2) of 1128
    target = load_card("esol")["source"]["target_columns"]
    user = load_csv_dataset(csv_card_file("esol", data_root=zoo_data, cache_root=zoo_cache, offline=True),
                            "smiles", target, split="random", seed=3, progress=False)
    assert all(torch.equal(data.split[k], user.split[k]) for k in ("train", "val", "test"))
    torch.testing.assert_close(data.targets, user.targets)
    assert data.split_source.endswith("seed 3")


@pytest.mark.parametrize("name, rows, target", [("esol", 1128, "measured log solubility in mols per litre"),
                                                ("freesolv", 642, "expt")])
def test_csv_card_file_gives_the_verified_moleculenet_csv(zoo_data, zoo_cache, name, rows, target):
    card = load_card(name)
    path = csv_card_file(name, data_root=zoo_data, cache_root=zoo_cache, offline=True)
    assert sha256_file(path) == card["source"]["files"][path.name]
    table = pd.read_csv(path)
    assert len(table) == rows and card["source"]["target_columns"] == [target] and target in table
    with pytest.raises(DatasetError, match="no file 'x.csv'"):
        csv_card_file(name, "x.csv", data_root=zoo_data, cache_root=zoo_cache, offline=True)
    with pytest.raises(DatasetError, match="not a CSV card"):
        csv_card_file("molpcba", data_root=zoo_data, cache_root=zoo_cache, offline=True)


# ----------------------------------------------------------------------------- user CSVs


def test_random_split_sizes_and_partition():
    parts = random_split(7, (0.5, 0.25, 0.25), seed=0)
    assert [len(parts[k]) for k in ("train", "val", "test")] == [4, 1, 2]  # round(3.5) = 4, round(5.25) = 5
    assert sorted(torch.cat(list(parts.values())).tolist()) == list(range(7))
    assert all(v.tolist() == sorted(v.tolist()) for v in parts.values())
    assert {k: v.tolist() for k, v in random_split(7, (0.5, 0.25, 0.25), seed=0).items()} == \
        {k: v.tolist() for k, v in parts.items()}


def test_load_csv_dataset_splits(tmp_path):
    path = _write_csv(tmp_path / "toy.csv", ["smiles", "y"], [[s, i] for i, s in enumerate(TOY)])
    data = load_csv_dataset(path, "smiles", ["y"], cache_root=tmp_path, progress=False)
    assert len(data) == 9 and [b.line for b in data.report] == [8]
    assert sum(data.sizes.values()) == 9 and data.metric == "mae"
    assert data.split_source.startswith("scaffold split computed here")
    rand = load_csv_dataset(path, "smiles", "y", split="random", seed=3, task="graph_classification",
                            cache_root=tmp_path, progress=False)
    assert rand.metric == "roc_auc" and rand.sizes == {"train": 7, "val": 1, "test": 1}
    assert rand.split_source == "random split computed here (frac 0.8/0.1, seed 3)"
    with pytest.raises(ValueError, match="split must be"):
        load_csv_dataset(path, "smiles", "y", split="stratified", progress=False)
    with_pe = load_csv_dataset(path, "smiles", "y", pe={"rwse_k": 3}, cache_root=tmp_path, progress=False)
    assert with_pe.graphs[0].ndata["rwse"].shape == (7, 3)
