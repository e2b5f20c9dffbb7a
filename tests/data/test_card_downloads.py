"""Every card without an offline copy, downloaded from a loopback server (no internet): a small
synthetic file in the upstream format at the card's URL (Planetoid ind.* pickles in a zip,
Platonov npz, LRGB csv.gz and split pickle, ZINC's DGL binaries in a zip, OGB's zip), its
checksum given through a temporary card in $ZOO_CARDS as a real card gives it, then the card is
loaded and trained for one epoch by the engine, and a changed cache file is refused."""
import hashlib
import io
import json
import pickle
import socket
from pathlib import Path

import dgl
import numpy as np
import pandas as pd
import pytest
import scipy.sparse as sp
import torch
from ogb.utils import smiles2graph

from tests.data.archives import zip_bytes
from zoo.data import ChecksumMismatchError, DatasetNotFoundError, load_card, load_graph_dataset, load_node_dataset
from zoo.data.mirror import STAMP, read_stamp
from zoo.engine.experiment import run_recipe
from zoo.engine.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]
NODE_OVERRIDES = ["model.hidden=8", "seeds=[0]"]
GRAPH_OVERRIDES = ["model.dim=16", "model.heads=2", "model.layers=1", "model.dim_pe=4", "model.lap_k=2",
                   "model.rwse_k=2", "optim.batch_size=4", "optim.warmup_epochs=0", "seeds=[0]"]
LRGB_TARGETS = ["Inertia_mass_a", "Inertia_mass_b", "Inertia_mass_c", "Inertia_valence_a", "Inertia_valence_b",
                "Inertia_valence_c", "length_a", "length_b", "length_c", "Spherocity", "Plane_best_fit"]
SMILES = ["CC(N)C(=O)O", "NCC(=O)NCC(=O)O", "CC(C)C(N)C(=O)O", "OCC(N)C(=O)O", "NCC(=O)O", "CC(N)C(=O)NCC(=O)O",
          "NC(CO)C(=O)O", "CSCCC(N)C(=O)O", "CCO", "c1ccccc1O"]


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _planetoid(name: str, n=540, features=5, classes=3, train=6, test=30) -> dict:
    """Planetoid's ind.<name>.* files (pickles by upstream design); DGL's masks take 500 val nodes."""
    feats = sp.csr_matrix((np.random.default_rng(0).random((n, features)) < 0.5).astype(np.float32))
    onehot = np.eye(classes)[np.arange(n) % classes]
    objects = {"x": feats[:train], "y": onehot[:train], "tx": feats[n - test:], "ty": onehot[n - test:],
               "allx": feats[:n - test], "ally": onehot[:n - test],
               "graph": {i: [(i + 1) % n, (i + 7) % n] for i in range(n)}}
    files = {f"ind.{name}.{key}": pickle.dumps(value) for key, value in objects.items()}
    files[f"ind.{name}.test.index"] = "\n".join(map(str, range(n - test, n))).encode()
    return files


