"""Fixtures of the data tests: a loopback HTTP server standing in for the datasets' hosts (no
internet), a folder of temporary cards (``$ZOO_CARDS``) and a pickle payload that leaves a mark."""
import http.server
import pickle
import threading
from pathlib import Path

import pytest
import yaml

from zoo.data.cards import card_path


class _Handler(http.server.BaseHTTPRequestHandler):
    """Serves ``server.routes[path] = (bytes, cut)``; ``cut`` sends half the bytes, then closes."""

    def do_GET(self):  # noqa: N802 (http.server's name)
        self.server.requests.append(self.path)
        if self.path not in self.server.routes:
            self.send_error(404)
            return
        data, cut = self.server.routes[self.path]
        self.send_response(200)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data[: len(data) // 2] if cut else data)

    def log_message(self, *args):
        pass


class Loopback:
    """A ``http.server`` on 127.0.0.1 in a thread: ``serve(path, data)`` returns the URL of ``data``."""

    def __init__(self):
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        self.server.routes, self.server.requests = {}, []

    def serve(self, path: str, data: bytes, *, cut: bool = False) -> str:
        """Serve ``data`` at ``path`` (with its query string, if any); ``cut``: close mid-file."""
        self.server.routes[path] = (data, cut)
        return self.url(path)

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_port}{path}"

    @property
    def requests(self) -> list[str]:
        """Paths requested so far."""
        return self.server.requests


@pytest.fixture
def loopback(monkeypatch):
    """A running :class:`Loopback`; proxies are switched off so urllib talks to it directly."""
    for var in ("http_proxy", "HTTP_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("no_proxy", "127.0.0.1")
    server = Loopback()
    thread = threading.Thread(target=server.server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    yield server
    server.server.shutdown()
    server.server.server_close()
    thread.join(timeout=5)


@pytest.fixture
def temp_cards(tmp_path, monkeypatch):
    """``write(name, change)``: a copy of the shipped card ``name`` after ``change(card)`` in a
    ``$ZOO_CARDS`` folder, where it overrides the shipped one. Returns the card."""
    folder = tmp_path / "cards"
    folder.mkdir()
    monkeypatch.setenv("ZOO_CARDS", str(folder))

    def write(name: str, change=lambda card: None) -> dict:
        card = yaml.safe_load(card_path(name).read_text())
        change(card)
        (folder / f"{card['name']}.yaml").write_text(yaml.safe_dump(card, sort_keys=False))
        return card

    return write


class _Payload:
    """Unpickling it calls ``open(marker, "w")``: the marker file appears if a payload ever runs."""

    def __init__(self, marker: Path):
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


@pytest.fixture
def payload():
    """``payload(marker, size=None)``: a pickle that creates ``marker`` when loaded, zero-padded to
    ``size`` bytes (pickle ignores what follows its STOP opcode) to stand in for a file that size."""

    def make(marker: Path, size: int | None = None) -> bytes:
        data = pickle.dumps(_Payload(marker))
        return data if size is None else data + b"\0" * (size - len(data))

    return make
