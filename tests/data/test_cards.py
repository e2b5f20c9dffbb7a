"""Dataset cards: where they are found (checkout, wheel, $ZOO_CARDS), the schema, and every card
of ``list_cards()`` checked against DGL, against the offline files, and loaded where a copy exists."""
import json
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import numpy as np
import pytest
import yaml

from zoo.data import (
    DatasetError,
    DatasetNotFoundError,
    list_cards,
    load_card,
    load_graph_dataset,
    load_node_dataset,
)
from zoo.data import dgl_source
from zoo.data.cards import card_path, cards_dirs, check_card, import_source_object, package_cards_dir
from zoo.data.mirror import sha256_file
from zoo.data.molecules import penalized_logp

REPO = Path(__file__).resolve().parents[2]
SHIPPED = sorted(path.stem for path in (REPO / "datasets").glob("*.yaml"))
# the schema as datasets/README.md states it (written out here, not imported from the code)
METRICS = {"node_classification": {"accuracy", "roc_auc"},
           "graph_regression": {"mae", "rmse", "r2"},
           "graph_classification": {"roc_auc", "ap"}}
HIGHER_FLOORS = {"nn", "models", "engine", "analysis", "transfer", "baselines"}
FEATURIZERS = {"ogb-smiles2graph", "benchmarking-gnns-zinc-typedict"}
SOURCE_FIELDS = {"dgl": {"dgl_class", "url", "raw_folder", "files"},
                 "ogb": {"ogb_name", "url"},
                 "csv": {"url", "raw_folder", "files", "file_urls", "smiles_column"},
                 "dgllife": {"dgllife_class", "dgllife_zip", "url", "raw_folder", "files", "file_urls", "smiles_column",
                             "target_columns"},
                 "synthetic": {"parameters"}}


def _sources(card):
    """The card's source and, if any, its fallback."""
    return [card["source"], *([card["fallback"]] if "fallback" in card else [])]


def _offline_folder(source, zoo_data):
    """Where the offline copy of a source would sit in ZOO_DATA."""
    if source["kind"] == "ogb":
        return zoo_data / "ogb" / source["ogb_name"].replace("-", "_")
    return zoo_data / source["raw_folder"]


# ----------------------------------------------------------------------------- where cards are


def test_shipped_cards_come_from_the_checkout_datasets_folder(monkeypatch):
    monkeypatch.delenv("ZOO_CARDS", raising=False)
    assert package_cards_dir() == REPO / "datasets" and cards_dirs() == [REPO / "datasets"]
    assert list_cards() == SHIPPED and len(SHIPPED) == 24
    assert card_path("cora") == REPO / "datasets" / "cora.yaml"


def test_zoo_cards_folders_add_and_override_cards(tmp_path, monkeypatch):
    first, second = tmp_path / "a", tmp_path / "b"
    first.mkdir(), second.mkdir()
    cora = yaml.safe_load((REPO / "datasets" / "cora.yaml").read_text())
    (first / "cora.yaml").write_text(yaml.safe_dump({**cora, "title": "my Cora"}))
    (second / "my_cora.yaml").write_text(yaml.safe_dump({**cora, "name": "my_cora"}))
    monkeypatch.setenv("ZOO_CARDS", os.pathsep.join([str(first), str(second)]))
    assert cards_dirs() == [first, second, REPO / "datasets"]
    assert list_cards() == sorted({*SHIPPED, "my_cora"})
    assert load_card("cora")["title"] == "my Cora" and card_path("cora") == first / "cora.yaml"
    assert load_card("My-Cora")["source"] == cora["source"]


def test_unknown_name_names_nearest_card():
    with pytest.raises(DatasetNotFoundError, match="Did you mean 'cora'") as info:
        load_card("corra")
    assert isinstance(info.value, DatasetError)
    assert "citeseer" in str(info.value)  # lists the available cards


def test_name_is_case_and_hyphen_insensitive():
    assert load_card("Roman-Empire")["name"] == "roman_empire"


