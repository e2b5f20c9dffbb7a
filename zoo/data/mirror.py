"""Offline-first raw files: find a card's raw folder, verify its sha256s, mirror it into the cache.

Order: ``$ZOO_DATA/<raw_folder>`` (read-only; verified, then copied or hard-linked into the
cache), else an already verified ``$ZOO_CACHE/<raw_folder>``, else a download (unless offline)
into the cache, else :class:`DatasetNotFoundError`. Verified hashes are remembered per cache
folder in a stamp file keyed by file size and mtime, so cache copies are hashed once.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import uuid
import warnings
from pathlib import Path
from typing import Callable, NamedTuple

from zoo.data.cards import ChecksumMismatchError, DatasetError, DatasetNotFoundError, card_path

STAMP = ".zoo-verified.json"
_TRUE = ("1", "true")


class Roots(NamedTuple):
    """Where raw files are read (``data``, may be None), where caches go, and whether to download."""

    data: Path | None
    cache: Path
    offline: bool


def resolve_roots(data_root=None, cache_root=None, offline=None) -> Roots:
    """Apply the defaults: ``$ZOO_DATA``, ``$ZOO_CACHE`` (else ~/.cache/zoo), ``$ZOO_OFFLINE``."""
    if data_root is None:
        data_root = os.environ.get("ZOO_DATA") or None
    if cache_root is None:
        cache_root = os.environ.get("ZOO_CACHE") or Path.home() / ".cache" / "zoo"
    if offline is None:
        offline = os.environ.get("ZOO_OFFLINE", "").strip().lower() in _TRUE
    data_root = Path(data_root).expanduser() if data_root is not None else None
    return Roots(data_root, Path(cache_root).expanduser(), bool(offline))


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file, read in 1 MiB chunks."""
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def ensure_raw_folder(
    card: dict,
    download: Callable[[Path], None],
    *,
    data_root: Path | None,
    cache_root: Path,
    offline: bool,
) -> Path:
    """Return ``cache_root/<raw_folder>`` holding the card's raw files, verified.

    ``download(tmp_dir)`` must put the raw folder under ``tmp_dir``; it is only called when
    neither ``data_root`` nor the cache has the folder and ``offline`` is false.
    """
    source = card["source"]
    folder, files = source["raw_folder"], source["files"]
    cached = cache_root / folder
    if data_root is not None and (data_root / folder).is_dir():
        _mirror(card, data_root / folder, cached)
    elif _complete(cached, files):
        _verify_cache(card, cached)
    elif offline:
        raise DatasetNotFoundError(_not_found(card, data_root, cache_root, "Offline mode is on."))
    else:
        _download(card, download, data_root, cache_root)
    return cached


def _mirror(card: dict, src: Path, dst: Path) -> None:
    """Verify every card file in ``src``, then place it in ``dst`` unless an equal copy is there."""
    source = card["source"]
    missing = [name for name in source["files"] if not (src / name).is_file()]
    if missing:
        raise DatasetNotFoundError(
            f"Dataset {card['name']!r}: {src} exists but lacks {missing}. Restore the folder "
            f"from {source['url']} (DGL's canonical download) or remove it to use the cache."
        )
    dst.mkdir(parents=True, exist_ok=True)
    stamp = _read_stamp(dst)
    before = dict(stamp)
    replaced = False
    for name, expected in source["files"].items():
        actual = sha256_file(src / name)
        _check(card, src / name, expected, actual, f"replace it with the file from {source['url']}")
        target = dst / name
        if target.is_file() and _known_sha(target, stamp) == actual:
            continue
        replaced = replaced or target.exists()
        _place(src / name, target)
        _record(card, stamp, target, actual)
    if replaced:
        _drop_derived(dst, source["files"])
    if stamp != before:
        _write_stamp(dst, stamp)


def _verify_cache(card: dict, folder: Path) -> None:
    """Check the cache copy against the card, hashing only files the stamp does not vouch for."""
    stamp = _read_stamp(folder)
    before = dict(stamp)
    fix = f"delete {folder} and load again to re-mirror or re-download it"
    for name, expected in card["source"]["files"].items():
        _check(card, folder / name, expected, _known_sha(folder / name, stamp), fix)
    if stamp != before:
        _write_stamp(folder, stamp)


