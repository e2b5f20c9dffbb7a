"""Molecule featurizers: objects that turn SMILES into DGL graphs, chosen by the spec a card stores.

A :class:`Featurizer` has a ``spec`` (plain data: its ``name`` and what fixes its feature layout;
dataset cards name it, recipes may choose it, checkpoint cards store it whole), ``__call__(smiles)
-> DGLGraph`` with ``ndata["feat"]`` and ``edata["feat"]``, the ``kind`` and widths of those
features, and :meth:`Featurizer.model_inputs`, the model arguments its features imply (a trainer
passes them like ``num_outputs``). :func:`featurizer_from_spec` rebuilds one from a stored spec or
a name, and refuses a spec whose layout differs from this installation's.

* ``ogb-smiles2graph`` (:class:`OgbFeaturizer`, the default): OGB's ``smiles2graph`` layout, 9 atom
  and 3 bond categorical features (int64, ``ogb.utils.features``); the shipped checkpoints read it.
* ``dgllife-canonical`` (:class:`DgllifeFeaturizer`): dgllife's ``CanonicalAtomFeaturizer`` (74)
  and ``CanonicalBondFeaturizer`` (12) features (float32 one-hot blocks; formal charge and radical
  electrons as counts), read through a linear encoder.
* ``benchmarking-gnns-zinc-typedict`` (:class:`ZincTypeDict`): describes DGL's ZINC graphs (one
  atom type per node, one bond type per edge); it featurizes no SMILES.

Both SMILES featurizers build the same graph: atoms in RDKit order, each bond as two directed
edges i->j then j->i in RDKit bond order, no self-loops, int64 node ids.

>>> g = featurizer_from_spec("dgllife-canonical")("CCO")
>>> g.num_edges(), tuple(g.ndata["feat"].shape), g.ndata["feat"].dtype
(4, (3, 74), torch.float32)
"""
from __future__ import annotations

import difflib
import math
from abc import ABC, abstractmethod
from importlib.metadata import version
from typing import ClassVar

import dgl
import numpy as np
import ogb
import rdkit
import torch
from ogb.utils.features import (
    atom_to_feature_vector,
    bond_to_feature_vector,
    get_atom_feature_dims,
    get_bond_feature_dims,
)
from rdkit import Chem
from rdkit.rdBase import BlockLogs

from zoo.data.cards import DatasetError

DEFAULT_FEATURIZER = "ogb-smiles2graph"
"""The featurizer of a user's CSV and of the shipped checkpoints."""


class InvalidSmilesError(DatasetError):
    """A SMILES string that RDKit cannot turn into a molecule with at least one atom."""


class Featurizer(ABC):
    """SMILES -> DGL graph with ``ndata["feat"]`` ``[N, atom_width]`` and ``edata["feat"]`` ``[E, bond_width]``.

    ``kind``: ``"categorical"`` (int64 columns, one vocabulary each, read by embeddings),
    ``"float"`` (float32 vectors, read by a linear layer) or ``"types"`` (one int64 type per node/edge).
    ``must_match``: the spec fields that fix the layout (other fields, e.g. versions, inform only).
    """

    name: ClassVar[str]
    kind: ClassVar[str]
    must_match: ClassVar[tuple[str, ...]]
    featurizes_smiles: ClassVar[bool] = True

    @property
    @abstractmethod
    def spec(self) -> dict:
        """What cards record: ``name``, the layout fields of ``must_match``, library versions."""

    @abstractmethod
    def mol_to_graph(self, mol: Chem.Mol) -> dgl.DGLGraph:
        """The graph of an RDKit molecule."""

    def model_inputs(self) -> dict:
        """Model arguments these features imply (none: a model's defaults read OGB's layout)."""
        return {}

    def __call__(self, smiles: str) -> dgl.DGLGraph:
        """Featurize one SMILES; raise :class:`InvalidSmilesError` with the reason if invalid."""
        mol, problem = parse_smiles(smiles)
        if problem:
            raise InvalidSmilesError(f"Cannot featurize SMILES {smiles!r}: {problem}.")
        return self.mol_to_graph(mol)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


