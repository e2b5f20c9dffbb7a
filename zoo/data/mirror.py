"""Offline-first raw files: find a card's raw folder, copy it into the cache, verify it on every load.

Order: ``$ZOO_DATA/<raw_folder>`` (read-only: its files are copied into the cache, never linked,
so nothing written to the cache can reach it), else the cache ``$ZOO_CACHE/<raw_folder>``, else a
verified download (unless offline) from the card's URL(s), else :class:`DatasetNotFoundError`.
On every load each raw file of the cache, the copy the dataset classes read, is hashed and
compared with the card's sha256, or, where the card has none, with the sha256 the zoo recorded
when it placed the file.

Each cache folder holds the zoo's record ``.zoo-verified.json``: ``raw`` (file -> sha256 when
placed) and ``processed`` (file a dataset class wrote there -> sha256 after it wrote it).
:func:`guard_derived` deletes a processed file that does not match the record before the dataset
class can read it, so DGL or OGB rebuild it from the verified raw files.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
import warnings
from contextlib import contextmanager
from pathlib import Path
from typing import Iterable, NamedTuple
from urllib.parse import urlsplit

from zoo._atomic import atomic_write
from zoo.data.cards import ChecksumMismatchError, DatasetError, DatasetNotFoundError, card_path
from zoo.data.remote import DownloadError, download, offline_from_env, unzip

STAMP = ".zoo-verified.json"


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
        offline = offline_from_env()
    data_root = Path(data_root).expanduser() if data_root is not None else None
    return Roots(data_root, Path(cache_root).expanduser(), bool(offline))


def sha256_file(path: Path) -> str:
    """Hex sha256 of a file."""
    return _digest_file(path, "sha256")


def ensure_raw_folder(card: dict, *, data_root: Path | None, cache_root: Path, offline: bool) -> Path:
    """Return ``cache_root/<raw_folder>`` holding the card's raw files, each one verified now."""
    source = card["source"]
    folder, files = source["raw_folder"], source["files"]
    cached = cache_root / folder
    if data_root is not None and (data_root / folder).is_dir():
        missing = [name for name in files if not (data_root / folder / name).is_file()]
        if missing:
            raise DatasetNotFoundError(
                f"Dataset {card['name']!r}: {data_root / folder} exists but lacks {missing}. Restore the "
                f"folder from {source['url']} or remove it to use the cache."
            )
        mirror_files(card, data_root / folder, cached, files)
    elif cached.is_dir() and all((cached / name).is_file() for name in files):
        _verify_cache(card, cached)
    elif offline:
        raise DatasetNotFoundError(_not_found(card, data_root, cache_root, "Offline mode is on."))
    else:
        _download(card, data_root, cache_root)
    return cached


def mirror_files(card: dict, src: Path, dst: Path, pins: dict, *, warn_unpinned: bool = True) -> dict:
    """Give ``dst`` a verified private copy of each file of ``pins`` (relative path -> sha256, or
    None: the file in ``src`` is the reference) and return the record ``{path: sha256}``.

    A copy already in ``dst`` is kept when it hashes right and is a file of its own (no symlink,
    no hard link); otherwise it is replaced, with a warning, and the processed caches built from
    it are deleted.
    """
    dst.mkdir(parents=True, exist_ok=True)
    stamp = read_stamp(dst)
    raw, replaced = {}, []
    for name, pinned in pins.items():
        target = dst / name
        reference = pinned or sha256_file(src / name)
        if _own_file(target) and sha256_file(target) == reference:
            raw[name] = reference
            continue
        if target.exists() or target.is_symlink():
            replaced.append(name)
        raw[name] = _copy(card, src / name, target, pinned, warn_unpinned)
    if replaced:
        warnings.warn(f"Dataset {card['name']!r}: the cache copies of {', '.join(replaced)} in {dst} were changed "
                      f"or linked to other files; replaced them with verified copies from {src} and deleted the "
                      "processed caches built from them.", stacklevel=3)
        for path in _derived(dst, pins):
            path.unlink()
        stamp["processed"] = {}
    if stamp["raw"] != raw or replaced:
        stamp["raw"] = raw
        write_stamp(dst, stamp)
    return raw


