"""Input encoders: OGB atom/bond features, float feature vectors, type dictionaries, and the
node-feature combiner.

* :class:`AtomEncoder` / :class:`BondEncoder`: OGB's encoders (``ogb.graphproppred.mol_encoder``,
  one embedding per categorical feature, summed) on the ``ogb.utils.smiles2graph`` spec of 9 atom
  and 3 bond features, with a shape check.
* :class:`LinearFeatureEncoder`: a linear layer on float feature vectors, e.g. dgllife's
  ``CanonicalAtomFeaturizer`` (74) and ``CanonicalBondFeaturizer`` (12) features.
* :class:`TypeDictEncoder`: one embedding per canonical type (ZINC atom or bond types).
* :class:`NodeFeatureEncoder`: atom embedding of ``dim - dim_pe`` concatenated with the LapPE
  and/or RWSE embeddings (GraphGPS's layout), ``dim`` in total.
"""
from __future__ import annotations

import torch
from ogb.graphproppred import mol_encoder
from ogb.utils.features import get_atom_feature_dims, get_bond_feature_dims
from torch import nn

from zoo.nn.positional_encoders import LapPEDeepSet, RWSEEncoder, SignNetLapPE


def _check_categorical(x: torch.Tensor, width: int, what: str) -> None:
    if x.dim() != 2 or x.shape[1] != width:
        raise ValueError(f"{what} features must have shape [*, {width}] (ogb smiles2graph spec), got {tuple(x.shape)}")


class AtomEncoder(mol_encoder.AtomEncoder):
    """OGB atom encoder: ``x`` ``[N, 9]`` long (``smiles2graph`` ``node_feat``) -> ``[N, dim]``.

    >>> AtomEncoder(16)(torch.zeros(3, 9, dtype=torch.long)).shape
    torch.Size([3, 16])
    """

    num_features = len(get_atom_feature_dims())

    def __init__(self, dim: int):
        super().__init__(dim)
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        _check_categorical(x, self.num_features, "atom")
        return super().forward(x)


class BondEncoder(mol_encoder.BondEncoder):
    """OGB bond encoder: ``e`` ``[E, 3]`` long (``smiles2graph`` ``edge_feat``) -> ``[E, dim]``.

    >>> BondEncoder(16)(torch.zeros(4, 3, dtype=torch.long)).shape
    torch.Size([4, 16])
    """

    num_features = len(get_bond_feature_dims())

    def __init__(self, dim: int):
        super().__init__(dim)
        self.dim = dim

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        _check_categorical(e, self.num_features, "bond")
        return super().forward(e)


class LinearFeatureEncoder(nn.Linear):
    """Float feature vectors ``x`` ``[N, in_features]`` (e.g. dgllife's atom or bond
    features) -> ``[N, dim]`` by one linear layer with bias; other shapes or integer features (an
    OGB or type-index layout) are a ``ValueError`` naming both.

    >>> LinearFeatureEncoder(74, 16)(torch.zeros(3, 74)).shape
    torch.Size([3, 16])
    """

    def __init__(self, in_features: int, dim: int):
        if in_features < 1 or dim < 1:
            raise ValueError(f"in_features and dim must be >= 1, got in_features={in_features}, dim={dim}")
        super().__init__(in_features, dim)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() != 2 or x.shape[1] != self.in_features or not x.is_floating_point():
            raise ValueError(f"features must be float [*, {self.in_features}] (the featurizer the model was built "
                             f"for), got {x.dtype} {tuple(x.shape)}")
        return super().forward(x.to(self.weight.dtype))


