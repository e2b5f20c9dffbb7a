"""load_node_dataset against published dataset facts, the offline-first file flow, and a new
dataset added as one card."""
import io
import json
import os
import shutil
import zipfile

import pytest
import torch
import yaml

import zoo.data.mirror as mirror
from zoo.data import (
    ChecksumMismatchError,
    DatasetError,
    DatasetNotFoundError,
    NodeData,
    load_card,
    load_node_dataset,
)
from zoo.data.cards import card_path
from zoo.data.synthetic import synthetic_sbm_graph
from zoo.engine.experiment import run_recipe
from zoo.engine.recipe import load_recipe

TEXAS = "texas_205d1148"


@pytest.fixture(autouse=True)
def _no_data_env(monkeypatch):
    """Tests pass roots explicitly; ``None`` must mean "none", not the caller's $ZOO_DATA."""
    for var in ("ZOO_DATA", "ZOO_CACHE", "ZOO_OFFLINE"):
        monkeypatch.delenv(var, raising=False)


def _snapshot(root):
    """Every path under ``root`` with its size and mtime."""
    return {p: (p.stat().st_size, p.stat().st_mtime_ns) for p in sorted(root.rglob("*"))}


def _masks(data):
    return torch.stack([data.train_mask, data.val_mask, data.test_mask])


