"""OGB sources on stand-in OGB folders (OGB's files are not staged offline): where the folder is
looked for, copied and verified, how graphs, labels and split come out, and what OGB may read."""
import re
import shutil
import warnings

import dgl
import pandas as pd
import pytest
import torch

from zoo.data import DatasetError, DatasetNotFoundError, load_card, load_graph_dataset
from zoo.data.mirror import STAMP, Roots
from zoo.data.ogb_source import load_ogb


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
