"""Positional and structural encodings (LapPE, RWSE), computed once per dataset and cached on disk.

* :func:`laplacian_pe` follows GraphGPS: the ``k`` smallest eigenpairs of the symmetric
  normalised Laplacian ``L = I - D^-1/2 A D^-1/2`` *including* the first (eigenvalue 0),
  eigenvectors of unit L2 norm, eigenvalues ascending and clipped to [0, 2]. A graph with
  ``N < k`` nodes has only ``N`` eigenpairs: the missing columns are **NaN** in both eigvec
  and eigval (as GraphGPS), so the encoder must mask NaNs (``torch.isnan``) and zero them.
  Signs are fixed so each eigenvector's largest-magnitude entry (the first one within 1e-6 of
  the largest) is positive; that is only a convention (random sign flips or SignNet belong in
  the encoder). Inside a degenerate eigenspace (eigenvalues within :data:`DEGENERATE_TOL`) the
  basis is made canonical by :func:`canonical_eigenbasis`, so it does not depend on which basis
  LAPACK returns on a given CPU. Isolated nodes have ``L_ii = 1``. Dense ``eigh`` in float64 up to :data:`DENSE_MAX_NODES` nodes, else sparse
  shift-invert ``eigsh``. (``dgl.lap_pe`` is not used: it drops the first eigenpair, flips
  signs at random and runs ``eigs`` with ``tol=1e-2``.)
* :func:`random_walk_se` is ``dgl.random_walk_pe``: ``diag((D^-1 A)^t)`` for t = 1..k, i.e.
  the probability that a random walk from a node is back at it after t steps (0 for isolated
  nodes), computed in float64 and returned as float32.

Both treat the graph as undirected: molecule graphs store each bond in both directions.

>>> import dgl, torch
>>> g = dgl.graph((torch.tensor([0, 1, 1, 2]), torch.tensor([1, 0, 2, 1])))  # path 0-1-2
>>> vec, val = laplacian_pe(g, 4)
>>> [round(x, 6) for x in val[0, :3].tolist()], bool(torch.isnan(val[0, 3]))
([0.0, 1.0, 2.0], True)
>>> random_walk_se(g, 2)[:, 1].tolist()
[0.5, 1.0, 0.5]
"""
from __future__ import annotations

import hashlib
import json
import re
import warnings
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Mapping, Sequence

import dgl
import numpy as np
import scipy.sparse as sp
import torch
from safetensors.torch import load, save
from scipy.sparse.linalg import eigsh

from zoo._atomic import atomic_write
from zoo._progress import progress as show_progress
from zoo.data.mirror import resolve_roots

PE_VERSION = 2
"""Bump when the computation changes: it is part of every cache key. Version 2 made the basis of
degenerate eigenspaces canonical (version 1 left it to LAPACK, so it differed between CPUs) and is
otherwise identical, so a version-1 spec is accepted and computed as version 2."""
COMPATIBLE_VERSIONS = (1, 2)
DEGENERATE_TOL = 1e-6
"""Eigenvalues closer than this (absolute; the spectrum lies in [0, 2]) form one eigenspace."""
_PIVOT_TOL = 1e-4
DENSE_MAX_NODES = 2000


