"""OGB sources on stand-in OGB folders (OGB's files are not staged offline): where the folder is
looked for, copied and verified, how graphs, labels and split come out, and what OGB may read;
ogbn-arxiv / ogbn-products from stand-ins in OGB's raw layout, OGB's Evaluator against a hand count."""
import hashlib
import json
import math
import re
import shutil
import socket
import warnings
from pathlib import Path

import dgl
import numpy as np
import pandas as pd
import pytest
import torch
from ogb.nodeproppred import Evaluator

from tests.data.archives import zip_bytes
from zoo.data import DatasetError, DatasetNotFoundError, load_card, load_graph_dataset, load_node_dataset
from zoo.data.mirror import STAMP, Roots
from zoo.data.ogb_source import load_ogb
from zoo.engine.experiment import run_recipe
from zoo.engine.metrics import classification_metrics
from zoo.engine.recipe import load_recipe

REPO = Path(__file__).resolve().parents[2]


def _stand_in(root):
    """An ogbg_molhiv folder as OGB leaves it after processing: 10 graphs, labels 0/1, a split."""
    folder = root / "ogb" / "ogbg_molhiv"
    (folder / "processed").mkdir(parents=True)
    (folder / "RELEASE_v1.txt").write_text("")
    graphs = []
    for i in range(10):
        g = dgl.graph(([0, 1], [1, 0]), num_nodes=2 + i % 3)
        g.ndata["feat"] = torch.zeros((g.num_nodes(), 9), dtype=torch.int64)
        g.edata["feat"] = torch.zeros((2, 3), dtype=torch.int64)
        graphs.append(g)
    dgl.save_graphs(str(folder / "processed" / "dgl_data_processed"), graphs, {"labels": torch.tensor([[0], [1]] * 5)})
    (folder / "split" / "scaffold").mkdir(parents=True)
    for part, idx in [("train", range(8)), ("valid", [8]), ("test", [9])]:
        pd.DataFrame(list(idx)).to_csv(folder / "split" / "scaffold" / f"{part}.csv.gz", header=False, index=False)
    return folder


def test_ogb_folder_is_read(tmp_path):
    _stand_in(tmp_path / "data")
    roots = Roots(tmp_path / "data", tmp_path / "cache", True)
    data = load_ogb(load_card("molhiv"), roots, limit=None)
    assert data.source == "ogb ogbg-molhiv" and data.split_source == "OGB scaffold split (ogbg-molhiv)"
    assert {k: v.tolist() for k, v in data.split.items()} == {"train": list(range(8)), "val": [8], "test": [9]}
    assert data.targets.dtype == torch.float32 and data.targets[:4, 0].tolist() == [0.0, 1.0, 0.0, 1.0]
    assert [g.num_nodes() for g in data.graphs[:4]] == [2, 3, 4, 2]
    small = load_ogb(load_card("molhiv"), Roots(None, tmp_path / "cache", True), limit=9)  # the verified copy
    assert small.sizes == {"train": 8, "val": 1, "test": 0}


def test_ogb_folder_in_zoo_data_is_copied_and_preferred_over_the_fallback(tmp_path):
    source = _stand_in(tmp_path / "data")
    before = sorted(p.relative_to(source) for p in source.rglob("*"))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no fallback warning: OGB's files are there
        data = load_graph_dataset("molhiv", data_root=tmp_path / "data", cache_root=tmp_path / "cache",
                                  offline=True, progress=False)
    assert data.source == "ogb ogbg-molhiv" and len(data) == 10
    copy = tmp_path / "cache" / "ogb" / "ogbg_molhiv"
    assert (copy / "RELEASE_v1.txt").is_file() and (copy / "processed" / "dgl_data_processed").stat().st_nlink == 1
    assert sorted(p.relative_to(source) for p in source.rglob("*")) == before  # ZOO_DATA untouched


