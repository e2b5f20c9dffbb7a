"""Graph-property datasets from their cards: the card's ``source.kind`` picks the source.

``dgl`` (:mod:`zoo.data.dgl_source`), ``ogb`` (:mod:`zoo.data.ogb_source`), ``csv``
(:mod:`zoo.data.csv_source`) or ``dgllife`` (:mod:`zoo.data.dgllife_source`). A card may name a
second source under ``fallback`` (with its own ``split``), used when the first is not available
offline. Raw files come from ``$ZOO_DATA`` (never written to), else the cache ``$ZOO_CACHE``, else
a download unless ``$ZOO_OFFLINE`` (see :mod:`zoo.data.mirror`).

>>> data = load_graph_dataset("zinc_smiles", limit=200, pe={"rwse_k": 16})
>>> data.task, data.num_tasks
('graph_regression', 1)
"""
from __future__ import annotations

import warnings
from pathlib import Path

from zoo.data.cards import DatasetError, DatasetNotFoundError, card_path, load_card
from zoo.data.csv_source import CSV_KINDS, load_csv_card
from zoo.data.dgl_source import load_dgl_graphs
from zoo.data.featurizers import Featurizer, featurizer_from_spec
from zoo.data.graph_data import GRAPH_TASKS, GraphData
from zoo.data.mirror import resolve_roots
from zoo.data.ogb_source import load_ogb

SOURCES = {"dgl": load_dgl_graphs, "ogb": load_ogb, "csv": load_csv_card, "dgllife": load_csv_card}
"""``source.kind`` -> loader ``(card, roots, *, limit, seed, progress, featurizer) -> GraphData``;
only the kinds of ``CSV_KINDS`` featurize SMILES, the others come featurized."""


def load_graph_dataset(
    name: str,
    *,
    data_root: str | Path | None = None,
    cache_root: str | Path | None = None,
    offline: bool | None = None,
    limit: int | None = None,
    source: str = "auto",
    seed: int = 0,
    pe=None,
    progress: bool = True,
    featurizer: Featurizer | dict | str | None = None,
) -> GraphData:
    """Load the graph dataset of card ``name`` (any card whose task is graph-level).

    ``limit`` keeps only the first ``limit`` molecules of the source (split indices are
    filtered to them): for quick tests. ``source`` is ``"auto"`` (the card's source, else its
    ``fallback`` with a warning when the source is not available) or a kind the card offers
    (molhiv: ``"ogb"`` or ``"csv"``). ``seed`` draws the split of cards with a random split
    protocol. ``pe`` (e.g. ``{"lap_k": 8, "rwse_k": 16}``) attaches positional encodings,
    cached on disk. ``featurizer`` (a featurizer, spec or name, e.g. ``"dgllife-canonical"``)
    featurizes the SMILES of a ``csv`` or ``dgllife`` source; default: the card's ``featurizer``.
    Another featurizer than the card's picks the card's first such source (molhiv: its csv
    fallback); a card without one refuses it, since ``dgl`` and ``ogb`` sources come featurized.

    >>> data = load_graph_dataset("molhiv", limit=500, pe={"rwse_k": 16})  # ZOO_DATA or a download
    >>> from zoo.data import make_dataloaders
    >>> sorted(make_dataloaders(data, batch_size=32))
    ['test', 'train', 'val']
    """
    card = load_card(name)
    if card["task"] not in GRAPH_TASKS:
        raise DatasetError(
            f"Card {card['name']!r} is a {card['task']!r} dataset; load_graph_dataset loads "
            f"{' / '.join(GRAPH_TASKS)} cards (load_node_dataset loads node cards)."
        )
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 2):
        raise ValueError(f"limit must be None or an int >= 2, got {limit!r}")
    primary, fallback = card["source"], card.get("fallback")
    kinds = [primary["kind"], *([fallback["kind"]] if fallback else [])]
    if source not in ("auto", *kinds):
        raise ValueError(f"source={source!r}: card {card['name']!r} offers 'auto' or {' or '.join(map(repr, kinds))}")
    chosen = featurizer_from_spec(card["featurizer"] if featurizer is None else featurizer)
    if chosen.name != card["featurizer"]:  # only a source of SMILES can be featurized another way
        featurizing = [kind for kind in kinds if kind in CSV_KINDS and source in ("auto", kind)]
        if not featurizing:
            asked = [kind for kind in kinds if source in ("auto", kind)]
            raise DatasetError(f"Dataset {card['name']!r}: its {' / '.join(asked)} source comes featurized as "
                               f"{card['featurizer']!r}; only a csv or dgllife source can be featurized with "
                               f"{chosen.name!r}. Use the card's featurizer, or a card of SMILES.")
        source = featurizing[0]
    roots = resolve_roots(data_root, cache_root, offline)
    options = {"limit": limit, "seed": seed, "progress": progress, "featurizer": chosen}
    if source == primary["kind"] or not fallback:
        data = SOURCES[primary["kind"]](card, roots, **options)
    elif source == "auto":
        try:
            data = SOURCES[primary["kind"]](card, roots, **options)
        except DatasetNotFoundError as exc:
            warnings.warn(
                f"{card['name']}: using its fallback source ({fallback['kind']} {fallback.get('raw_folder', '')}, "
                f"{fallback['split']['split_source']}), not its {primary['kind']} source. {exc} Pass "
                f"source={fallback['kind']!r} to silence this, or provide the {primary['kind']} files.",
                stacklevel=2,
            )
            data = _load_fallback(card, roots, options)
    else:
        data = _load_fallback(card, roots, options)
    if data.num_tasks != card["num_tasks"]:
        raise DatasetError(f"Dataset {card['name']!r}: the source gives {data.num_tasks} target column(s), "
                           f"the card {card_path(card['name'])} says num_tasks: {card['num_tasks']}.")
    data.card, data.cache_root = card, roots.cache
    if pe:
        data.add_positional_encodings(pe, progress=progress)
    return data


def _load_fallback(card: dict, roots, options: dict) -> GraphData:
    """Load the card's ``fallback`` source with the fallback's own split."""
    fallback = dict(card["fallback"])
    view = {**card, "source": fallback, "split": fallback.pop("split")}
    return SOURCES[fallback["kind"]](view, roots, **options)