@dataclass(frozen=True)
class PESpec:
    """Which encodings to compute: ``lap_k`` eigenpairs, ``rwse_k`` walk steps (0 = none).

    >>> PESpec.from_any({"lap_k": 8, "rwse_k": 16}).to_dict()
    {'lap_k': 8, 'rwse_k': 16, 'version': 2}
    """

    lap_k: int = 0
    rwse_k: int = 0

    def __post_init__(self):
        for name in ("lap_k", "rwse_k"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"PE spec {name} must be an int >= 0 (0 = off), got {value!r}")

    @classmethod
    def from_any(cls, spec: "PESpec | Mapping | None") -> "PESpec":
        """Accept a PESpec, a mapping with keys ``lap_k`` / ``rwse_k`` (``version`` ignored), or None."""
        if spec is None:
            return cls()
        if isinstance(spec, cls):
            return spec
        if not isinstance(spec, Mapping):
            raise TypeError(f"PE spec must be a PESpec or a mapping, got {type(spec).__name__}")
        unknown = sorted(set(spec) - {"lap_k", "rwse_k", "version"})
        if unknown:
            raise ValueError(f"unknown PE spec key(s) {unknown}; valid keys: lap_k, rwse_k")
        if spec.get("version", PE_VERSION) not in COMPATIBLE_VERSIONS:
            raise ValueError(
                f"PE spec version {spec['version']} is not one this code computes ({COMPATIBLE_VERSIONS}); "
                "the encodings would differ from the ones the model was trained with."
            )
        return cls(int(spec.get("lap_k", 0)), int(spec.get("rwse_k", 0)))

    def to_dict(self) -> dict:
        """What a checkpoint stores."""
        return {**asdict(self), "version": PE_VERSION}

    def key(self) -> str:
        """Short file-name key of this spec, e.g. ``lap8-rw16-v2``."""
        return f"lap{self.lap_k}-rw{self.rwse_k}-v{PE_VERSION}"

    def __bool__(self) -> bool:
        return bool(self.lap_k or self.rwse_k)