@contextmanager
def guard_derived(folder: Path, raw: Iterable[str]):
    """Run a dataset class that reads and writes processed caches in ``folder`` (``raw``: the raw
    files' paths in it): first delete, with a one-line warning each, the files besides ``raw``
    whose sha256 differs from the one the zoo recorded when they were written (or that have no
    record), so the class never reads them; afterwards record the files it left."""
    raw = set(raw)
    recorded, checked = read_stamp(folder)["processed"], {}
    for path in _derived(folder, raw):
        rel = path.relative_to(folder).as_posix()
        sha = None if path.is_symlink() else sha256_file(path)
        if sha is None or recorded.get(rel) != sha:
            why = "differs from the sha256 the zoo recorded" if rel in recorded else "has no record of the zoo writing it"
            warnings.warn(f"Processed cache {path} {why}; deleted it unread, so it is rebuilt from the verified "
                          "raw files.", stacklevel=3)
            path.unlink()
        else:
            checked[rel] = (_identity(path), sha)
    yield
    stamp = read_stamp(folder)
    stamp["processed"] = {}
    for path in _derived(folder, raw):  # a file the class left as it was checked is not hashed again
        rel = path.relative_to(folder).as_posix()
        identity, sha = checked.get(rel, (None, None))
        stamp["processed"][rel] = sha if identity == _identity(path) else sha256_file(path)
    write_stamp(folder, stamp)


def read_stamp(folder: Path) -> dict:
    """The folder's record ``{"raw": {...}, "processed": {...}}`` (empty parts when absent or unreadable)."""
    try:
        stamp = json.loads((folder / STAMP).read_text())
    except (OSError, ValueError):
        stamp = {}
    stamp = stamp if isinstance(stamp, dict) else {}
    return {part: _hashes(stamp.get(part)) for part in ("raw", "processed")}


def write_stamp(folder: Path, stamp: dict) -> None:
    """Write the record atomically."""
    text = json.dumps(stamp, indent=1, sort_keys=True).encode()
    atomic_write(folder / STAMP, lambda handle: handle.write(text))


def check_sha(card: dict, path: Path, expected: str | None, actual: str, fix: str, origin=None) -> None:
    """Raise ChecksumMismatchError if a known expected hash differs from ``actual``."""
    if expected is not None and expected != actual:
        raise ChecksumMismatchError(
            f"Dataset {card['name']!r}: checksum mismatch for {path}: expected sha256 {expected} (from "
            f"{origin or card_path(card['name'])}), got {actual}. The file is corrupt or not the published "
            f"one; {fix}."
        )


def warn_unpinned(card: dict, name: str, sha: str) -> None:
    """Warn that a file the card cannot pin was taken on trust, and give its sha256 to pin."""
    warnings.warn(f"Dataset {card['name']!r}: {card_path(card['name'])} has no sha256 for {name}, so it was not "
                  f"verified; its sha256 is {sha}. Pin it in the card.", stacklevel=4)


def _verify_cache(card: dict, folder: Path) -> None:
    """Hash every raw file of the cache copy against the card, else against the zoo's record."""
    recorded = read_stamp(folder)["raw"]
    fix = f"delete {folder} and load again to re-mirror or re-download it"
    for name, pinned in card["source"]["files"].items():
        path, expected = folder / name, pinned or recorded.get(name)
        if expected is None:
            raise DatasetError(
                f"Dataset {card['name']!r}: {path} has no sha256 in {card_path(card['name'])} and no record of "
                f"the zoo placing it, so it cannot be verified; {fix} (or pin its sha256 in the card)."
            )
        check_sha(card, path, expected, sha256_file(path), fix, origin=None if pinned else folder / STAMP)