def _tamper(path):
    """Flip one byte (in a new file)."""
    raw = bytearray(path.read_bytes())
    raw[len(raw) // 2] ^= 0xFF
    path.unlink()
    path.write_bytes(bytes(raw))


def _copy_texas(zoo_data, root):
    shutil.copytree(zoo_data / TEXAS, root / TEXAS)
    return root


def test_cora_matches_published_statistics(zoo_data, zoo_cache):
    data = load_node_dataset("cora", 3, data_root=zoo_data, cache_root=zoo_cache, offline=True)
    assert isinstance(data, NodeData)
    assert data.graph.num_nodes() == 2708 and data.num_classes == 7 and data.split == 0
    assert data.features.shape == (2708, 1433) and data.features.dtype == torch.float32
    assert data.labels.dtype == torch.int64 and int(data.labels.max()) == 6
    sizes = [int(m.sum()) for m in (data.train_mask, data.val_mask, data.test_mask)]
    assert sizes == [140, 500, 1000] and data.train_mask.dtype == torch.bool
    assert data.graph.num_edges() == 10556 + 2708
    src, dst = data.graph.edges()
    loops = torch.bincount(src[src == dst], minlength=2708)
    assert torch.equal(loops, torch.ones(2708, dtype=torch.int64))
    assert data.card["name"] == "cora"


def test_texas_has_ten_distinct_geom_gcn_splits(zoo_data, zoo_cache):
    kw = dict(data_root=zoo_data, cache_root=zoo_cache, offline=True)
    splits = [load_node_dataset("texas", k, **kw) for k in range(11)]
    for k, data in enumerate(splits[:10]):
        assert data.split == k
        assert [int(m.sum()) for m in _masks(data)] == [87, 59, 37]
        assert not torch.equal(_masks(data), _masks(splits[k + 1]))
    assert splits[10].split == 0 and torch.equal(_masks(splits[10]), _masks(splits[0]))


def test_tolokers_is_binary(zoo_data, zoo_cache):
    data = load_node_dataset("tolokers", 0, data_root=zoo_data, cache_root=zoo_cache, offline=True)
    assert data.num_classes == 2 and data.graph.num_nodes() == 11758
    assert data.graph.num_edges() == 1038000 + 11758
    assert set(data.labels.unique().tolist()) == {0, 1}


def test_data_root_is_never_written(zoo_data, tmp_path):
    before = _snapshot(zoo_data)
    for _ in range(2):  # first load mirrors, second reuses the cache
        load_node_dataset("cora", data_root=zoo_data, cache_root=tmp_path, offline=True)
        load_node_dataset("texas", data_root=zoo_data, cache_root=tmp_path, offline=True)
    assert _snapshot(zoo_data) == before


def test_tampered_data_root_raises_checksum_mismatch(zoo_data, tmp_path):
    root = _copy_texas(zoo_data, tmp_path / "data")
    _tamper(root / TEXAS / "out1_graph_edges.txt")
    expected = load_card("texas")["source"]["files"]["out1_graph_edges.txt"]
    with pytest.raises(ChecksumMismatchError) as info:
        load_node_dataset("texas", data_root=root, cache_root=tmp_path / "cache", offline=True)
    message = str(info.value)
    assert "out1_graph_edges.txt" in message and expected in message
    assert mirror.sha256_file(root / TEXAS / "out1_graph_edges.txt") in message
    assert load_card("texas")["source"]["url"] in message


def test_incomplete_data_root_folder_names_missing_file(zoo_data, tmp_path):
    root = _copy_texas(zoo_data, tmp_path / "data")
    (root / TEXAS / "texas_split_0.6_0.2_7.npz").unlink()
    with pytest.raises(DatasetNotFoundError, match="texas_split_0.6_0.2_7.npz"):
        load_node_dataset("texas", data_root=root, cache_root=tmp_path / "cache", offline=True)


def test_cache_is_reused_and_hashed_on_every_load(zoo_data, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = load_node_dataset("texas", 4, data_root=zoo_data, cache_root=cache, offline=True)
    hashed, real = [], mirror.sha256_file
    monkeypatch.setattr(mirror, "sha256_file", lambda path: hashed.append(path.name) or real(path))
    again = load_node_dataset("texas", 4, data_root=None, cache_root=cache, offline=True)
    assert sorted(hashed) == sorted(load_card("texas")["source"]["files"])  # every raw file, each once
    assert torch.equal(_masks(first), _masks(again))


def test_a_same_size_pickle_with_its_mtime_restored_never_runs(zoo_data, tmp_path, payload):
    """The issue's raw-file attack: a pickle payload of the same size in place of ind.cora_v2.x,
    its mtime restored. Without ZOO_DATA it is refused; with it the copy is replaced, with a warning."""
    cache, marker = tmp_path / "cache", tmp_path / "payload-ran"
    load_node_dataset("cora", data_root=zoo_data, cache_root=cache, offline=True)
    raw = cache / "cora_v2_d697a464" / "ind.cora_v2.x"

    def plant():
        stat = raw.stat()
        raw.write_bytes(payload(marker, stat.st_size))
        os.utime(raw, ns=(stat.st_atime_ns, stat.st_mtime_ns))
        assert raw.stat().st_size == stat.st_size

    plant()
    with pytest.raises(ChecksumMismatchError, match="ind.cora_v2.x") as info:
        load_node_dataset("cora", data_root=None, cache_root=cache, offline=True)
    assert "\n" not in str(info.value) and not marker.exists()
    with pytest.warns(UserWarning, match="cache copies of ind.cora_v2.x .* replaced them with verified copies"):
        data = load_node_dataset("cora", data_root=zoo_data, cache_root=cache, offline=True)
    assert data.graph.num_nodes() == 2708 and not marker.exists()


@pytest.mark.parametrize("file", ["cora_v2_dgl_graph.pkl", "cora_v2_dgl_graph.bin"])
def test_a_payload_in_dgls_processed_cache_is_deleted_unread(file, zoo_data, tmp_path, payload):
    """DGL unpickles cora_v2_dgl_graph.pkl: a replaced file (or one that was never recorded) is
    deleted before DGL sees it, with one line, and DGL rebuilds it from the verified raw files."""
    cache, marker = tmp_path / "cache", tmp_path / "payload-ran"
    first = load_node_dataset("cora", data_root=zoo_data, cache_root=cache, offline=True)
    planted = cache / "cora_v2_d697a464" / file
    planted.write_bytes(payload(marker))
    with pytest.warns(UserWarning, match=f"{file} differs from the sha256 the zoo recorded; deleted it unread") as record:
        again = load_node_dataset("cora", data_root=zoo_data, cache_root=cache, offline=True)
    (line,) = [str(w.message) for w in record if w.category is UserWarning]
    assert not marker.exists() and "\n" not in line
    assert torch.equal(again.features, first.features) and torch.equal(again.labels, first.labels)
    (cache / "cora_v2_d697a464" / mirror.STAMP).unlink()  # no record at all: nothing derived is trusted
    planted.write_bytes(payload(marker))
    with pytest.warns(UserWarning, match="has no record of the zoo writing it"):
        load_node_dataset("cora", data_root=zoo_data, cache_root=cache, offline=True)
    assert not marker.exists()


def test_corrupt_cache_copy_is_detected(zoo_data, tmp_path):
    cache = tmp_path / "cache"
    load_node_dataset("texas", data_root=_copy_texas(zoo_data, tmp_path / "data"), cache_root=cache)
    _tamper(cache / TEXAS / "out1_node_feature_label.txt")
    with pytest.raises(ChecksumMismatchError, match=f"delete {cache / TEXAS}"):
        load_node_dataset("texas", data_root=None, cache_root=cache, offline=True)


def test_corrupt_cache_copy_is_repaired_from_data_root(zoo_data, tmp_path):
    root, cache = _copy_texas(zoo_data, tmp_path / "data"), tmp_path / "cache"
    load_node_dataset("texas", data_root=root, cache_root=cache)
    _tamper(cache / TEXAS / "out1_graph_edges.txt")
    with pytest.warns(UserWarning, match="cache copies of out1_graph_edges.txt .* replaced them with verified"):
        data = load_node_dataset("texas", data_root=root, cache_root=cache, offline=True)
    assert data.graph.num_nodes() == 183
    expected = load_card("texas")["source"]["files"]["out1_graph_edges.txt"]
    assert mirror.sha256_file(cache / TEXAS / "out1_graph_edges.txt") == expected


def test_missing_dataset_offline_names_url_and_path(tmp_path):
    with pytest.raises(DatasetNotFoundError) as info:
        load_node_dataset("pubmed", data_root=tmp_path, cache_root=tmp_path / "c", offline=True)
    message = str(info.value)
    assert "https://data.dgl.ai/dataset/pubmed.zip" in message
    assert str(tmp_path / "pubmed_35464cad") in message


def test_defaults_come_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "data"))
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("ZOO_OFFLINE", "true")
    with pytest.raises(DatasetNotFoundError, match="Offline mode is on") as info:
        load_node_dataset("questions")
    assert str(tmp_path / "data" / "questions_c19775c2") in str(info.value)
    assert str(tmp_path / "cache" / "questions_c19775c2") in str(info.value)