class OgbFeaturizer(Featurizer):
    """OGB's ``smiles2graph``: ``feat`` int64 ``[N, 9]`` atoms, ``[E, 3]`` bonds (``ogb.utils.features``)."""

    name = "ogb-smiles2graph"
    kind = "categorical"
    must_match = ("name", "atom_feature_dims", "bond_feature_dims")
    atom_width, bond_width = len(get_atom_feature_dims()), len(get_bond_feature_dims())

    @property
    def spec(self) -> dict:
        return {"name": self.name, "ogb_version": ogb.__version__, "rdkit_version": rdkit.__version__,
                "atom_feature_dims": list(get_atom_feature_dims()), "bond_feature_dims": list(get_bond_feature_dims())}

    def mol_to_graph(self, mol: Chem.Mol) -> dgl.DGLGraph:
        x = np.array([atom_to_feature_vector(atom) for atom in mol.GetAtoms()], dtype=np.int64)
        x = x.reshape(-1, self.atom_width)
        bonds = mol.GetBonds()
        src = np.empty(2 * len(bonds), dtype=np.int64)
        dst = np.empty(2 * len(bonds), dtype=np.int64)
        efeat = np.empty((2 * len(bonds), self.bond_width), dtype=np.int64)
        for k, bond in enumerate(bonds):
            i, j = bond.GetBeginAtomIdx(), bond.GetEndAtomIdx()
            src[2 * k], dst[2 * k], src[2 * k + 1], dst[2 * k + 1] = i, j, j, i
            efeat[2 * k] = efeat[2 * k + 1] = bond_to_feature_vector(bond)
        g = dgl.graph((torch.from_numpy(src), torch.from_numpy(dst)), num_nodes=len(x))
        g.ndata["feat"] = torch.from_numpy(x)
        g.edata["feat"] = torch.from_numpy(efeat)
        return g


class DgllifeFeaturizer(Featurizer):
    """dgllife's ``CanonicalAtomFeaturizer`` + ``CanonicalBondFeaturizer`` on ``mol_to_bigraph``
    (``canonical_atom_order=False``, no self-loops): ``feat`` float32 ``[N, 74]``, ``[E, 12]``.

    A molecule without bonds gets ``edata["feat"]`` of shape ``[0, 12]`` (dgllife leaves it out),
    so that every graph batches with every other.
    """

    name = "dgllife-canonical"
    kind = "float"
    must_match = ("name", "atom_featurizer", "bond_featurizer", "atom_features", "bond_features")

    def __init__(self):
        from dgllife.utils import CanonicalAtomFeaturizer, CanonicalBondFeaturizer  # noqa: PLC0415 (1.4 s import)

        self._atoms = CanonicalAtomFeaturizer(atom_data_field="feat")
        self._bonds = CanonicalBondFeaturizer(bond_data_field="feat", self_loop=False)
        self.atom_width, self.bond_width = self._atoms.feat_size("feat"), self._bonds.feat_size("feat")

    @property
    def spec(self) -> dict:
        return {"name": self.name, "dgllife_version": version("dgllife"), "rdkit_version": rdkit.__version__,
                "atom_featurizer": "CanonicalAtomFeaturizer", "bond_featurizer": "CanonicalBondFeaturizer",
                "atom_features": self.atom_width, "bond_features": self.bond_width}

    def model_inputs(self) -> dict:
        return {"atom_features": self.atom_width, "bond_features": self.bond_width}

    def mol_to_graph(self, mol: Chem.Mol) -> dgl.DGLGraph:
        from dgllife.utils import mol_to_bigraph  # noqa: PLC0415 (imported by __init__ already)

        g = mol_to_bigraph(mol, node_featurizer=self._atoms, edge_featurizer=self._bonds,
                           canonical_atom_order=False).long()
        if "feat" not in g.edata:
            g.edata["feat"] = torch.zeros(0, self.bond_width)
        return g


class ZincTypeDict(Featurizer):
    """DGL's ZINC graphs (benchmarking-gnns): ``feat`` int64 ``[N]`` of 28 atom types, ``[E]`` of 4
    bond types; the model reads them with ``atom_types`` / ``bond_types`` type dictionaries."""

    name = "benchmarking-gnns-zinc-typedict"
    kind = "types"
    must_match = ("name", "atom_types", "bond_types")
    featurizes_smiles = False

    @property
    def spec(self) -> dict:
        return {"name": self.name, "atom_types": 28, "bond_types": 4}

    def mol_to_graph(self, mol: Chem.Mol) -> dgl.DGLGraph:
        raise DatasetError(f"featurizer {self.name!r} describes DGL's ZINC graphs and featurizes no SMILES; "
                           f"use one of {', '.join(smiles_featurizers())}.")