class TypeDictEncoder(nn.Module):
    """Embedding of one categorical type per node or edge: ``types`` ``[N]`` or ``[N, 1]`` long -> ``[N, dim]``.

    >>> TypeDictEncoder(28, 16)(torch.tensor([0, 5, 27])).shape
    torch.Size([3, 16])
    """

    def __init__(self, num_types: int, dim: int):
        super().__init__()
        if num_types < 1 or dim < 1:
            raise ValueError(f"num_types and dim must be >= 1, got num_types={num_types}, dim={dim}")
        self.num_types = num_types
        self.embedding = nn.Embedding(num_types, dim)

    def forward(self, types: torch.Tensor) -> torch.Tensor:
        if types.dim() == 2 and types.shape[1] == 1:
            types = types.squeeze(1)
        if types.dim() != 1:
            raise ValueError(f"types must have shape [N] or [N, 1], got {tuple(types.shape)}")
        if types.numel() and (int(types.min()) < 0 or int(types.max()) >= self.num_types):
            low, high = int(types.min()), int(types.max())
            raise ValueError(f"types must lie in [0, {self.num_types}), got range [{low}, {high}]")
        return self.embedding(types)


class NodeFeatureEncoder(nn.Module):
    """Atom embedding concatenated with positional/structural embeddings, ``dim`` wide in all.

    The atom part is an :class:`AtomEncoder` (OGB spec, the default), a :class:`TypeDictEncoder`
    over ``atom_types`` types or a :class:`LinearFeatureEncoder` of ``atom_features`` float
    features (at most one of the two), of width ``dim`` minus the ``dim_pe`` of the given PE
    encoders. Output columns: ``[atom | lap_pe | rwse]``.

    ``forward(g, x, lap_eigvec=None, lap_eigval=None, rwse=None) -> [N, dim]``; pass the tensors
    the configured PE encoders need (``g`` is used by :class:`SignNetLapPE` only).

    >>> import dgl
    >>> enc = NodeFeatureEncoder(32, atom_types=28, rwse=RWSEEncoder(8, 8))
    >>> enc(dgl.rand_graph(4, 6), torch.tensor([1, 2, 3, 0]), rwse=torch.rand(4, 8)).shape
    torch.Size([4, 32])
    """

    def __init__(
        self,
        dim: int,
        atom_types: int | None = None,
        lap_pe: LapPEDeepSet | SignNetLapPE | None = None,
        rwse: RWSEEncoder | None = None,
        atom_features: int | None = None,
    ):
        super().__init__()
        if atom_types and atom_features:
            raise ValueError(f"atom_types={atom_types} (a type dictionary) and atom_features={atom_features} "
                             "(float features) both given; the atoms have one layout")
        if lap_pe is not None and not isinstance(lap_pe, (LapPEDeepSet, SignNetLapPE)):
            raise TypeError(f"lap_pe must be a LapPEDeepSet or SignNetLapPE, got {type(lap_pe).__name__}")
        if rwse is not None and not isinstance(rwse, RWSEEncoder):
            raise TypeError(f"rwse must be an RWSEEncoder, got {type(rwse).__name__}")
        dim_pe = sum(enc.dim_pe for enc in (lap_pe, rwse) if enc is not None)
        if dim - dim_pe < 1:
            raise ValueError(f"dim={dim} leaves no room for the atom embedding next to PE width {dim_pe}")
        self.dim = dim
        if atom_features:
            self.atom = LinearFeatureEncoder(atom_features, dim - dim_pe)
        elif atom_types:
            self.atom = TypeDictEncoder(atom_types, dim - dim_pe)
        else:
            self.atom = AtomEncoder(dim - dim_pe)
        self.lap_pe, self.rwse = lap_pe, rwse

    def forward(self, g, x, lap_eigvec=None, lap_eigval=None, rwse=None) -> torch.Tensor:
        parts = [self.atom(x)]
        if self.lap_pe is not None:
            if lap_eigvec is None or (lap_eigval is None and isinstance(self.lap_pe, LapPEDeepSet)):
                raise ValueError(f"{type(self.lap_pe).__name__} needs lap_eigvec (and lap_eigval for the DeepSet)")
            if isinstance(self.lap_pe, SignNetLapPE):
                parts.append(self.lap_pe(g, lap_eigvec))
            else:
                parts.append(self.lap_pe(lap_eigvec, lap_eigval))
        if self.rwse is not None:
            if rwse is None:
                raise ValueError("rwse tensor is required: this encoder has an RWSEEncoder")
            parts.append(self.rwse(rwse))
        return torch.cat(parts, dim=1)
