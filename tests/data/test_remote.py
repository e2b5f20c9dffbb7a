"""download() against a loopback server: the file appears only complete and with the right sha256,
every failure is one line and leaves nothing, and offline mode never opens a socket."""
import hashlib
import os
import socket
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from zoo import _progress
from zoo.data import ChecksumMismatchError, DatasetError, DatasetNotFoundError
from zoo.data.remote import DownloadError, download, unzip

REPO = Path(__file__).resolve().parents[2]
DATA = bytes(range(256)) * 4096 + b"tail"  # 1 MiB + 4 bytes: more than one read chunk
SHA = hashlib.sha256(DATA).hexdigest()


def _one_line(exc) -> str:
    message = str(exc)
    assert "\n" not in message and message
    return message


def test_download_verifies_and_renames_into_place(loopback, tmp_path, capsys, monkeypatch):
    """In a log (LINE_EVERY 0 s here) the download says its bytes after the first 1 MiB chunk."""
    monkeypatch.setattr(_progress, "LINE_EVERY", 0.0)
    url = loopback.serve("/w.bin", DATA)
    dest = tmp_path / "sub" / "w.bin"
    assert download(url, dest, SHA, progress=True, offline=False, timeout=10) == SHA
    assert dest.read_bytes() == DATA and sorted(p.name for p in dest.parent.iterdir()) == ["w.bin"]
    assert capsys.readouterr().err.startswith("w.bin: 1.05MB/1.05MB, ")
    assert download(url, tmp_path / "any.bin", None, progress=False, offline=False, timeout=10) == SHA
    assert loopback.requests == ["/w.bin", "/w.bin"]


def test_checksum_mismatch_deletes_the_download(loopback, tmp_path):
    url = loopback.serve("/w.bin", DATA)
    wrong = "0" * 64
    with pytest.raises(ChecksumMismatchError) as info:
        download(url, tmp_path / "w.bin", wrong, progress=False, offline=False, timeout=10)
    message = _one_line(info.value)
    assert url in message and wrong in message and SHA in message and "deleted" in message
    assert list(tmp_path.iterdir()) == []


def test_a_cut_transfer_leaves_nothing(loopback, tmp_path):
    url = loopback.serve("/w.bin", DATA, cut=True)
    with pytest.raises(DownloadError, match=f"cut off after {len(DATA) // 2} of {len(DATA)} bytes") as info:
        download(url, tmp_path / "w.bin", SHA, progress=False, offline=False, timeout=10)
    assert url in _one_line(info.value) and isinstance(info.value, DatasetNotFoundError)
    assert list(tmp_path.iterdir()) == []  # no .part, no file
    with pytest.raises(DownloadError):  # without a pin the cut is caught all the same
        download(url, tmp_path / "w.bin", None, progress=False, offline=False, timeout=10)
    assert list(tmp_path.iterdir()) == []


def test_http_errors_and_silent_servers_are_one_line(loopback, tmp_path):
    with pytest.raises(DownloadError, match="HTTPError: HTTP 404 Not Found") as info:
        download(loopback.url("/missing"), tmp_path / "w.bin", SHA, progress=False, offline=False, timeout=10)
    assert "/missing" in _one_line(info.value)
    silent = socket.socket()  # accepts connections, never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    try:
        with pytest.raises(DownloadError, match="timed out") as info:
            download(f"http://127.0.0.1:{silent.getsockname()[1]}/w.bin", tmp_path / "w.bin", SHA,
                     progress=False, offline=False, timeout=0.5)
    finally:
        silent.close()
    _one_line(info.value)
    assert list(tmp_path.iterdir()) == []


def test_offline_never_opens_a_socket(tmp_path, monkeypatch):
    def no_network(*args, **kwargs):
        raise AssertionError("a socket was opened in offline mode")

    monkeypatch.setattr(socket, "socket", no_network)
    monkeypatch.setattr(socket, "create_connection", no_network)
    monkeypatch.setenv("ZOO_OFFLINE", "1")
    with pytest.raises(DownloadError, match="Offline mode is on") as info:
        download("http://127.0.0.1:9/w.bin", tmp_path / "w.bin", SHA)
    assert SHA in _one_line(info.value) and str(tmp_path / "w.bin") in str(info.value)
    with pytest.raises(DownloadError, match="Offline mode is on"):
        download("http://127.0.0.1:9/w.bin", tmp_path / "w.bin", SHA, offline=True)
    assert not (tmp_path / "w.bin").exists()


def test_unzip_extracts_the_names_asked_for_and_refuses_a_broken_archive(tmp_path):
    archive = tmp_path / "a.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        zf.writestr("keep.txt", "k")
        zf.writestr("other.txt", "o")
        zf.writestr("../escape.txt", "e")
    unzip(archive, tmp_path / "some", "http://x/a.zip", names=["keep.txt", "absent.txt"])
    assert [p.name for p in (tmp_path / "some").iterdir()] == ["keep.txt"]
    unzip(archive, tmp_path / "all", "http://x/a.zip")
    assert sorted(p.name for p in (tmp_path / "all").iterdir()) == ["escape.txt", "keep.txt", "other.txt"]
    assert not (tmp_path / "escape.txt").exists()  # '..' stays inside the folder
    (tmp_path / "bad.zip").write_bytes(b"not a zip")
    with pytest.raises(DatasetError, match="http://x/bad.zip is not a readable zip archive") as info:
        unzip(tmp_path / "bad.zip", tmp_path / "x", "http://x/bad.zip")
    _one_line(info.value)


def test_an_offline_process_makes_no_network_call(tmp_path):
    """A fresh interpreter with ZOO_OFFLINE=1 imports the zoo and asks for every card that has no
    offline copy; an audit hook sees every socket event. None may resolve a name, connect or
    send (ogb's import-time PyPI version check included)."""
    probe = """
import sys, threading
events = []
sys.addaudithook(lambda event, args: events.append(event) if event.startswith("socket.") else None)
from zoo.data import DatasetNotFoundError, load_graph_dataset, load_node_dataset
refused = []
for name in ["pubmed", "roman_empire", "amazon_ratings", "questions"]:
    try:
        load_node_dataset(name)
    except DatasetNotFoundError as exc:
        refused.append(name)
for name in ["peptides_struct", "zinc", "molpcba"]:
    try:
        load_graph_dataset(name, progress=False)
    except DatasetNotFoundError as exc:
        refused.append(name)
for thread in threading.enumerate():
    if thread is not threading.main_thread():
        thread.join(timeout=60)
print(len(refused), sorted({e for e in events if e in ("socket.getaddrinfo", "socket.gethostbyname", "socket.connect", "socket.sendto", "socket.sendmsg")}))
"""
    env = {**os.environ, "ZOO_OFFLINE": "1", "ZOO_DATA": str(tmp_path / "data"), "ZOO_CACHE": str(tmp_path / "cache")}
    env.pop("ZOO_CARDS", None)
    out = subprocess.run([sys.executable, "-c", probe], cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip().splitlines()[-1] == "7 []"