def test_a_payload_planted_in_the_ogb_folder_is_never_read(tmp_path, payload):
    """OGB's get_idx_split torch.loads split/scaffold/split_dict.pt when it exists (a pickle), and
    reads processed/dgl_data_processed: a planted split_dict.pt is deleted unread, a replaced
    processed file is replaced by the verified copy."""
    _stand_in(tmp_path / "data")
    roots, marker = Roots(tmp_path / "data", tmp_path / "cache", True), tmp_path / "payload-ran"
    load_ogb(load_card("molhiv"), roots, limit=None)
    copy = tmp_path / "cache" / "ogb" / "ogbg_molhiv"
    (copy / "split" / "scaffold" / "split_dict.pt").write_bytes(payload(marker))
    with pytest.warns(UserWarning, match="split_dict.pt has no record of the zoo writing it; deleted it unread"):
        data = load_ogb(load_card("molhiv"), Roots(None, tmp_path / "cache", True), limit=None)
    assert not marker.exists() and data.sizes == {"train": 8, "val": 1, "test": 1}
    (copy / "processed" / "dgl_data_processed").write_bytes(payload(marker))
    with pytest.raises(DatasetError, match="checksum mismatch for .*dgl_data_processed") as info:
        load_ogb(load_card("molhiv"), Roots(None, tmp_path / "cache", True), limit=None)
    assert "\n" not in str(info.value) and not marker.exists()
    with pytest.warns(UserWarning, match="cache copies of processed/dgl_data_processed .* replaced them"):
        assert len(load_ogb(load_card("molhiv"), roots, limit=None)) == 10
    shutil.copytree(copy, copy.with_name("ogbg_molhiv_dgl"))  # a folder OGB would prefer to the verified one
    with pytest.raises(DatasetError, match="OGB would read .*ogbg_molhiv_dgl instead of the verified"):
        load_ogb(load_card("molhiv"), roots, limit=None)
    assert not marker.exists()


def test_an_unrecorded_or_incomplete_ogb_folder_is_an_error(tmp_path):
    _stand_in(tmp_path)  # put in the cache by hand: nothing vouches for it
    with pytest.raises(DatasetError, match=f"has no record of the files the zoo placed there \\({STAMP}\\)"):
        load_ogb(load_card("molhiv"), Roots(None, tmp_path, True), limit=None)
    (_stand_in(tmp_path / "data") / "RELEASE_v1.txt").unlink()
    with pytest.raises(DatasetError, match="lacks OGB's RELEASE_v\\*.txt"):
        load_ogb(load_card("molhiv"), Roots(tmp_path / "data", tmp_path / "cache", True), limit=None)


def test_missing_ogb_folder_offline_names_the_url(tmp_path):
    card = load_card("molpcba")
    with pytest.raises(DatasetNotFoundError, match=re.escape(card["source"]["url"])) as info:
        load_ogb(card, Roots(tmp_path / "data", tmp_path / "cache", True), limit=None)
    assert "ogbg_molpcba" in str(info.value) and not (tmp_path / "cache").exists()


# ----------------------------------------------------------------------------- ogbn node datasets

N = 80  # nodes of the stand-in ogbn graphs
ARXIV_FEATURES = 6


def _ogbn_files(tmp_path, name: str) -> dict:
    """The files OGB 1.3.6's DglNodePropPredDataset reads from ogbn-<name>'s zip, in its layout:
    ``<name>/raw/*.csv.gz`` (no header; edges in one direction, OGB adds the inverse only where
    its master.csv says add_inverse_edge, i.e. for products), ``node_year`` for arxiv (master.csv's
    additional node files), ``<name>/split/<time | sales_ranking>/{train,valid,test}.csv.gz`` and
    ``<name>/RELEASE_v1.txt``. Edges i -> i+1 and i -> i+5 (mod N) and one self-loop 0 -> 0."""
    rng = np.random.default_rng(0)
    edges = [[i, (i + step) % N] for i in range(N) for step in (1, 5)] + [[0, 0]]
    tables = {
        "raw/edge.csv.gz": edges,
        "raw/num-node-list.csv.gz": [N],
        "raw/num-edge-list.csv.gz": [len(edges)],
        "raw/node-feat.csv.gz": rng.random((N, ARXIV_FEATURES)).round(4),
        "raw/node-label.csv.gz": [(7 * i) % 40 for i in range(N)],
    }
    split = "time" if name == "arxiv" else "sales_ranking"
    if name == "arxiv":
        tables["raw/node_year.csv.gz"] = [2010 + i % 10 for i in range(N)]
    parts = {"train": range(0, 40), "valid": range(40, 60), "test": range(60, N)}
    tables.update({f"split/{split}/{part}.csv.gz": list(idx) for part, idx in parts.items()})
    files = {f"{name}/RELEASE_v1.txt": b""}
    for path, table in tables.items():
        pd.DataFrame(table).to_csv(tmp_path / "table.csv.gz", header=False, index=False)
        files[f"{name}/{path}"] = (tmp_path / "table.csv.gz").read_bytes()
    return files


