"""Offline-first raw folders on a hand-made card: mirror from ZOO_DATA, verify the cache by its
stamp, download into a scratch folder, and the errors that name files, hashes and URLs."""
import hashlib
import os

import pytest

from zoo.data import ChecksumMismatchError, DatasetError, DatasetNotFoundError
from zoo.data import mirror
from zoo.data.mirror import Roots, ensure_raw_folder, resolve_roots

FILES = {"a.txt": b"alpha\n", "b.bin": bytes(range(256))}
URL = "https://example.org/toy.zip"


def _card(**files):
    hashes = {name: hashlib.sha256(data).hexdigest() for name, data in FILES.items()}
    return {"name": "toy", "source": {"url": URL, "raw_folder": "toy_1", "files": {**hashes, **files}}}


def _data_root(tmp_path):
    folder = tmp_path / "data" / "toy_1"
    folder.mkdir(parents=True)
    for name, data in FILES.items():
        (folder / name).write_bytes(data)
    return tmp_path / "data"


def _no_download(scratch):
    raise AssertionError("downloaded although a copy was there")


def test_sha256_file_across_chunks(tmp_path):
    (tmp_path / "empty").write_bytes(b"")
    assert mirror.sha256_file(tmp_path / "empty") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
    data = os.urandom(3 * (1 << 20) + 17)  # crosses the 1 MiB read chunks
    (tmp_path / "big").write_bytes(data)
    assert mirror.sha256_file(tmp_path / "big") == hashlib.sha256(data).hexdigest()


def test_mirror_from_data_root_leaves_it_untouched(tmp_path):
    data = _data_root(tmp_path)
    before = {p: p.stat().st_mtime_ns for p in data.rglob("*")}
    folder = ensure_raw_folder(_card(), _no_download, data_root=data, cache_root=tmp_path / "cache", offline=True)
    assert folder == tmp_path / "cache" / "toy_1"
    assert {name: (folder / name).read_bytes() for name in FILES} == FILES
    assert {p: p.stat().st_mtime_ns for p in data.rglob("*")} == before and sorted(p.name for p in data.rglob("*")) == [
        "a.txt", "b.bin", "toy_1"]
    assert (folder / mirror.STAMP).is_file()


def test_corrupt_data_root_file_names_both_hashes(tmp_path):
    data = _data_root(tmp_path)
    (data / "toy_1" / "a.txt").write_bytes(b"tampered\n")
    card = _card()
    with pytest.raises(ChecksumMismatchError, match=card["source"]["files"]["a.txt"]) as info:
        ensure_raw_folder(card, _no_download, data_root=data, cache_root=tmp_path / "cache", offline=True)
    assert hashlib.sha256(b"tampered\n").hexdigest() in str(info.value) and URL in str(info.value)


def test_cache_is_verified_by_its_stamp_without_rehashing(tmp_path, monkeypatch):
    ensure_raw_folder(_card(), _no_download, data_root=_data_root(tmp_path), cache_root=tmp_path / "cache", offline=True)
    hashed, real = [], mirror.sha256_file
    monkeypatch.setattr(mirror, "sha256_file", lambda path: hashed.append(path.name) or real(path))
    ensure_raw_folder(_card(), _no_download, data_root=None, cache_root=tmp_path / "cache", offline=True)
    assert hashed == []  # size and mtime match the stamp
    os.utime(tmp_path / "cache" / "toy_1" / "a.txt", ns=(1, 1))
    ensure_raw_folder(_card(), _no_download, data_root=None, cache_root=tmp_path / "cache", offline=True)
    assert hashed == ["a.txt"]  # only the touched file is hashed again
    (tmp_path / "cache" / "toy_1" / "b.bin").write_bytes(b"corrupt")
    with pytest.raises(ChecksumMismatchError, match="delete .*toy_1 and load again"):
        ensure_raw_folder(_card(), _no_download, data_root=None, cache_root=tmp_path / "cache", offline=True)


def test_download_goes_through_a_scratch_folder_and_is_verified(tmp_path):
    def download(scratch):
        (scratch / "toy_1").mkdir()
        for name, data in FILES.items():
            (scratch / "toy_1" / name).write_bytes(data)

    folder = ensure_raw_folder(_card(), download, data_root=None, cache_root=tmp_path / "cache", offline=False)
    assert sorted(p.name for p in (tmp_path / "cache").iterdir()) == ["toy_1"] and (folder / "b.bin").is_file()

    def bad_download(scratch):
        download(scratch)
        (scratch / "toy_1" / "b.bin").write_bytes(b"")

    with pytest.raises(ChecksumMismatchError, match="b.bin"):
        ensure_raw_folder(_card(), bad_download, data_root=None, cache_root=tmp_path / "other", offline=False)
    assert list((tmp_path / "other").iterdir()) == []


def test_unknown_hash_warns_with_the_hash_it_found(tmp_path):
    with pytest.warns(UserWarning, match=hashlib.sha256(FILES["a.txt"]).hexdigest()):
        ensure_raw_folder(_card(**{"a.txt": None}), _no_download, data_root=_data_root(tmp_path),
                          cache_root=tmp_path / "cache", offline=True)


def test_missing_folder_offline_names_where_it_looked(tmp_path):
    with pytest.raises(DatasetNotFoundError, match="Offline mode is on") as info:
        ensure_raw_folder(_card(), _no_download, data_root=tmp_path / "data", cache_root=tmp_path / "cache", offline=True)
    message = str(info.value)
    assert str(tmp_path / "data" / "toy_1") in message and str(tmp_path / "cache" / "toy_1") in message and URL in message
    (tmp_path / "data" / "toy_1").mkdir(parents=True)
    with pytest.raises(DatasetNotFoundError, match=r"lacks \['a.txt', 'b.bin'\]"):
        ensure_raw_folder(_card(), _no_download, data_root=tmp_path / "data", cache_root=tmp_path / "cache", offline=True)


def test_failed_download_is_not_found_with_its_cause(tmp_path):
    def download(scratch):
        raise ConnectionError("no route to host")

    with pytest.raises(DatasetNotFoundError, match="no route to host") as info:
        ensure_raw_folder(_card(), download, data_root=None, cache_root=tmp_path, offline=False)
    assert isinstance(info.value.__cause__, ConnectionError) and isinstance(info.value, DatasetError)


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
