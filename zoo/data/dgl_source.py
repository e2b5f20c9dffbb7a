"""Cards whose raw files a DGL dataset class reads: import the class, check that DGL reads the
folder (and URL) the card names, and have the folder mirrored, verified or downloaded."""
from __future__ import annotations

import importlib
import os
from pathlib import Path

import dgl

from zoo.data.cards import DatasetError, card_path
from zoo.data.mirror import ensure_raw_folder


def dgl_class(card: dict) -> type:
    """Import the class named by ``source.dgl_class`` (e.g. ``dgl.data.CoraGraphDataset``)."""
    dotted = card["source"]["dgl_class"]
    module, _, attr = dotted.rpartition(".")
    try:
        return getattr(importlib.import_module(module), attr)
    except (ImportError, AttributeError, ValueError) as exc:
        raise DatasetError(
            f"{card_path(card['name'])}: source.dgl_class {dotted!r} cannot be imported "
            f"with dgl {dgl.__version__} ({exc})."
        ) from None


def _stub(cls: type, raw_dir: Path):
    """An instance of ``cls`` that skips loading: DGL's own url, raw_path and download()."""
    stub_cls = type(cls.__name__, (cls,), {"_load": lambda self: None})
    return stub_cls(raw_dir=str(raw_dir), verbose=False)


def ensure_dgl_raw_folder(card: dict, cls: type, *, data_root: Path | None, cache_root: Path, offline: bool) -> Path:
    """Fail unless DGL reads the card's raw folder and URL, then mirror / verify / download it
    into ``cache_root`` (see :func:`zoo.data.mirror.ensure_raw_folder`); ``cache_root`` is the
    ``raw_dir`` to give the DGL class."""
    source = card["source"]
    stub = _stub(cls, cache_root)
    folder = Path(stub.raw_path).name
    url_matches = stub.url.strip() == source.get("url", stub.url).strip()
    if not (url_matches and folder == source["raw_folder"]):
        repo = os.environ.get("DGL_REPO")
        cause = (
            f"DGL_REPO is set to {repo!r}, which changes DGL's URL and folder name; unset it."
            if repo
            else f"The card does not match dgl {dgl.__version__}; update source.url and raw_folder."
        )
        raise DatasetError(
            f"Dataset {card['name']!r}: DGL would read {folder!r} from {stub.url}, but the card "
            f"{card_path(card['name'])} names {source['raw_folder']!r} from {source.get('url')}. {cause}"
        )
    return ensure_raw_folder(card, lambda scratch: _stub(cls, scratch).download(),
                             data_root=data_root, cache_root=cache_root, offline=offline)