def _undirected_pairs(graph) -> set:
    src, dst = graph.edges()
    return {frozenset((int(u), int(v))) for u, v in zip(src, dst)}


def test_ogbn_arxiv_from_zoo_data_is_bidirected_with_ogbs_time_split(tmp_path):
    """The stand-in folder in $ZOO_DATA/ogb/ogbn_arxiv (OGB's zip, unzipped and renamed as the card
    says): 160 one-way edges + 1 self-loop become 320 directed edges + 80 self-loops; the split is
    the files' 40/20/20; features and labels are the CSV's."""
    files = _ogbn_files(tmp_path, "arxiv")
    folder = tmp_path / "data" / "ogb" / "ogbn_arxiv"
    for path, data in files.items():
        (folder / path.split("/", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        (folder / path.split("/", 1)[1]).write_bytes(data)
    data = load_node_dataset("ogbn-arxiv", data_root=tmp_path / "data", cache_root=tmp_path / "cache", offline=True)
    graph = data.graph
    assert graph.num_nodes() == N and graph.num_edges() == 2 * 2 * N + N
    src, dst = graph.edges()
    directed = set(zip(src.tolist(), dst.tolist()))
    assert all((v, u) in directed for u, v in directed)  # every citation in both directions
    assert sorted(u for u, v in directed if u == v) == list(range(N))  # one self-loop per node
    assert _undirected_pairs(graph) - {frozenset((i,)) for i in range(N)} == {
        frozenset((i, (i + step) % N)) for i in range(N) for step in (1, 5)}
    assert [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)] == [40, 20, 20]
    assert data.val_mask.nonzero().flatten().tolist() == list(range(40, 60))
    assert data.labels.tolist() == [(7 * i) % 40 for i in range(N)] and data.num_classes == 40
    csv = pd.read_csv(folder / "raw" / "node-feat.csv.gz", header=None).to_numpy()
    assert data.features.dtype == torch.float32 and torch.allclose(data.features, torch.from_numpy(csv).float())
    assert not (tmp_path / "data" / "ogb" / "ogbn_arxiv" / "processed").exists()  # OGB wrote into the cache only


def test_ogbn_products_downloads_over_loopback_keeps_ogbs_inverse_edges_and_trains_sampled(
        tmp_path, loopback, temp_cards, monkeypatch):
    """OGB's products.zip from a loopback URL, pinned by sha256 in a temporary card; OGB adds the
    inverse edges itself (add_inverse_edge), so the graph is 2 x 161 edges minus the doubled
    self-loop plus one self-loop per node; then one sampled epoch of the shipped recipe."""
    archive = zip_bytes(_ogbn_files(tmp_path, "products"))
    temp_cards("ogbn_products", lambda card: card["source"].update(
        url=loopback.serve("/products.zip", archive), archive_sha256=hashlib.sha256(archive).hexdigest()))
    for var, value in [("ZOO_OFFLINE", "0"), ("ZOO_DATA", tmp_path / "data"), ("ZOO_CACHE", tmp_path / "cache")]:
        monkeypatch.setenv(var, str(value))
    recipe = load_recipe(REPO / "recipes" / "ogbn_products_ltga_edge.yaml",
                         ["model.hidden=4", "model.heads=2", "seeds=[0]", "train.sampler.batch_size=16"], epochs=1)
    run_recipe(recipe, tmp_path / "runs", progress=False)
    assert loopback.requests == ["/products.zip"]
    (metrics,) = (tmp_path / "runs").glob("*/*/seed0/metrics.json")
    metrics = json.loads(metrics.read_text())
    assert metrics["dataset"] == "ogbn_products" and metrics["epochs_run"] == 1
    assert math.isfinite(metrics["curves"][0]["train_loss"]) and math.isfinite(metrics["final"]["test"]["nll"])
    data = load_node_dataset("ogbn_products", offline=True)  # from the verified cache, no request
    assert len(loopback.requests) == 1 and data.graph.num_edges() == 2 * 2 * N + N
    assert [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)] == [40, 20, 20]


