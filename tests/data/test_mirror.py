"""Offline-first raw folders on a hand-made card: private copies of ZOO_DATA (never links), every
raw file hashed on every load, verified downloads from a loopback server, the processed-cache
guard, and the alias test over every card with an offline copy."""
import hashlib
import io
import os
import shutil
import zipfile

import pytest

from zoo.data import ChecksumMismatchError, DatasetError, DatasetNotFoundError, list_cards, load_card
from zoo.data import load_graph_dataset, load_node_dataset, mirror
from zoo.data.mirror import Roots, ensure_raw_folder, guard_derived, read_stamp, resolve_roots

FILES = {"a.txt": b"alpha\n", "b.bin": bytes(range(256))}
URL = "https://example.org/toy.zip"


def _card(url=URL, **files):
    hashes = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}
    return {"name": "toy", "source": {"url": url, "raw_folder": "toy_1", "files": {**hashes, **files}}}


def _data_root(tmp_path):
    folder = tmp_path / "data" / "toy_1"
    folder.mkdir(parents=True)
    for name, data in FILES.items():
        (folder / name).write_bytes(data)
    return tmp_path / "data"


def _zip(files=FILES) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as zf:
        for name, data in files.items():
            zf.writestr(name, data)
    return buffer.getvalue()


def _load(card, tmp_path, data_root=None, offline=True):
    return ensure_raw_folder(card, data_root=data_root, cache_root=tmp_path / "cache", offline=offline)


def _hashes(root):
    """sha256 of every file under ``root`` by relative path."""
    return {p.relative_to(root): mirror.sha256_file(p) for p in sorted(root.rglob("*")) if p.is_file()}


