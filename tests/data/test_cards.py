"""Dataset cards: schema, agreement with DGL's own URLs/folders, and with the offline files."""
import hashlib
import re

import dgl.data
import pytest

from zoo.data import DatasetError, DatasetNotFoundError, list_cards, load_card
from zoo.data.mirror import sha256_file

NODE_CARDS = {
    # name: (DGL class, classes, split protocol, files staged offline)
    "cora": ("CoraGraphDataset", 7, "planetoid", True),
    "citeseer": ("CiteseerGraphDataset", 6, "planetoid", True),
    "pubmed": ("PubmedGraphDataset", 3, "planetoid", False),
    "texas": ("TexasDataset", 5, "geom_gcn", True),
    "cornell": ("CornellDataset", 5, "geom_gcn", True),
    "wisconsin": ("WisconsinDataset", 5, "geom_gcn", True),
    "roman_empire": ("RomanEmpireDataset", 18, "platonov", False),
    "amazon_ratings": ("AmazonRatingsDataset", 5, "platonov", False),
    "tolokers": ("TolokersDataset", 2, "platonov", True),
    "minesweeper": ("MinesweeperDataset", 2, "platonov", True),
    "questions": ("QuestionsDataset", 2, "platonov", False),
}


def _dgl_url_and_folder(cls_name, tmp_path):
    """DGL's own URL and raw folder name, from an instance that skips loading."""
    cls = getattr(dgl.data, cls_name)
    probe = type("Probe", (cls,), {"_load": lambda self: None})(raw_dir=str(tmp_path))
    return probe.url, probe.raw_path.rsplit("/", 1)[1]


def test_all_node_cards_listed():
    assert set(NODE_CARDS) <= set(list_cards())


@pytest.mark.parametrize("name", sorted(NODE_CARDS))
def test_card_fields(name):
    cls_name, num_classes, protocol, _ = NODE_CARDS[name]
    card = load_card(name)
    assert card["name"] == name and card["title"] and card["citation"] and card["notes"]
    assert card["task"] == "node_classification"
    assert card["source"]["dgl_class"] == f"dgl.data.{cls_name}"
    assert card["num_classes"] == num_classes
    assert card["metric"] == ("roc_auc" if num_classes == 2 else "accuracy")
    assert card["split"]["protocol"] == protocol
    assert card["split"]["num_splits"] == (1 if protocol == "planetoid" else 10)
    assert card["split"]["rule"]


@pytest.mark.parametrize("name", sorted(NODE_CARDS))
def test_card_matches_dgl_url_and_folder(name, tmp_path, monkeypatch):
    monkeypatch.delenv("DGL_REPO", raising=False)
    source = load_card(name)["source"]
    url, folder = _dgl_url_and_folder(NODE_CARDS[name][0], tmp_path)
    assert (source["url"], source["raw_folder"]) == (url, folder)
    suffix = hashlib.sha1(url.encode()).hexdigest()[:8]
    assert folder.endswith("_" + suffix)


@pytest.mark.parametrize("name", sorted(NODE_CARDS))
def test_card_hashes_known_only_for_staged_files(name):
    card = load_card(name)
    hashes = list(card["source"]["files"].values())
    assert hashes, "a card must list the raw files DGL reads"
    if NODE_CARDS[name][3]:
        assert all(re.fullmatch(r"[0-9a-f]{64}", h) for h in hashes)
    else:
        assert all(h is None for h in hashes)
        assert "unknown" in card["notes"]


@pytest.mark.parametrize("name", [n for n, spec in sorted(NODE_CARDS.items()) if spec[3]])
def test_card_hashes_match_offline_files(name, zoo_data):
    source = load_card(name)["source"]
    folder = zoo_data / source["raw_folder"]
    assert sorted(p.name for p in folder.iterdir()) == sorted(source["files"])
    for file, expected in source["files"].items():
        assert sha256_file(folder / file) == expected, file


def test_unknown_name_names_nearest_card():
    with pytest.raises(DatasetNotFoundError, match="Did you mean 'cora'") as info:
        load_card("corra")
    assert isinstance(info.value, DatasetError)
    assert "citeseer" in str(info.value)  # lists the available cards


def test_name_is_case_and_hyphen_insensitive():
    assert load_card("Roman-Empire")["name"] == "roman_empire"