def test_ogbs_evaluator_and_the_zoo_accuracy_agree_with_a_hand_count():
    """OGB's Evaluator('ogbn-arxiv') 'acc' and the zoo's accuracy on the same logits both equal
    the fraction counted by hand (argmax == label; random float64 logits have no ties)."""
    logits = torch.randn(50, 40, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
    labels = torch.arange(50) % 40
    labels[:12] = logits[:12].argmax(1)  # at least 12 right
    right = sum(int(max(range(40), key=lambda c: logits[i, c]) == labels[i]) for i in range(50))
    evaluated = Evaluator("ogbn-arxiv").eval({"y_true": labels[:, None], "y_pred": logits.argmax(1, keepdim=True)})
    zoo = classification_metrics(logits, labels, ["accuracy"])["accuracy"]
    assert right >= 12 and evaluated["acc"] == pytest.approx(right / 50, abs=1e-12)
    assert zoo == pytest.approx(right / 50, abs=1e-6)  # the zoo averages in float32


@pytest.mark.parametrize("name", ["ogbn_arxiv", "ogbn_products"])
def test_ogbn_cards_offline_without_a_copy_name_the_url_and_the_folder(name, tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a socket was opened in offline mode")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    card = load_card(name)
    with pytest.raises(DatasetNotFoundError, match=re.escape(card["source"]["url"])) as info:
        load_node_dataset(name, data_root=tmp_path / "data", cache_root=tmp_path / "cache", offline=True)
    assert f"$ZOO_DATA/ogb/ renamed {name!r}" in str(info.value) and "\n" not in str(info.value)
    assert card["split"]["num_splits"] == 1 and card["source"]["archive_sha256"] is None


@pytest.mark.parametrize("recipe", ["ogbn_arxiv_gat", "ogbn_arxiv_gatv2", "ogbn_arxiv_ltga_head", "ogbn_arxiv_ltga_edge"])
def test_every_ogbn_arxiv_recipe_trains_an_epoch_on_the_stand_in(recipe, tmp_path, monkeypatch):
    """Each shipped arxiv recipe (3 layers of 3 heads, shrunk to 4 units) runs full batch on the
    stand-in, its loss finite and its accuracy the fraction of right test nodes (20 of them)."""
    folder = tmp_path / "data" / "ogb" / "ogbn_arxiv"
    for path, data in _ogbn_files(tmp_path, "arxiv").items():
        (folder / path.split("/", 1)[1]).parent.mkdir(parents=True, exist_ok=True)
        (folder / path.split("/", 1)[1]).write_bytes(data)
    for var, value in [("ZOO_OFFLINE", "1"), ("ZOO_DATA", tmp_path / "data"), ("ZOO_CACHE", tmp_path / "cache")]:
        monkeypatch.setenv(var, str(value))
    run_recipe(load_recipe(REPO / "recipes" / f"{recipe}.yaml", ["model.hidden=4", "seeds=[0]"], epochs=1),
               tmp_path / "runs", progress=False)
    (metrics,) = (tmp_path / "runs").glob("*/*/seed0/metrics.json")
    metrics = json.loads(metrics.read_text())
    assert metrics["dataset"] == "ogbn_arxiv" and math.isfinite(metrics["curves"][0]["train_loss"])
    assert round(metrics["final"]["test"]["accuracy"] * 20, 4) == round(metrics["final"]["test"]["accuracy"] * 20)