def test_wheel_holds_every_card_and_the_installed_loader_finds_them(tmp_path):
    """Build the wheel offline from a copy of the tree, unpack it (a pure-Python install), and
    ask a fresh interpreter whose ``zoo`` is the unpacked one where its cards are."""
    src = tmp_path / "src"
    src.mkdir()
    for name in ("setup.cfg", "pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    for folder in ("zoo", "datasets"):
        shutil.copytree(REPO / folder, src / folder, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "--no-index",
                            "-q", "-w", str(tmp_path / "wheel"), str(src)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stderr[-2000:]
    (wheel,) = (tmp_path / "wheel").glob("zoo-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        for card in SHIPPED:  # every card, byte for byte
            assert archive.read(f"zoo/datasets/{card}.yaml") == (REPO / "datasets" / f"{card}.yaml").read_bytes()
        assert "zoo/datasets/README.md" in names
        # the package list in setup.cfg is explicit: nothing under zoo/ may be left out
        tree = {p.relative_to(src).as_posix() for p in (src / "zoo").rglob("*") if p.is_file()}
        assert tree <= names, sorted(tree - names)
        archive.extractall(tmp_path / "site")
    probe = ("import json, sys, zoo.data.cards as c; print(json.dumps({'zoo': c.__file__, 'dir': str(c.package_cards_dir()),"
             " 'cards': c.list_cards(), 'cora': c.load_card('cora')['source']['raw_folder'],"
             " 'floors': sorted({m.split('.')[1] for m in sys.modules if m.count('.') and m.startswith('zoo.')})}))")
    env = {k: v for k, v in os.environ.items() if k not in ("ZOO_CARDS", "PYTHONPATH")}
    out = subprocess.run([sys.executable, "-c", probe], cwd=tmp_path, env={**env, "PYTHONPATH": str(tmp_path / "site")},
                         capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    found = json.loads(out.stdout.strip().splitlines()[-1])
    assert found["zoo"] == str(tmp_path / "site" / "zoo" / "data" / "cards.py")
    assert found["dir"] == str(tmp_path / "site" / "zoo" / "datasets")
    assert found["cards"] == SHIPPED and found["cora"] == "cora_v2_d697a464"
    assert not set(found["floors"]) & HIGHER_FLOORS  # reading a card loads no floor above data


# ----------------------------------------------------------------------------- the schema


@pytest.mark.parametrize("name", list_cards())
def test_card_schema(name):
    card = load_card(name)
    assert card["name"] == name == card_path(name).stem
    assert card["title"] and card["citation"] and card["split"]["protocol"]
    assert card["metric"] in METRICS[card["task"]]
    if card["task"] == "node_classification":
        assert card["source"]["kind"] in ("dgl", "synthetic", "ogb") and card["num_classes"] >= 2
        assert card["split"]["num_splits"] in (1, 10)
        assert card["metric"] == ("roc_auc" if card["num_classes"] == 2 else "accuracy")
    else:
        assert card["num_tasks"] >= 1 and card["featurizer"] in FEATURIZERS
        assert card["split"]["split_source"]
    for source in _sources(card):
        assert SOURCE_FIELDS[source["kind"]] <= set(source)
        if source["kind"] == "synthetic":  # generated: no files, no url
            assert set(source) == {"kind", "parameters"}
            continue
        assert source["url"].startswith("http")
        hashes = list((source.get("files") or {}).values())
        assert all(h is None or re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes)
        if source["kind"] in ("csv", "dgllife"):
            assert "target_columns" in source or "target_function" in source
            assert set(source["file_urls"]) == set(source["files"])


@pytest.mark.parametrize("name", sorted(n for n in list_cards() if load_card(n)["source"]["kind"] == "dgl"))
def test_dgl_card_matches_dgl_url_folder_and_published_md5s(name, tmp_path, monkeypatch):
    """The card downloads what DGL would (its URLs) into the folder DGL reads, and carries every
    checksum DGL's loader publishes for those files (LRGB's md5s)."""
    monkeypatch.delenv("DGL_REPO", raising=False)
    source = load_card(name)["source"]
    stub = dgl_source._stub(dgl_source.dgl_class(load_card(name)), tmp_path)
    assert stub.url.strip() == source["url"]
    assert stub.raw_path.rsplit("/", 1)[1] == source["raw_folder"]
    if hasattr(stub, "md5sum_data"):  # DGL's LRGB classes: a data file and a split file, each with its md5
        data, split = Path(stub.raw_data_path).name, Path(stub.split_data_path).name
        assert source["file_urls"] == {data: stub.url.strip(), split: stub.url_stratified_split.strip()}
        assert source["md5"] == {data: stub.md5sum_data, split: stub.md5sum_stratified_split}
        assert "dgl/data/lrgb.py" in source["checksum_source"]
    else:
        assert "md5" not in source and (source.get("archive") == "zip") == source["url"].endswith(".zip")


@pytest.mark.parametrize("name", list_cards())
def test_every_checksum_names_its_source(name):
    for source in [s for s in _sources(load_card(name)) if s["kind"] != "synthetic"]:  # synthetic: no files
        assert source.get("checksum_source"), "say where the card's checksums come from (or that none is published)"
        pinned = [h for h in [*(source.get("files") or {}).values(), source.get("archive_sha256")] if h]
        assert ("hashed here" in source["checksum_source"]) == bool(pinned)
        assert ("none published" in source["checksum_source"]) == (not pinned and not source.get("md5"))


@pytest.mark.parametrize("name", list_cards())
def test_hashes_are_known_exactly_for_the_offline_files(name, zoo_data):
    """A staged source pins every file's sha256 (and the files match); an unstaged one has null."""
    for source in _sources(load_card(name)):
        if "files" not in source:
            continue
        folder = zoo_data / source["raw_folder"]
        if folder.is_dir():
            for file, expected in source["files"].items():
                assert sha256_file(folder / file) == expected, file
        else:
            assert set(source["files"].values()) == {None}


def _esol(change=lambda card: None):
    """The shipped esol card after ``change(card)``."""
    card = yaml.safe_load((REPO / "datasets" / "esol.yaml").read_text())
    change(card)
    return card


@pytest.mark.parametrize("change, message", [
    (lambda c: c.update(metric="accuracy"), "metric 'accuracy' is not one for graph_regression"),
    (lambda c: c.update(task="link_prediction"), "task 'link_prediction' is not one of"),
    (lambda c: c.pop("num_tasks"), "lacks 'num_tasks', which graph_regression cards need"),
    (lambda c: c["source"].update(kind="npz"), "source.kind 'npz' is not one of dgl, ogb, csv"),
    (lambda c: c["source"].pop("smiles_column"), "source of kind dgllife lacks 'smiles_column'"),
    (lambda c: c["source"].pop("target_columns"), "needs target_columns or target_function"),
    (lambda c: c["source"]["files"].update({"delaney-processed.csv": "ABC"}), "must be a lowercase hex sha256"),
    (lambda c: c["split"].pop("fractions"), "a random split needs fractions"),
    (lambda c: c["split"].update(fractions=[0.8, 0.1, 0.2]), "summing to 1"),
    (lambda c: c["split"].update(protocol="fixed_index_file", index_file="idx.csv"), "index_file must name"),
    (lambda c: c["split"].update(protocol="lrgb"), "protocol fixed_index_file | scaffold | random"),
    (lambda c: c["split"].pop("split_source"), "split lacks 'split_source'"),
    (lambda c: c["source"].update(archive="tar"), "source.archive must be zip"),
    (lambda c: c["source"].update(archive_sha256="abc"), "source.archive_sha256 must be a lowercase hex sha256"),
    (lambda c: c["source"].update(md5={"other.csv": "0" * 32}), "source.md5['other.csv'] must name a file of"),
    (lambda c: c["source"].update(md5={"delaney-processed.csv": "XYZ"}), "be 32 lowercase hex digits"),
    (lambda c: c["source"]["file_urls"].update({"extra.csv": "http://x"}), "file_urls must give a URL for each"),
])
def test_card_schema_violations_are_named(change, message, tmp_path):
    with pytest.raises(DatasetError, match=re.escape(message)) as info:
        check_card(_esol(change), tmp_path / "esol.yaml")
    assert str(tmp_path / "esol.yaml") in str(info.value)


def test_card_checks_name_and_fallback_split(tmp_path):
    check_card(_esol(), tmp_path / "esol.yaml")  # the shipped card passes
    with pytest.raises(DatasetError, match="must equal the file name 'other'"):
        check_card(_esol(), tmp_path / "other.yaml")
    molhiv = yaml.safe_load((REPO / "datasets" / "molhiv.yaml").read_text())
    del molhiv["fallback"]["split"]
    with pytest.raises(DatasetError, match="fallback.split must be a mapping"):
        check_card(molhiv, tmp_path / "molhiv.yaml")
    node = yaml.safe_load((REPO / "datasets" / "cora.yaml").read_text())
    node["source"]["kind"] = "csv"
    with pytest.raises(DatasetError, match="node_classification cards need source.kind: dgl or synthetic"):
        check_card(node, tmp_path / "cora.yaml")
    node = yaml.safe_load((REPO / "datasets" / "cora.yaml").read_text())
    del node["source"]["archive"]
    with pytest.raises(DatasetError, match="source of kind dgl with several files needs archive: zip"):
        check_card(node, tmp_path / "cora.yaml")


# ----------------------------------------------------------------------------- loading


@pytest.mark.parametrize("name", list_cards())
def test_card_loads_from_its_offline_copy(name, zoo_data, zoo_cache):
    card = load_card(name)
    if card["source"]["kind"] == "synthetic":
        pytest.skip(f"{name} is generated (no offline copy); test_node_datasets loads a small synthetic card")
    present = [s for s in _sources(card) if _offline_folder(s, zoo_data).is_dir()]
    if not present:
        pytest.skip(f"{name}: no offline copy in {zoo_data} (" + ", ".join(
            str(_offline_folder(s, zoo_data).relative_to(zoo_data)) for s in _sources(card)) + ")")
    roots = {"data_root": zoo_data, "cache_root": zoo_cache, "offline": True}
    if card["task"] == "node_classification":
        data = load_node_dataset(name, **roots)
        n = data.graph.num_nodes()
        assert data.features.shape[0] == n and data.labels.shape == (n,)
        assert set(data.labels.unique().tolist()) == set(range(card["num_classes"]))
        masks = np.stack([m.numpy() for m in (data.train_mask, data.val_mask, data.test_mask)])
        assert masks.sum(0).max() == 1 and masks[0].any() and masks[2].any()  # disjoint, non-empty
        assert (data.graph.in_degrees() >= 1).all()  # one self-loop per node at least
        return
    if present[0]["kind"] == "dgl" and os.environ.get("ZOO_SLOW") != "1":
        pytest.skip(f"{name}: DGL processes the whole dataset before limit= applies (slow); set ZOO_SLOW=1")
    source = present[0]["kind"]
    data = load_graph_dataset(name, limit=None if source == "dgl" else 200, source=source, progress=False, **roots)
    assert data.num_tasks == card["num_tasks"] and data.metric == card["metric"]
    assert data.featurizer["name"] == card["featurizer"] and len(data) + len(data.report) >= 199
    parts = [set(v.tolist()) for v in data.split.values()]
    assert sum(map(len, parts)) == len(set().union(*parts)) and max(set().union(*parts)) < len(data)
    if "sizes" in card["split"] and source == card["source"]["kind"] and source == "dgl":
        assert data.sizes == card["split"]["sizes"]


@pytest.mark.parametrize("key, dotted, context", [
    ("dgllife_class", "dgllife.data.NoSuchDataset", ""),
    ("target_function", "zoo.data.molecules.no_such_function", ""),
    ("target_function", "no_dots", ""),
    ("dgl_class", "no_such_module.Dataset", " with dgl 9.9"),
])
def test_a_dotted_path_a_card_names_that_cannot_be_imported_is_named(key, dotted, context):
    card = {**load_card("esol"), "source": {**load_card("esol")["source"], key: dotted}}
    with pytest.raises(DatasetError, match=re.escape(f"source.{key} {dotted!r} cannot be imported{context} (")) as info:
        import_source_object(card, key, context)
    assert str(info.value).startswith(f"{card_path('esol')}: ") and "\n" not in str(info.value)
    card["source"][key] = "zoo.data.molecules.penalized_logp"
    assert import_source_object(card, key) is penalized_logp


def test_synthetic_card_schema(tmp_path):
    card = yaml.safe_load((REPO / "datasets" / "synthetic_sbm_100k.yaml").read_text())
    check_card(card, tmp_path / "synthetic_sbm_100k.yaml")  # the shipped card passes
    assert card["source"]["parameters"]["num_classes"] == card["num_classes"]
    for change, message in [
        (lambda c: c["source"].pop("parameters"), "source of kind synthetic lacks 'parameters'"),
        (lambda c: c["source"].update(parameters=[1000, 10000]), "source.parameters must map synthetic_sbm_graph's"),
        (lambda c: c.update(task="graph_regression", num_tasks=1, featurizer="ogb-smiles2graph", metric="mae",
                            split={"protocol": "random", "split_source": "x"}),
         "source.kind synthetic generates node-classification graphs"),
    ]:
        broken = yaml.safe_load((REPO / "datasets" / "synthetic_sbm_100k.yaml").read_text())
        change(broken)
        with pytest.raises(DatasetError, match=re.escape(message)):
            check_card(broken, tmp_path / "synthetic_sbm_100k.yaml")