def _texas_zip(zoo_data, tamper=None):
    """texas.zip as data.dgl.ai serves it (the raw files at the top level), from the staged files."""
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for path in sorted((zoo_data / TEXAS).iterdir()):
            data = path.read_bytes()
            zf.writestr(path.name, data[::-1] if path.name == tamper else data)
    return buffer.getvalue()


def test_download_is_verified_then_cached(zoo_data, tmp_path, loopback, temp_cards):
    url = loopback.serve("/dataset/texas.zip", _texas_zip(zoo_data))
    temp_cards("texas", lambda card: card["source"].update(url=url))
    cache = tmp_path / "cache"
    data = load_node_dataset("texas", 2, data_root=None, cache_root=cache, offline=False)
    assert data.split == 2 and data.graph.num_nodes() == 183 and loopback.requests == ["/dataset/texas.zip"]
    assert sorted(p.name for p in cache.iterdir()) == [TEXAS]  # scratch folder removed
    assert load_node_dataset("texas", 2, cache_root=cache, offline=True).split == 2
    assert loopback.requests == ["/dataset/texas.zip"]  # cache only from now on


def test_tampered_download_is_rejected(zoo_data, tmp_path, loopback, temp_cards):
    url = loopback.serve("/dataset/texas.zip", _texas_zip(zoo_data, tamper="out1_graph_edges.txt"))
    temp_cards("texas", lambda card: card["source"].update(url=url))
    cache = tmp_path / "cache"
    with pytest.raises(ChecksumMismatchError, match="out1_graph_edges.txt") as info:
        load_node_dataset("texas", cache_root=cache, offline=False)
    assert "\n" not in str(info.value) and list(cache.iterdir()) == []


def test_failed_download_raises_not_found_with_url(tmp_path, loopback, temp_cards):
    url = loopback.url("/dataset/texas.zip")  # nothing served there: HTTP 404
    temp_cards("texas", lambda card: card["source"].update(url=url))
    with pytest.raises(DatasetNotFoundError, match="HTTP 404 Not Found") as info:
        load_node_dataset("texas", cache_root=tmp_path / "cache", offline=False)
    assert url in str(info.value) and "\n" not in str(info.value)
    assert list((tmp_path / "cache").iterdir()) == []


def test_dgl_repo_override_is_refused(zoo_data, tmp_path, monkeypatch):
    monkeypatch.setenv("DGL_REPO", "https://mirror.example.org/")
    with pytest.raises(DatasetError, match="DGL_REPO"):
        load_node_dataset("cora", data_root=zoo_data, cache_root=tmp_path, offline=True)


@pytest.mark.parametrize("split, error", [(-1, ValueError), (1.5, TypeError)])
def test_bad_split_is_rejected(split, error, tmp_path):
    with pytest.raises(error, match="split"):
        load_node_dataset("texas", split, cache_root=tmp_path, offline=True)