def _download(card: dict, download, data_root: Path | None, cache_root: Path) -> None:
    """Download into a scratch folder, verify, then move the raw folder into the cache."""
    source = card["source"]
    cache_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=cache_root))
    try:
        try:
            download(scratch)
        except Exception as exc:
            reason = f"Downloading {source['url']} failed: {type(exc).__name__}: {exc}."
            raise DatasetNotFoundError(_not_found(card, data_root, cache_root, reason)) from exc
        got = scratch / source["raw_folder"]
        missing = [name for name in source["files"] if not (got / name).is_file()]
        if missing:
            raise DatasetError(
                f"Dataset {card['name']!r}: the download from {source['url']} lacks {missing}; "
                f"the card {card_path(card['name'])} may be out of date."
            )
        stamp: dict = {}
        for name, expected in source["files"].items():
            actual = sha256_file(got / name)
            fix = "retry; if it persists, the server copy changed"
            _check(card, got / name, expected, actual, fix)
            _record(card, stamp, got / name, actual)
        _write_stamp(got, stamp)
        target = cache_root / source["raw_folder"]
        if target.exists():  # an incomplete leftover
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(got, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _not_found(card: dict, data_root: Path | None, cache_root: Path, reason: str) -> str:
    """Say where the raw folder was expected and where to get it."""
    source = card["source"]
    folder = source["raw_folder"]
    cached = cache_root / folder
    env = os.environ.get("ZOO_DATA") or "unset"
    if data_root is None:
        where = f"data_root is not given and ZOO_DATA is unset, and the cache {cached} lacks it."
    else:
        where = f"Looked in {data_root / folder} (ZOO_DATA: {env}) and in the cache {cached}."
    return (
        f"Dataset {card['name']!r}: raw folder {folder!r} not found. {where} {reason} "
        f"Fix: fetch {source['url']} (unpack it if it is an archive) into "
        f"$ZOO_DATA/{folder}/, or load with network access (offline=False, ZOO_OFFLINE unset) "
        "to fill the cache."
    )


def _check(card: dict, path: Path, expected: str | None, actual: str, fix: str) -> None:
    """Raise ChecksumMismatchError if a known expected hash differs from ``actual``."""
    if expected is not None and expected != actual:
        raise ChecksumMismatchError(
            f"Dataset {card['name']!r}: checksum mismatch for {path}: expected sha256 "
            f"{expected} (from {card_path(card['name'])}), got {actual}. The file is corrupt or "
            f"not the published one; {fix}."
        )


def _complete(folder: Path, files: dict) -> bool:
    """True if ``folder`` holds every file the card lists."""
    return folder.is_dir() and all((folder / name).is_file() for name in files)


def _known_sha(path: Path, stamp: dict) -> str:
    """The file's sha256: from the stamp if size and mtime match, else hashed and stamped."""
    stat = path.stat()
    entry = stamp.get(path.name)
    if entry and entry["size"] == stat.st_size and entry["mtime_ns"] == stat.st_mtime_ns:
        return entry["sha256"]
    sha = sha256_file(path)
    stamp[path.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha}
    return sha


def _record(card: dict, stamp: dict, path: Path, sha: str) -> None:
    """Stamp a freshly placed file; warn when the card cannot pin its hash."""
    stat = path.stat()
    stamp[path.name] = {"size": stat.st_size, "mtime_ns": stat.st_mtime_ns, "sha256": sha}
    if card["source"]["files"][path.name] is None:
        warnings.warn(
            f"Dataset {card['name']!r}: {card_path(card['name'])} has no sha256 for "
            f"{path.name}, so it was not verified; its sha256 is {sha}. Pin it in the card."
        )


def _place(src: Path, dst: Path) -> None:
    """Hard-link (else copy) ``src`` to ``dst`` atomically, never writing through ``dst``."""
    tmp = dst.with_name(f".{dst.name}.{uuid.uuid4().hex}.tmp")
    try:
        os.link(src, tmp)
    except OSError:
        shutil.copy2(src, tmp)
    os.replace(tmp, dst)


def _drop_derived(folder: Path, files: dict) -> None:
    """Delete files DGL derived from older raw files (its processed caches)."""
    for path in folder.iterdir():
        if path.is_file() and path.name not in files and not path.name.startswith("."):
            path.unlink()


def _read_stamp(folder: Path) -> dict:
    """The folder's stamp, or {} when absent or unreadable."""
    try:
        return json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        return {}


def _write_stamp(folder: Path, stamp: dict) -> None:
    """Write the stamp atomically."""
    tmp = folder / f"{STAMP}.{uuid.uuid4().hex}.tmp"
    tmp.write_text(json.dumps(stamp, indent=1, sort_keys=True))
    os.replace(tmp, folder / STAMP)