def laplacian_pe(g: dgl.DGLGraph, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """LapPE of one graph: ``(eigvec [N, k], eigval [N, k])`` float32, NaN-padded (module doc)."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    n = g.num_nodes()
    m = min(k, n)
    if n <= DENSE_MAX_NODES:
        adj = _adjacency(g, dense=True)
        deg = adj.sum(1)
        dinv = np.divide(1.0, np.sqrt(deg), out=np.zeros(n), where=deg > 0)
        evals, evecs = np.linalg.eigh(np.eye(n) - dinv[:, None] * adj * dinv[None, :])
    else:  # shift-invert around a point just below the spectrum finds the smallest quickly
        adj = _adjacency(g, dense=False)
        deg = np.asarray(adj.sum(1)).ravel()
        dinv = np.divide(1.0, np.sqrt(deg), out=np.zeros(n), where=deg > 0)
        lap = sp.identity(n, format="csc") - sp.diags(dinv) @ adj @ sp.diags(dinv)
        # 8 more than m, so that an eigenspace cut by the k-th eigenpair is seen whole (one of
        # multiplicity > 8 at the cut is still cut, and its basis is the solver's)
        evals, evecs = eigsh(lap.tocsc(), k=min(m + 8, n - 1), sigma=-1e-3, which="LM")
    order = np.argsort(evals, kind="stable")
    evals, evecs = canonical_eigenbasis(evals[order], evecs[:, order])
    evals, evecs = np.clip(evals[:m], 0.0, 2.0), evecs[:, :m]
    vec = np.full((n, k), np.nan)
    vec[:, :m] = evecs
    val = np.full(k, np.nan)
    val[:m] = evals
    return torch.from_numpy(vec).float(), torch.from_numpy(val).float().expand(n, k).clone()


def canonical_eigenbasis(evals: np.ndarray, evecs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``(evals, evecs)`` (ascending, orthonormal columns) with a basis that depends only on the
    eigenspaces, not on the basis a solver returned, up to float rounding.

    * A simple eigenvector gets the sign that makes its largest-magnitude entry (the first within
      1e-6 of the largest) positive.
    * A degenerate eigenspace (eigenvalues within :data:`DEGENERATE_TOL`) with orthonormal basis
      ``U`` and projector ``P = U U^T`` (unique whatever ``U`` is) gets the Gram-Schmidt basis of
      ``P e_0, P e_1, ...`` in node order, skipping columns whose remainder is shorter than 1e-4.
      The first vector is thus ``P e_i / |P e_i|`` for the first node ``i`` the space reaches.
    The basis follows the node order (it is not permutation-equivariant), as every LapPE is.

    >>> c, s = np.cos(0.3), np.sin(0.3)  # any rotation inside the eigenspace of 1.0
    >>> vecs = np.array([[1.0, 0.0, 0.0], [0.0, c, -s], [0.0, s, c]])
    >>> (canonical_eigenbasis(np.array([0.0, 1.0, 1.0]), vecs)[1].round(6) + 0.0).tolist()
    [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    """
    evecs = evecs.copy()
    starts = np.flatnonzero(np.diff(evals, prepend=-np.inf) > DEGENERATE_TOL)
    for a, b in zip(starts, list(starts[1:]) + [len(evals)]):
        basis = evecs[:, a:b]
        if b - a == 1:
            mags = np.abs(basis[:, 0])
            peak = basis[(mags >= mags.max() - 1e-6).argmax(), 0] if len(mags) else 1.0
            evecs[:, a] = basis[:, 0] * (-1.0 if peak < 0 else 1.0)
            continue
        found: list[np.ndarray] = []
        for i in range(basis.shape[0]):
            column = basis @ basis[i]  # P e_i, without forming P
            for q in found:
                column = column - q * (q @ column)
            norm = np.linalg.norm(column)
            if norm > _PIVOT_TOL:
                found.append(column / norm)
                if len(found) == b - a:
                    break
        evecs[:, a:b] = np.stack(found, axis=1)
    return evals, evecs


def random_walk_se(g: dgl.DGLGraph, k: int) -> torch.Tensor:
    """RWSE of one graph: ``[N, k]`` float32 landing probabilities after 1..k steps."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    if g.num_nodes() == 0:
        return torch.zeros(0, k)
    return dgl.random_walk_pe(g, k).float()


def compute_positional_encodings(
    graphs: Sequence[dgl.DGLGraph], spec, *, progress: bool = True
) -> dict[str, torch.Tensor]:
    """Encodings of every graph, nodes concatenated in graph order.

    Returns ``lap_eigvec [sum N, lap_k]``, ``lap_eigval [num graphs, lap_k]`` (one row per graph),
    ``rwse [sum N, rwse_k]`` (only the enabled ones) and ``num_nodes [num graphs]``.
    """
    spec = PESpec.from_any(spec)
    vecs, vals, rws = [], [], []
    for g in show_progress(graphs, f"PE {spec.key()}", enabled=progress, unit="graphs"):
        if spec.lap_k:
            vec, val = laplacian_pe(g, spec.lap_k)
            vecs.append(vec)
            vals.append(val[0] if len(val) else torch.full((spec.lap_k,), float("nan")))
        if spec.rwse_k:
            rws.append(random_walk_se(g, spec.rwse_k))
    out = {"num_nodes": torch.tensor([g.num_nodes() for g in graphs], dtype=torch.long)}
    if spec.lap_k:
        out["lap_eigvec"] = torch.cat(vecs) if vecs else torch.zeros(0, spec.lap_k)
        out["lap_eigval"] = torch.stack(vals) if vals else torch.zeros(0, spec.lap_k)
    if spec.rwse_k:
        out["rwse"] = torch.cat(rws) if rws else torch.zeros(0, spec.rwse_k)
    return out


def add_positional_encodings(
    graphs: Sequence[dgl.DGLGraph],
    spec,
    *,
    dataset_id: str | None = None,
    cache_root: str | Path | None = None,
    progress: bool = True,
) -> list[dgl.DGLGraph]:
    """Store ``ndata['lap_eigvec']``, ``ndata['lap_eigval']`` and/or ``ndata['rwse']`` on ``graphs``.

    With ``dataset_id`` the encodings are cached in ``<cache_root>/pe/<dataset_id>/<spec key>.safetensors``
    (``cache_root`` defaults to ``$ZOO_CACHE``, else ~/.cache/zoo; safetensors holds tensors
    only, so reading it cannot run code) and later calls load them instead of recomputing; an
    unreadable cache file is recomputed with a one-line warning. ``dataset_id`` must name the
    exact list of graphs (dataset, source file hash, featurizer, subset); node counts are
    checked on load. Graphs are changed in place and returned.

    On the 4-cycle a random walk is back at its start after 2 and 4 steps with probability 1/2,
    never after an odd number, and the normalised Laplacian's eigenvalues are 0, 1, 1 and 2:

    >>> cycle = dgl.graph(([0, 1, 2, 3, 1, 2, 3, 0], [1, 2, 3, 0, 0, 1, 2, 3]))
    >>> (cycle,) = add_positional_encodings([cycle], {"lap_k": 4, "rwse_k": 4}, progress=False)  # no cache
    >>> cycle.ndata["rwse"][0].tolist(), cycle.ndata["lap_eigval"][0].round(decimals=6).abs().tolist()
    ([0.0, 0.5, 0.0, 0.5], [0.0, 1.0, 1.0, 2.0])
    """
    spec = PESpec.from_any(spec)
    graphs = list(graphs)
    if not spec:
        return graphs
    path = pe_cache_path(dataset_id, spec, cache_root) if dataset_id else None
    pe = _load_cached(path, graphs) if path else None
    if pe is None:
        pe = compute_positional_encodings(graphs, spec, progress=progress)
        if path:
            _save_atomic(pe, spec, dataset_id, path)
    _attach(graphs, pe)
    return graphs


def pe_cache_path(dataset_id: str, spec, cache_root: str | Path | None = None) -> Path:
    """Where :func:`add_positional_encodings` caches ``spec`` for ``dataset_id``."""
    cache_root = resolve_roots(None, cache_root, None)[1]
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", dataset_id)[:80]
    if safe != dataset_id:  # keep distinct ids distinct after sanitising
        safe = f"{safe}-{hashlib.sha1(dataset_id.encode()).hexdigest()[:8]}"
    return cache_root / "pe" / safe / f"{PESpec.from_any(spec).key()}.safetensors"


def _adjacency(g: dgl.DGLGraph, dense: bool):
    """Symmetric float64 adjacency (multi-edges counted, symmetrised as max(A, A^T))."""
    n = g.num_nodes()
    src, dst = (t.numpy() for t in g.edges())
    if dense:
        adj = np.zeros((n, n))
        np.add.at(adj, (src, dst), 1.0)
        return np.maximum(adj, adj.T)
    adj = sp.csr_matrix((np.ones(len(src)), (src, dst)), shape=(n, n))
    return adj.maximum(adj.T).tocsr()


def _load_cached(path: Path, graphs: list) -> dict | None:
    """The cached encodings, or None if absent or unreadable (warned); a file for other graphs is an error."""
    if not path.is_file():
        return None
    try:
        pe = load(path.read_bytes())  # a copy, not a memory map the file could be truncated under
        cached = pe["num_nodes"]
    except Exception as exc:  # noqa: BLE001 (safetensors raises several kinds on a corrupt file)
        warnings.warn(f"PE cache {path} is unreadable ({type(exc).__name__}: {exc}); recomputing it.", stacklevel=3)
        return None
    counts = torch.tensor([g.num_nodes() for g in graphs], dtype=torch.long)
    if not torch.equal(cached, counts):
        raise ValueError(
            f"PE cache {path} was computed for other graphs ({len(cached)} graphs, "
            f"{int(cached.sum())} nodes; now {len(counts)} graphs, {int(counts.sum())} "
            "nodes). The dataset_id does not identify the graphs uniquely: include the source "
            "hash and subset in it, or delete the file."
        )
    return pe


def _save_atomic(pe: dict, spec: PESpec, dataset_id: str, path: Path) -> None:
    """Write the safetensors file (the spec and dataset_id in its header) under a temporary name, then rename."""
    meta = {"dataset_id": dataset_id, "spec": json.dumps(spec.to_dict()), "graphs": str(len(pe["num_nodes"]))}
    data = save({k: v.contiguous() for k, v in pe.items()}, metadata=meta)
    atomic_write(path, lambda handle: handle.write(data))


def _attach(graphs: list, pe: dict) -> None:
    """Split the concatenated encodings per graph and store them as ndata."""
    sizes = pe["num_nodes"].tolist()
    parts = {key: torch.split(pe[key], sizes) for key in ("lap_eigvec", "rwse") if key in pe}
    for i, g in enumerate(graphs):
        for key, chunks in parts.items():
            g.ndata[key] = chunks[i]
        if "lap_eigval" in pe:
            g.ndata["lap_eigval"] = pe["lap_eigval"][i].expand(sizes[i], -1).clone()