def test_sha256_file_across_chunks(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert mirror.sha256_file(tmp_path / "empty") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    data = os.urandom(3 * (1 << 20) + 17)  # crosses the 1 MiB read chunks
    (tmp_path / "big").write_bytes(data)
    assert mirror.sha256_file(tmp_path / "big") == hashlib.sha256(data).hexdigest()


def test_mirror_copies_and_never_links(tmp_path):
    data = _data_root(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*")}
    folder = _load(_card(), tmp_path, data)
    assert folder == tmp_path / "cache" / "toy_1"
    for name in FILES:
        copy, original = folder / name, data / "toy_1" / name
        assert copy.read_bytes() == FILES[name] and not copy.is_symlink()
        assert copy.stat().st_ino != original.stat().st_ino and original.stat().st_nlink == 1
        with open(copy, "ab") as f:  # an in-place write to the cache ...
            f.write(b"appended")
        assert original.read_bytes() == FILES[name]  # ... never reaches ZOO_DATA
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*")} == before
    assert set(read_stamp(folder)["raw"]) == set(FILES)


def test_corrupt_data_root_file_names_both_hashes(tmp_path):
    data = _data_root(tmp_path)
    (data / "toy_1" / "a.txt").write_bytes(b"tampered\n")
    card = _card()
    with pytest.raises(ChecksumMismatchError, match=card["source"]["files"]["a.txt"]) as info:
        _load(card, tmp_path, data)
    assert hashlib.sha256(b"tampered\n").hexdigest() in str(info.value) and URL in str(info.value)
    assert not (tmp_path / "cache" / "toy_1" / "a.txt").exists()


def test_every_load_hashes_every_raw_file(tmp_path, monkeypatch):
    _load(_card(), tmp_path, _data_root(tmp_path))
    hashed, real = [], mirror.sha256_file
    monkeypatch.setattr(mirror, "sha256_file", lambda path: hashed.append(path.name) or real(path))
    for _ in range(2):
        _load(_card(), tmp_path)
    assert sorted(hashed) == sorted([*FILES, *FILES])
    # same size, mtime restored: size and mtime say nothing, the hash does
    path = tmp_path / "cache" / "toy_1" / "b.bin"
    stat = path.stat()
    path.write_bytes(bytes(reversed(FILES["b.bin"])))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    with pytest.raises(ChecksumMismatchError, match="delete .*toy_1 and load again") as info:
        _load(_card(), tmp_path)
    assert "\n" not in str(info.value)


def test_a_changed_or_linked_cache_copy_is_replaced_from_data_root(tmp_path):
    data = _data_root(tmp_path)
    folder = _load(_card(), tmp_path, data)
    (folder / "processed.bin").write_bytes(b"built from the old raw files")
    (folder / "a.txt").unlink()
    os.link(data / "toy_1" / "a.txt", folder / "a.txt")  # what older versions left: a hard link
    (folder / "b.bin").unlink()
    (folder / "b.bin").symlink_to(data / "toy_1" / "b.bin")
    with pytest.warns(UserWarning, match="cache copies of a.txt, b.bin .* replaced them with verified copies"):
        _load(_card(), tmp_path, data)
    assert all((folder / name).stat().st_nlink == 1 and not (folder / name).is_symlink() for name in FILES)
    assert not (folder / "processed.bin").exists()  # derived from replaced raw files: gone


@pytest.mark.parametrize("how", ["zip", "file_urls", "one file"])
def test_download_is_verified_then_moved_into_the_cache(how, loopback, tmp_path):
    card = _card()
    if how == "zip":
        card["source"].update(url=loopback.serve("/toy.zip", _zip()), archive="zip")
    elif how == "file_urls":
        card["source"]["file_urls"] = {name: loopback.serve(f"/{name}?dl=1", data) for name, data in FILES.items()}
    else:
        del card["source"]["files"]["b.bin"]
        card["source"]["url"] = loopback.serve("/a.txt", FILES["a.txt"])
    folder = _load(card, tmp_path, offline=False)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["toy_1"]  # scratch folder removed
    assert {name: (folder / name).read_bytes() for name in card["source"]["files"]} == {
        name: FILES[name] for name in card["source"]["files"]}
    served = len(loopback.requests)
    _load(card, tmp_path)  # from the cache now, verified, no request
    assert len(loopback.requests) == served


def test_a_wrong_download_is_refused_and_nothing_is_kept(loopback, tmp_path):
    card = _card(url=loopback.serve("/toy.zip", _zip({**FILES, "b.bin": b"other"})))
    card["source"]["archive"] = "zip"
    with pytest.raises(ChecksumMismatchError, match="b.bin") as info:
        _load(card, tmp_path, offline=False)
    assert "\n" not in str(info.value) and list((tmp_path / "cache").iterdir()) == []
    pinned = _card(url=loopback.serve("/a.txt", b"other"))
    del pinned["source"]["files"]["b.bin"]
    with pytest.raises(ChecksumMismatchError, match="the download was deleted"):
        _load(pinned, tmp_path, offline=False)
    assert list((tmp_path / "cache").iterdir()) == []


def test_a_cut_download_is_not_found_and_leaves_nothing(loopback, tmp_path):
    card = _card(url=loopback.serve("/toy.zip", _zip(), cut=True))
    card["source"]["archive"] = "zip"
    with pytest.raises(DatasetNotFoundError, match="cut off after") as info:
        _load(card, tmp_path, offline=False)
    assert "\n" not in str(info.value) and list((tmp_path / "cache").iterdir()) == []
    with pytest.raises(DatasetNotFoundError, match="Offline mode is on"):  # nothing to trust later
        _load(card, tmp_path)


def test_md5_published_upstream_is_checked_on_download(loopback, tmp_path):
    card = _card()
    card["source"]["files"] = {"a.txt": None}
    card["source"]["url"] = loopback.serve("/a.txt", FILES["a.txt"])
    card["source"]["md5"] = {"a.txt": hashlib.md5(b"something else").hexdigest()}
    with pytest.raises(ChecksumMismatchError, match="its md5 is not the published"):
        _load(card, tmp_path, offline=False)
    assert list((tmp_path / "cache").iterdir()) == []
    card["source"]["md5"] = {"a.txt": hashlib.md5(FILES["a.txt"]).hexdigest()}
    folder = _load(card, tmp_path, offline=False)  # md5 right: no warning, sha256 recorded
    assert read_stamp(folder)["raw"] == {"a.txt": hashlib.sha256(FILES["a.txt"]).hexdigest()}


def test_an_unpinned_file_is_checked_against_the_record_of_its_download(loopback, tmp_path):
    card = {"name": "toy", "source": {"url": loopback.serve("/a.txt", FILES["a.txt"]), "raw_folder": "toy_1",
                                      "files": {"a.txt": None}}}
    sha = hashlib.sha256(FILES["a.txt"]).hexdigest()
    with pytest.warns(UserWarning, match=f"no sha256 for a.txt, so it was not verified; its sha256 is {sha}"):
        folder = _load(card, tmp_path, offline=False)
    _load(card, tmp_path)  # the record vouches for it
    (folder / "a.txt").write_bytes(b"changed")
    with pytest.raises(ChecksumMismatchError, match=f"expected sha256 {sha} \\(from .*{mirror.STAMP}\\)"):
        _load(card, tmp_path)
    (folder / mirror.STAMP).unlink()
    with pytest.raises(DatasetError, match="no sha256 in .* and no record of the zoo placing it"):
        _load(card, tmp_path)


def test_unknown_hash_from_data_root_warns_with_the_hash_it_found(tmp_path):
    with pytest.warns(UserWarning, match=hashlib.sha256(FILES["a.txt"]).hexdigest()):
        _load(_card(**{"a.txt": None}), tmp_path, _data_root(tmp_path))


def test_missing_folder_offline_names_where_it_looked(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="Offline mode is on") as info:
        _load(_card(), tmp_path, tmp_path / "data")
    message = str(info.value)
    assert str(tmp_path / "data" / "toy_1") in message and str(tmp_path / "cache" / "toy_1") in message and URL in message
    (tmp_path / "data" / "toy_1").mkdir(parents=True)
    with pytest.raises(DatasetNotFoundError, match=r"lacks \['a.txt', 'b.bin'\]"):
        _load(_card(), tmp_path, tmp_path / "data")


def test_guard_derived_deletes_what_the_zoo_did_not_record(tmp_path):
    folder = tmp_path / "raw"
    folder.mkdir()
    (folder / "a.txt").write_text("raw")
    with guard_derived(folder, ["a.txt"]):
        (folder / "graph.bin").write_bytes(b"built")  # what a dataset class writes
        (folder / "sub").mkdir()
        (folder / "sub" / "info.pkl").write_bytes(b"built too")
    assert read_stamp(folder)["processed"] == {"graph.bin": hashlib.sha256(b"built").hexdigest(),
                                               "sub/info.pkl": hashlib.sha256(b"built too").hexdigest()}
    with guard_derived(folder, ["a.txt"]):  # recorded and unchanged: kept; rewritten: recorded anew
        assert (folder / "graph.bin").is_file() and (folder / "sub" / "info.pkl").is_file()
        (folder / "graph.bin").write_bytes(b"rebuilt")
    assert read_stamp(folder)["processed"]["graph.bin"] == hashlib.sha256(b"rebuilt").hexdigest()
    (folder / "sub" / "info.pkl").write_bytes(b"replaced")
    (folder / "planted.pkl").write_bytes(b"never written by the class")
    (folder / "link.bin").symlink_to(folder / "graph.bin")
    with pytest.warns(UserWarning) as record:
        with guard_derived(folder, ["a.txt"]):
            assert sorted(p.name for p in folder.rglob("[!.]*")) == ["a.txt", "graph.bin", "sub"]
    messages = {str(w.message).split(" ", 3)[2].rsplit("/", 1)[1]: str(w.message) for w in record}
    assert sorted(messages) == ["info.pkl", "link.bin", "planted.pkl"] and len(record) == 3
    assert all("\n" not in m and "deleted it unread" in m for m in messages.values())
    assert "differs from the sha256 the zoo recorded" in messages["info.pkl"]
    assert "has no record" in messages["planted.pkl"]
    assert (folder / "a.txt").read_text() == "raw"


def test_resolve_roots_reads_the_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("ZOO_DATA", str(tmp_path / "d"))
    monkeypatch.setenv("ZOO_CACHE", str(tmp_path / "c"))
    monkeypatch.setenv("ZOO_OFFLINE", "True")
    assert resolve_roots() == Roots(tmp_path / "d", tmp_path / "c", True)
    assert resolve_roots(None, None, False).offline is False
    monkeypatch.delenv("ZOO_DATA")
    monkeypatch.delenv("ZOO_CACHE")
    monkeypatch.setenv("ZOO_OFFLINE", "0")
    assert resolve_roots() == Roots(None, mirror.Path.home() / ".cache" / "zoo", False)


def test_writing_to_every_cache_file_leaves_zoo_data_byte_identical(zoo_data, tmp_path):
    """The alias test, on a writable copy of the offline data (a failure cannot damage the real
    one): load every card that has an offline copy, append to every file in the cache, compare."""
    data, cache = tmp_path / "data", tmp_path / "cache"
    shutil.copytree(zoo_data, data)
    before = _hashes(data)
    roots = {"data_root": data, "cache_root": cache, "offline": True}
    loaded = []
    for name in list_cards():
        card = load_card(name)
        for source in [card["source"], *([card["fallback"]] if "fallback" in card else [])]:
            if "raw_folder" not in source or not (data / source["raw_folder"]).is_dir():
                continue
            loaded.append(name)
            if card["task"] == "node_classification":  # DGL reads the copies and writes its caches
                load_node_dataset(name, **roots)
            else:  # the copy step of every source (DGL's Peptides-func processing takes 90 s)
                ensure_raw_folder({**card, "source": source}, **roots)
    load_graph_dataset("zinc_smiles", limit=40, pe={"rwse_k": 4}, progress=False, **roots)  # featurized + PE caches
    assert {"cora", "citeseer", "texas", "tolokers", "peptides_func", "zinc_smiles", "molhiv", "esol"} <= set(loaded)
    files = [p for p in cache.rglob("*") if p.is_file() or p.is_symlink()]
    assert not any(p.is_symlink() for p in files)
    shared = {(p.stat().st_dev, p.stat().st_ino) for p in data.rglob("*") if p.is_file()}
    assert not shared & {(p.stat().st_dev, p.stat().st_ino) for p in files}
    assert {p.name for p in files} >= {"ind.cora_v2.x", "cora_v2_dgl_graph.pkl", "tolokers.npz", "HIV.csv"}
    for path in files:
        with open(path, "ab") as f:
            f.write(b"written through the cache")
    assert _hashes(data) == before
    with pytest.warns(UserWarning, match="replaced them with verified copies"):  # and the cache heals
        assert load_node_dataset("cora", **roots).graph.num_nodes() == 2708
