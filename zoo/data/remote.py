"""Verified downloads: a file reaches its place only once it is complete and its sha256 is right.

:func:`download` streams a URL into a temporary file beside the destination
(:func:`zoo._atomic.atomic_write`), hashing the bytes as they arrive, and renames it into place
only when the transfer is complete (as long as ``Content-Length`` says) and the sha256 is the
expected one. An interrupted or wrong download leaves no file behind that a later load could
trust. ``ZOO_OFFLINE=1`` refuses before any socket is opened. Every failure is one line
(:class:`DownloadError` or :class:`ChecksumMismatchError`).

>>> from pathlib import Path
>>> _ = Path("served.txt").write_text("test")  # a file:// URL stands in for a server here
>>> url, pin = Path("served.txt").resolve().as_uri(), "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
>>> download(url, "cache/copy.txt", pin, progress=False, offline=False) == pin, Path("cache/copy.txt").read_text()
(True, 'test')
>>> download(url, "cache/other.txt", "ab" * 32, progress=False, offline=False)
Traceback (most recent call last):
zoo.data.cards.ChecksumMismatchError: Checksum mismatch for file:///.../served.txt: expected sha256 abab...ab, got 9f86d081...; the download was deleted. ...
>>> Path("cache/other.txt").exists()
False
"""
from __future__ import annotations

import hashlib
import http.client
import os
import urllib.error
import urllib.request
import zipfile
from pathlib import Path

from zoo._atomic import atomic_write
from zoo._progress import progress as show_progress
from zoo.data.cards import ChecksumMismatchError, DatasetError, DatasetNotFoundError

TIMEOUT = 60.0
"""Seconds a connection or a read may stall before the download fails."""
_TRUE = ("1", "true")


class DownloadError(DatasetNotFoundError):
    """A file could not be fetched: offline mode, a network or HTTP error, or a cut transfer."""


def offline_from_env() -> bool:
    """True when ``$ZOO_OFFLINE`` is ``1`` or ``true`` (any case)."""
    return os.environ.get("ZOO_OFFLINE", "").strip().lower() in _TRUE


def download(url: str, dest: str | Path, sha256: str | None, progress: bool = True, *,
             offline: bool | None = None, timeout: float = TIMEOUT) -> str:
    """Fetch ``url`` into ``dest`` (progress by :func:`zoo._progress.progress` when ``progress``)
    and return its sha256.

    ``sha256`` is the expected hex digest: a mismatch deletes the download and raises
    :class:`ChecksumMismatchError`. ``None`` skips the check (the caller must verify the returned
    digest). ``offline`` (default: ``$ZOO_OFFLINE``) refuses without touching the network.

    >>> download("https://example.org/data.csv", "cache/data.csv", sha256="9f86d0...", offline=True)
    Traceback (most recent call last):
    zoo.data.remote.DownloadError: Offline mode is on (ZOO_OFFLINE): https://example.org/data.csv was not downloaded. Put the file at cache/data.csv (sha256 9f86d0...) by hand, or unset ZOO_OFFLINE.
    """
    dest = Path(dest)
    if offline is None:
        offline = offline_from_env()
    if offline:
        pin = f" (sha256 {sha256})" if sha256 else ""
        raise DownloadError(f"Offline mode is on (ZOO_OFFLINE): {url} was not downloaded. Put the file at "
                            f"{dest}{pin} by hand, or unset ZOO_OFFLINE.")
    got = []

    def write(out) -> None:  # raising here (a cut transfer, a mismatch) deletes the partial file
        actual = _fetch(url, out, progress, timeout, dest.name)
        if sha256 is not None and actual != sha256.lower():
            raise ChecksumMismatchError(
                f"Checksum mismatch for {url}: expected sha256 {sha256.lower()}, got {actual}; the "
                f"download was deleted. The server's file is not the pinned one (or was corrupted "
                f"on the way): retry, and if it persists, check the source before changing the pin.")
        got.append(actual)

    atomic_write(dest, write)
    return got[0]


def _fetch(url: str, out, progress: bool, timeout: float, label: str) -> str:
    """Stream ``url`` into the binary file ``out``; the sha256, or DownloadError when the transfer
    fails or is cut."""
    digest, size = hashlib.sha256(), 0
    try:
        with urllib.request.urlopen(url, timeout=timeout) as response:
            length = response.headers.get("Content-Length")
            total = int(length) if length and length.isdigit() else None
            chunks = iter(lambda: response.read(1 << 20), b"")
            for chunk in show_progress(chunks, label, total, enabled=progress, unit="B", size=len):
                out.write(chunk)
                digest.update(chunk)
                size += len(chunk)
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        reason = f"HTTP {exc.code} {exc.reason}" if isinstance(exc, urllib.error.HTTPError) else getattr(
            exc, "reason", None) or exc
        raise DownloadError(f"Downloading {url} failed ({type(exc).__name__}: {reason}); nothing was kept. "
                            "Retry, or fetch the file by hand.") from None
    if total is not None and size != total:
        raise DownloadError(f"Downloading {url} was cut off after {size} of {total} bytes; nothing was kept. "
                            "Retry, or fetch the file by hand.")
    return digest.hexdigest()


def unzip(archive: Path, folder: Path, origin: str, names=None) -> None:
    """Extract ``names`` (default: every member) of the zip downloaded from ``origin`` into ``folder``.

    Member paths are sanitised by :mod:`zipfile` (no absolute paths, no ``..``); a corrupt archive
    is a one-line :class:`DatasetError`.
    """
    try:
        with zipfile.ZipFile(archive) as zf:
            members = zf.namelist() if names is None else [n for n in names if n in set(zf.namelist())]
            for name in members:
                zf.extract(name, folder)
    except (zipfile.BadZipFile, OSError) as exc:
        raise DatasetError(f"The file downloaded from {origin} is not a readable zip archive ({exc}).") from None