def _platonov(classes: int) -> bytes:
    """A Platonov et al. npz: edges, features, labels (every class present) and 10 splits."""
    n = classes * max(8, 40 // classes)
    block = np.arange(n) // classes  # each block of ``classes`` nodes holds every label once
    splits = {part: np.stack([np.isin((block + k) % 4, quarters) for k in range(10)])
              for part, quarters in [("train_masks", [0, 1]), ("val_masks", [2]), ("test_masks", [3])]}
    edges = np.array([[i, (i + step) % n] for i in range(n) for step in (1, 5)])
    buffer = io.BytesIO()
    np.savez(buffer, edges=edges, node_features=np.random.default_rng(1).random((n, 6)).astype(np.float32),
             node_labels=np.arange(n) % classes, **splits)
    return buffer.getvalue()


def _peptides_struct(tmp_path) -> dict:
    """LRGB's peptide_structure_dataset.csv.gz (SMILES + 11 targets) and its split pickle."""
    frame = pd.DataFrame({"smiles": SMILES[:8], **{t: np.random.default_rng(2).random(8) for t in LRGB_TARGETS}})
    frame.to_csv(tmp_path / "peptides.csv.gz", index=False)
    split = {"train": np.arange(5), "val": np.array([5, 6]), "test": np.array([7])}
    return {"peptide_structure_dataset.csv.gz": (tmp_path / "peptides.csv.gz").read_bytes(),
            "splits_random_stratified_peptide_structure.pickle": pickle.dumps(split)}


def _zinc(tmp_path) -> dict:
    """DGL's ZincDGL_{train,valid,test}.bin: type-dict graphs (atom types [N], bond types [E])."""
    files = {}
    for mode, count in [("train", 6), ("valid", 2), ("test", 2)]:
        graphs = []
        for i in range(count):
            k = 3 + i % 3  # a chain of k atoms, both edge directions
            g = dgl.graph((list(range(k - 1)) + list(range(1, k)), list(range(1, k)) + list(range(k - 1))))
            g.ndata["feat"] = torch.arange(k) % 28
            g.edata["feat"] = torch.ones(g.num_edges(), dtype=torch.int64)
            graphs.append(g)
        dgl.save_graphs(str(tmp_path / f"{mode}.bin"), graphs, {"g_label": torch.linspace(-1, 1, count)})
        files[f"ZincDGL_{mode}.bin"] = (tmp_path / f"{mode}.bin").read_bytes()
    return files


def _ogb_pcba(tmp_path) -> bytes:
    """OGB's pcba.zip: pcba/raw/*.csv.gz (one direction per bond; OGB adds the inverse), 128 label
    columns with missing entries, the scaffold split and RELEASE_v1.txt."""
    graphs = [smiles2graph(s) for s in SMILES]
    labels = np.random.default_rng(3).integers(0, 2, (len(SMILES), 128)).astype(float)
    labels[np.random.default_rng(4).random(labels.shape) < 0.2] = np.nan
    tables = {
        "raw/edge.csv.gz": np.concatenate([g["edge_index"][:, ::2] for g in graphs], axis=1).T,
        "raw/edge-feat.csv.gz": np.concatenate([g["edge_feat"][::2] for g in graphs]),
        "raw/node-feat.csv.gz": np.concatenate([g["node_feat"] for g in graphs]),
        "raw/num-node-list.csv.gz": [g["num_nodes"] for g in graphs],
        "raw/num-edge-list.csv.gz": [g["edge_index"].shape[1] // 2 for g in graphs],
        "raw/graph-label.csv.gz": labels,
        "split/scaffold/train.csv.gz": range(6), "split/scaffold/valid.csv.gz": [6, 7],
        "split/scaffold/test.csv.gz": [8, 9],
    }
    files = {"pcba/RELEASE_v1.txt": b""}
    for name, table in tables.items():
        pd.DataFrame(table).to_csv(tmp_path / "table.csv.gz", header=False, index=False)
        files[f"pcba/{name}"] = (tmp_path / "table.csv.gz").read_bytes()
    return zip_bytes(files)


def _serve_dgl(name, files, loopback, temp_cards, *, archive=None, by_md5=False):
    """Serve a DGL card's files (zipped as ``archive``, one file at ``url``, or each at its
    ``file_urls`` entry) and write the temporary card that pins them (sha256, or md5 as upstream)."""
    def change(card):
        source = card["source"]
        if archive:
            source["url"] = loopback.serve(f"/{name}/{archive}", zip_bytes(files))
        elif "file_urls" in source:
            source["file_urls"] = {f: loopback.serve(f"/{name}/{f}?dl=1", data) for f, data in files.items()}
        else:
            (data,) = files.values()
            source["url"] = loopback.serve(f"/{name}/{next(iter(files))}", data)
        if by_md5:
            source["md5"] = {f: hashlib.md5(data).hexdigest() for f, data in files.items()}
        else:
            source["files"] = {f: _sha(data) for f, data in files.items()}

    return temp_cards(name, change)


def _train_one_epoch(recipe: str, overrides: list, tmp_path) -> dict:
    summary = run_recipe(load_recipe(REPO / "recipes" / recipe, overrides, epochs=1), tmp_path / "runs", progress=False)
    (metrics,) = (tmp_path / "runs").glob("*/*/seed0/metrics.json")
    metrics = json.loads(metrics.read_text())
    assert summary["seeds"] == [0] and metrics["epochs_run"] == 1
    return metrics


@pytest.fixture
def online(tmp_path, monkeypatch):
    """Downloads allowed, an empty ZOO_DATA and a private cache."""
    monkeypatch.setenv("ZOO_OFFLINE", "0")
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    return tmp_path / "cache"


def _refuses_a_changed_file(path: Path, load) -> None:
    with open(path, "ab") as f:
        f.write(b"!")
    with pytest.raises(ChecksumMismatchError, match=f"checksum mismatch for {path}") as info:
        load()
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("name, recipe, build", [
    ("pubmed", "pubmed_gcn.yaml", lambda: _planetoid("pubmed")),
    ("roman_empire", "roman_empire_gcn.yaml", lambda: {"roman_empire.npz": _platonov(18)}),
    ("amazon_ratings", "amazon_ratings_gcn.yaml", lambda: {"amazon_ratings.npz": _platonov(5)}),
    ("questions", "questions_gcn.yaml", lambda: {"questions.npz": _platonov(2)}),
])
def test_node_card_downloads_verifies_loads_and_trains(name, recipe, build, online, loopback, temp_cards, tmp_path):
    files = build()
    card = _serve_dgl(name, files, loopback, temp_cards, archive="pubmed.zip" if name == "pubmed" else None)
    metrics = _train_one_epoch(recipe, NODE_OVERRIDES, tmp_path)
    assert metrics["dataset"] == name and len(loopback.requests) == 1
    folder = online / card["source"]["raw_folder"]
    assert read_stamp(folder)["raw"] == {f: _sha(data) for f, data in files.items()}
    data = load_node_dataset(name, offline=True)  # from the verified cache, no request
    assert data.num_classes == load_card(name)["num_classes"] and len(loopback.requests) == 1
    _refuses_a_changed_file(folder / next(iter(files)), lambda: load_node_dataset(name, offline=True))


def test_peptides_struct_downloads_both_files_checks_dgls_md5s_and_trains(online, loopback, temp_cards, tmp_path):
    """Upstream publishes md5s only (DGL's lrgb.py), so the card's sha256s are null: the download
    is checked against the md5s and its sha256s are recorded for every later load."""
    files = _peptides_struct(tmp_path)
    card = _serve_dgl("peptides_struct", files, loopback, temp_cards, by_md5=True)
    assert set(card["source"]["files"].values()) == {None}
    metrics = _train_one_epoch("peptides_struct_gps.yaml", GRAPH_OVERRIDES, tmp_path)
    assert metrics["dataset"] == "peptides_struct" and sorted(loopback.requests) == sorted(
        f"/peptides_struct/{f}?dl=1" for f in files)
    folder = online / card["source"]["raw_folder"]
    assert read_stamp(folder)["raw"] == {f: _sha(data) for f, data in files.items()}
    data = load_graph_dataset("peptides_struct", offline=True, progress=False)
    assert data.sizes == {"train": 5, "val": 2, "test": 1} and data.num_tasks == 11
    pickled = folder / "splits_random_stratified_peptide_structure.pickle"
    with open(pickled, "ab") as f:
        f.write(b"!")
    with pytest.raises(ChecksumMismatchError, match=f"\\(from {folder / STAMP}\\)"):
        load_graph_dataset("peptides_struct", offline=True, progress=False)


def test_zinc_downloads_its_zip_of_dgl_binaries_and_trains(online, loopback, temp_cards, tmp_path):
    files = _zinc(tmp_path)
    card = _serve_dgl("zinc", files, loopback, temp_cards, archive="ZINC12k.zip")
    metrics = _train_one_epoch("zinc_gps.yaml", [*GRAPH_OVERRIDES, "dataset=zinc", "model.atom_types=28", "model.bond_types=4"], tmp_path)
    assert metrics["dataset"] == "zinc" and loopback.requests == ["/zinc/ZINC12k.zip"]
    data = load_graph_dataset("zinc", offline=True, progress=False)
    assert data.sizes == {"train": 6, "val": 2, "test": 2} and data.graphs[0].ndata["feat"].dim() == 1
    _refuses_a_changed_file(online / card["source"]["raw_folder"] / "ZincDGL_valid.bin",
                            lambda: load_graph_dataset("zinc", offline=True, progress=False))


def test_molpcba_downloads_ogbs_zip_verifies_it_and_trains(online, loopback, temp_cards, tmp_path):
    archive = _ogb_pcba(tmp_path)
    temp_cards("molpcba", lambda card: card["source"].update(url=loopback.serve("/pcba.zip", archive),
                                                             archive_sha256=_sha(archive)))
    metrics = _train_one_epoch("molpcba_gps.yaml", GRAPH_OVERRIDES, tmp_path)
    assert metrics["dataset"] == "molpcba" and loopback.requests == ["/pcba.zip"]
    folder = online / "ogb" / "ogbg_molpcba"
    assert "raw/edge.csv.gz" in read_stamp(folder)["raw"] and "processed/dgl_data_processed" in read_stamp(folder)[
        "processed"]
    data = load_graph_dataset("molpcba", offline=True, progress=False)
    assert len(data) == 10 and data.num_tasks == 128 and torch.isnan(data.targets).any()
    _refuses_a_changed_file(folder / "raw" / "edge.csv.gz", lambda: load_graph_dataset("molpcba", offline=True))


@pytest.mark.parametrize("name", ["pubmed", "roman_empire", "amazon_ratings", "questions", "peptides_struct", "zinc",
                                  "molpcba"])
def test_offline_the_shipped_card_is_refused_without_a_socket(name, tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a socket was opened in offline mode")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    for var, value in [("ZOO_OFFLINE", "1"), ("ZOO_DATA", tmp_path / "data"), ("ZOO_CACHE", tmp_path / "cache")]:
        monkeypatch.setenv(var, str(value))
    card = load_card(name)
    with pytest.raises(DatasetNotFoundError, match="offline mode is on|Offline mode is on") as info:
        if card["task"] == "node_classification":
            load_node_dataset(name)
        else:
            load_graph_dataset(name, progress=False)
    assert card["source"]["url"] in str(info.value) and "\n" not in str(info.value)