def _download(card: dict, data_root: Path | None, cache_root: Path) -> None:
    """Download into a scratch folder, verify every file, then move the raw folder into the cache."""
    source = card["source"]
    cache_root.mkdir(parents=True, exist_ok=True)
    scratch = Path(tempfile.mkdtemp(prefix=".download-", dir=cache_root))
    try:
        got = scratch / source["raw_folder"]
        try:
            _fetch(source, got)
        except DownloadError as exc:
            raise DatasetNotFoundError(_not_found(card, data_root, cache_root, str(exc))) from exc
        missing = [name for name in source["files"] if not (got / name).is_file()]
        if missing:
            raise DatasetError(
                f"Dataset {card['name']!r}: the download from {source['url']} lacks {missing}; "
                f"the card {card_path(card['name'])} may be out of date."
            )
        raw, md5s = {}, source.get("md5") or {}
        fix = "retry; if it persists, the server's copy changed"
        for name, pinned in source["files"].items():
            raw[name] = sha256_file(got / name)
            check_sha(card, got / name, pinned, raw[name], fix)
            if name in md5s and _digest_file(got / name, "md5") != md5s[name]:
                raise ChecksumMismatchError(
                    f"Dataset {card['name']!r}: checksum mismatch for {source.get('file_urls', {}).get(name, source['url'])}: "
                    f"its md5 is not the published {md5s[name]} (from {card_path(card['name'])}); {fix}."
                )
            if pinned is None and name not in md5s:
                warn_unpinned(card, name, raw[name])
        write_stamp(got, {"raw": raw, "processed": {}})
        target = cache_root / source["raw_folder"]
        if target.exists():  # an incomplete leftover
            shutil.rmtree(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(got, target)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _fetch(source: dict, folder: Path) -> None:
    """Download a source's files into ``folder``: each from ``file_urls``, else the files of the
    zip at ``url`` (``archive: zip``), else the one file at ``url``."""
    folder.mkdir(parents=True, exist_ok=True)
    files = source["files"]
    if "file_urls" in source:
        for name, url in source["file_urls"].items():
            download(url, folder / name, files[name], offline=False)
    elif source.get("archive") == "zip":
        archive = folder.parent / (Path(urlsplit(source["url"]).path).name or "archive.zip")
        download(source["url"], archive, source.get("archive_sha256"), offline=False)
        unzip(archive, folder, source["url"], names=list(files))
    else:
        (name,) = files
        download(source["url"], folder / name, files[name], offline=False)


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


def _copy(card: dict, src: Path, target: Path, pinned: str | None, warn: bool) -> str:
    """Copy ``src`` to ``target`` through a temporary file, hashing the bytes copied; the copy
    replaces ``target`` only if it matches ``pinned``. Returns its sha256."""
    digest = hashlib.sha256()

    def write(fout) -> None:  # a mismatch raises here, so atomic_write deletes the copy
        with open(src, "rb") as fin:
            for chunk in iter(lambda: fin.read(1 << 20), b""):
                fout.write(chunk)
                digest.update(chunk)
        check_sha(card, src, pinned, digest.hexdigest(),
                  f"replace it with the published file ({card['source']['url']})")

    atomic_write(target, write)
    actual = digest.hexdigest()
    if pinned is None and warn:
        warn_unpinned(card, src.name, actual)
    return actual


def _own_file(path: Path) -> bool:
    """A regular file that is no symlink and shares its inode with no other path."""
    return path.is_file() and not path.is_symlink() and path.stat().st_nlink == 1


def _identity(path: Path) -> tuple:
    """Inode, size and mtime: whether a file was rewritten between two looks within one load."""
    stat = path.stat()
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _derived(folder: Path, raw) -> list[Path]:
    """Files (and symlinks) under ``folder`` that are not raw files and not the zoo's dot-files."""
    return [path for path in sorted(folder.rglob("*"))
            if (path.is_file() or path.is_symlink()) and not path.name.startswith(".")
            and path.relative_to(folder).as_posix() not in raw]


def _hashes(part) -> dict:
    """A ``{path: sha256}`` mapping from a record part, or {} when it is anything else."""
    ok = isinstance(part, dict) and all(isinstance(k, str) and isinstance(v, str) for k, v in part.items())
    return dict(part) if ok else {}


def _digest_file(path: Path, digest) -> str:
    """Hex digest of a file by :func:`hashlib.file_digest`; ``digest`` is a hashlib name ("sha256", "md5")."""
    with open(path, "rb") as f:
        return hashlib.file_digest(f, digest).hexdigest()
