"""Shared test fixtures: offline data location, a writable cache per test session, and a loopback
HTTP server standing in for the hosts datasets and checkpoints download from (no internet)."""
import http.server
import os
import threading
from pathlib import Path

import pytest

SHARED_DATA = Path(__file__).resolve().parents[1].parent / "shared" / "data"
DATA_ROOT = Path(os.environ.get("ZOO_DATA") or SHARED_DATA)  # read once, before tests touch the env
# The tools called in this process would otherwise set glibc to keep freed memory
# (zoo.engine.allocator) for the rest of the session, and the memory tests read its peak.
os.environ.setdefault("ZOO_MALLOC", "default")


def pytest_sessionstart(session):
    """Build the fused CPU kernels (zoo/ops/_fused.py) once, before any test starts worker
    processes: torchrun ranks with a 60 s limit must find them built, not race to build them."""
    from zoo.ops import _fused

    _fused.kernels()


@pytest.fixture(scope="session")
def loaded_libc() -> str:
    """The path of the C library this process runs on, from its memory map: a library any test
    process can preload as a stand-in for jemalloc (Linux only)."""
    if not Path("/proc/self/maps").exists():
        pytest.skip("reads /proc/self/maps")
    maps = Path("/proc/self/maps").read_text().split()
    return next(word for word in maps if "/libc.so" in word or "/libc-" in word)


@pytest.fixture(scope="session")
def zoo_data() -> Path:
    """The read-only offline data folder ($ZOO_DATA, else ../shared/data); skip if absent."""
    if not DATA_ROOT.is_dir():
        pytest.skip(f"offline data not found at {DATA_ROOT}; set ZOO_DATA to run this test")
    return DATA_ROOT


@pytest.fixture(scope="session")
def zoo_cache(tmp_path_factory) -> Path:
    """A writable cache shared by the tests of one session."""
    return tmp_path_factory.mktemp("zoo_cache")


@pytest.fixture
def offline_env(zoo_data, zoo_cache, monkeypatch):
    """ZOO_DATA / ZOO_CACHE set to the session's data and cache, no downloads."""
    monkeypatch.setenv("ZOO_DATA", str(zoo_data))
    monkeypatch.setenv("ZOO_CACHE", str(zoo_cache))
    monkeypatch.setenv("ZOO_OFFLINE", "1")


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