def test_file_without_known_hash_warns_with_its_hash(zoo_data, tmp_path, monkeypatch):
    card = load_card("texas")
    card["source"]["files"]["out1_graph_edges.txt"] = None
    monkeypatch.setattr("zoo.data.node_datasets.load_card", lambda name: card)
    actual = mirror.sha256_file(zoo_data / TEXAS / "out1_graph_edges.txt")
    with pytest.warns(UserWarning, match=actual):
        load_node_dataset("texas", data_root=zoo_data, cache_root=tmp_path, offline=True)


def test_a_new_dgl_node_dataset_needs_only_its_card(zoo_data, tmp_path, monkeypatch):
    """One new file, a card in a cards folder of its own, and a recipe naming it trains a GCN
    through the engine: DGL's CoraGraphDataset on the staged Cora files, under a new name."""
    card = yaml.safe_load(card_path("cora").read_text())
    cards = tmp_path / "cards"
    cards.mkdir()
    (cards / "my_cora.yaml").write_text(yaml.safe_dump({**card, "name": "my_cora", "title": "my Cora"}))
    recipe = tmp_path / "my_cora_gcn.yaml"
    recipe.write_text(yaml.safe_dump({"dataset": "my_cora", "task": "node_classification", "seeds": [0],
                                      "model": {"name": "gcn", "hidden": 16, "layers": 2, "dropout": 0.5},
                                      "optim": {"epochs": 1, "patience": 1}}))
    for name, value in [("ZOO_CARDS", cards), ("ZOO_DATA", zoo_data), ("ZOO_CACHE", tmp_path / "cache"),
                        ("ZOO_OFFLINE", "1")]:
        monkeypatch.setenv(name, str(value))
    summary = run_recipe(load_recipe(recipe), tmp_path / "runs", progress=False)
    (run,) = (tmp_path / "runs" / "my_cora_gcn").glob("*/seed0/metrics.json")
    metrics = json.loads(run.read_text())
    assert metrics["dataset"] == "my_cora" and metrics["epochs_run"] == 1 and summary["seeds"] == [0]
    assert metrics["num_parameters"] == (1433 * 16 + 16) + (16 * 7 + 7)  # Cora's features in, its 7 classes out
    assert 0 <= metrics["final"]["test"]["accuracy"] <= 1
    assert (tmp_path / "cache" / "cora_v2_d697a464").is_dir()  # the card's raw folder, mirrored from ZOO_DATA


def _synthetic_card(folder, **parameters):
    """A small synthetic card in ``folder`` (a ``$ZOO_CARDS`` entry): the shipped 100k card, resized."""
    card = yaml.safe_load((card_path("synthetic_sbm_100k")).read_text())
    card["name"] = "tiny_sbm"
    card["source"]["parameters"].update(num_nodes=300, num_edges=2400, **parameters)
    (folder / "tiny_sbm.yaml").write_text(yaml.safe_dump(card))
    return card


def test_a_synthetic_card_loads_the_generators_graph(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_CARDS", str(tmp_path))
    card = _synthetic_card(tmp_path)
    data = load_node_dataset("tiny_sbm", split=3)
    expected = synthetic_sbm_graph(**card["source"]["parameters"])  # the generator called directly
    assert data.split == 0 and data.num_classes == 5 and data.graph.num_nodes() == 300
    # the loader's graph: the generated edges (no self-loops) plus one self-loop per node
    src, dst = data.graph.edges()
    loops = src == dst
    assert int(loops.sum()) == 300 and data.graph.num_edges() == 2400 + 300
    assert sorted(zip(src[~loops].tolist(), dst[~loops].tolist())) == sorted(zip(*(t.tolist() for t in expected.edges())))
    torch.testing.assert_close(data.features, expected.ndata["feat"])
    assert torch.equal(data.labels, expected.ndata["label"])
    for name in ("train_mask", "val_mask", "test_mask"):
        assert torch.equal(getattr(data, name), expected.ndata[name])


def test_a_synthetic_card_with_a_bad_parameter_is_named(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_CARDS", str(tmp_path))
    _synthetic_card(tmp_path, num_nodez=5)
    with pytest.raises(DatasetError, match="tiny_sbm.yaml: source.parameters .* do not fit synthetic_sbm_graph"):
        load_node_dataset("tiny_sbm")
    _synthetic_card(tmp_path, homophily=1.5)
    with pytest.raises(DatasetError, match=r"source.parameters: homophily=1.5 must be in \[0, 1\]"):
        load_node_dataset("tiny_sbm")