FEATURIZERS: dict[str, type[Featurizer]] = {cls.name: cls for cls in (OgbFeaturizer, DgllifeFeaturizer, ZincTypeDict)}
"""Every featurizer a card, recipe or checkpoint may name."""


def smiles_featurizers() -> list[str]:
    """Names of the featurizers that read SMILES (what a CSV or a recipe may choose)."""
    return [name for name, cls in FEATURIZERS.items() if cls.featurizes_smiles]


def featurizer_from_spec(spec: dict | str | Featurizer, where: str | None = None) -> Featurizer:
    """The featurizer a stored spec (or its name) names, built here.

    Raises :class:`DatasetError` (prefixed with ``where``, e.g. a card's path) if the name is
    unknown, or if a stored spec's layout fields (``must_match``) differ from this installation's
    or are missing, since weights trained on one layout cannot read another; other fields
    (library versions) may differ.

    >>> featurizer_from_spec({**FEATURIZER_SPEC, "ogb_version": "0.0"}).kind  # another OGB release, same layout
    'categorical'
    >>> featurizer_from_spec({"name": "ogb-smiles2graph"})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    zoo.data.cards.DatasetError: Featurizer mismatch, ...: atom_feature_dims: stored None, current [119, ...
    """
    if isinstance(spec, Featurizer):
        return spec
    prefix = f"{where}: " if where else ""
    name = spec.get("name") if isinstance(spec, dict) else spec
    if name not in FEATURIZERS:
        near = difflib.get_close_matches(str(name), FEATURIZERS, n=1)
        hint = f" Did you mean {near[0]!r}?" if near else ""
        raise DatasetError(f"{prefix}featurizer {name!r} is not one of {', '.join(FEATURIZERS)}.{hint}")
    featurizer = FEATURIZERS[name]()
    if isinstance(spec, dict):
        current = featurizer.spec
        diff = [f"{key}: stored {spec.get(key)!r}, current {current[key]!r}"
                for key in featurizer.must_match if spec.get(key) != current[key]]
        if diff:
            raise DatasetError(f"{prefix}Featurizer mismatch, so weights trained on one layout cannot read the "
                               f"other: {'; '.join(diff)}. Featurize the data with the checkpoint's featurizer.")
    return featurizer


FEATURIZER_SPEC = OgbFeaturizer().spec
"""The default featurizer's spec (what the shipped checkpoints record)."""


def smiles_to_graph(smiles: str) -> dgl.DGLGraph:
    """Featurize one SMILES with the default featurizer (OGB's ``smiles2graph`` layout).

    >>> g = smiles_to_graph("CCO")
    >>> g.num_nodes(), g.num_edges(), tuple(g.ndata["feat"].shape), tuple(g.edata["feat"].shape)
    (3, 4, (3, 9), (4, 3))
    """
    return OgbFeaturizer()(smiles)


def smiles_problem(smiles) -> str | None:
    """Why ``smiles`` cannot be featurized (a short reason), or None if it can.

    >>> smiles_problem("C1CC"), smiles_problem("")
    ('RDKit parse failure: syntax error (e.g. unclosed ring or bad token)', 'empty SMILES')
    """
    return parse_smiles(smiles)[1]


def parse_smiles(smiles) -> tuple[Chem.Mol | None, str | None]:
    """RDKit molecule (parsed as OGB does: ``Chem.MolFromSmiles``) or the reason it cannot be featurized."""
    if smiles is None or (isinstance(smiles, float) and math.isnan(smiles)):
        return None, "empty SMILES"
    if not isinstance(smiles, str):
        return None, f"not a string ({type(smiles).__name__})"
    if not smiles.strip():
        return None, "empty SMILES"
    with BlockLogs():
        mol = Chem.MolFromSmiles(smiles)
        if mol is None:
            return None, _parse_failure(smiles)
    if mol.GetNumAtoms() == 0:
        return None, "zero atoms after parsing"
    return mol, None


def _parse_failure(smiles: str) -> str:
    """RDKit's reason for rejecting ``smiles``: syntax, or the sanitization message."""
    raw = Chem.MolFromSmiles(smiles, sanitize=False)
    if raw is None:
        return "RDKit parse failure: syntax error (e.g. unclosed ring or bad token)"
    try:
        Chem.SanitizeMol(raw)
    except Exception as exc:  # RDKit raises several sanitization exception types
        return f"RDKit parse failure: {str(exc).strip() or type(exc).__name__}"
    return "RDKit parse failure"
