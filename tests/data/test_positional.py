"""LapPE and RWSE against dense numpy references, NaN padding, and the on-disk cache."""
import dgl
import numpy as np
import pytest
import torch
from safetensors import safe_open
from safetensors.torch import load

from zoo.data import positional
from zoo.data.positional import (
    PESpec,
    add_positional_encodings,
    laplacian_pe,
    pe_cache_path,
    random_walk_se,
)


def _undirected(n, pairs):
    src = [a for a, b in pairs] + [b for a, b in pairs]
    dst = [b for a, b in pairs] + [a for a, b in pairs]
    return dgl.graph((torch.tensor(src), torch.tensor(dst)), num_nodes=n)


GRAPHS = {
    "path5": _undirected(5, [(0, 1), (1, 2), (2, 3), (3, 4)]),
    "cycle6": _undirected(6, [(i, (i + 1) % 6) for i in range(6)]),
    "triangle_pendant": _undirected(4, [(0, 1), (1, 2), (2, 0), (2, 3)]),
    "two_parts_and_isolated": _undirected(6, [(0, 1), (1, 2), (3, 4)]),
}


def _dense_adj(g):
    a = np.zeros((g.num_nodes(), g.num_nodes()))
    for s, d in zip(*(t.tolist() for t in g.edges())):
        a[s, d] = 1.0
    return a


def _norm_laplacian(g):
    a = _dense_adj(g)
    deg = a.sum(1)
    dinv = np.array([d ** -0.5 if d > 0 else 0.0 for d in deg])
    return np.eye(len(a)) - dinv[:, None] * a * dinv[None, :]


@pytest.mark.parametrize("name", sorted(GRAPHS))
def test_rwse_matches_dense_reference(name):
    g, k = GRAPHS[name], 7
    a = _dense_adj(g)
    deg = a.sum(1, keepdims=True)
    p = np.divide(a, deg, out=np.zeros_like(a), where=deg > 0)
    expected = np.stack([np.diag(np.linalg.matrix_power(p, t)) for t in range(1, k + 1)], 1)
    got = random_walk_se(g, k)
    assert got.shape == (g.num_nodes(), k) and got.dtype == torch.float32
    np.testing.assert_allclose(got.numpy(), expected, atol=1e-6)


@pytest.mark.parametrize("name", sorted(GRAPHS))
@pytest.mark.parametrize("k", [1, 3, 4])
def test_lap_pe_matches_dense_reference(name, k):
    g = GRAPHS[name]
    lap = _norm_laplacian(g)
    evals, evecs = np.linalg.eigh(lap)
    vec, val = laplacian_pe(g, k)
    vec, val = vec.double().numpy(), val.double().numpy()
    assert vec.shape == val.shape == (g.num_nodes(), k)
    assert np.all(val == val[0])  # eigenvalues repeated on every node
    np.testing.assert_allclose(val[0], evals[:k], atol=1e-6)
    np.testing.assert_allclose(vec.T @ vec, np.eye(k), atol=1e-6)  # orthonormal columns
    np.testing.assert_allclose(lap @ vec, vec * val[0], atol=1e-5)  # each an eigenvector
    # eigenspaces wholly inside the first k: equal projectors (basis and sign free)
    for lam in np.unique(np.round(evals[:k], 6)):
        inside = np.abs(evals - lam) < 1e-6
        if inside.sum() > (np.abs(val[0] - lam) < 1e-6).sum():
            continue  # eigenspace cut by k: only the eigen-equation above applies
        ours = vec[:, np.abs(val[0] - lam) < 1e-6]
        np.testing.assert_allclose(ours @ ours.T, evecs[:, inside] @ evecs[:, inside].T, atol=1e-5)


def test_lap_pe_sign_convention_and_first_pair():
    vec, val = laplacian_pe(GRAPHS["path5"], 5)
    assert val[0, 0].item() == pytest.approx(0.0, abs=1e-6)
    mags = vec.abs()
    first_peak = (mags >= mags.max(0).values - 1e-5).int().argmax(0)
    assert (vec[first_peak, torch.arange(5)] > 0).all()
    deg = torch.tensor([1.0, 2, 2, 2, 1])
    expected = deg.sqrt() / deg.sum().sqrt()  # first eigenvector of the normalised Laplacian
    torch.testing.assert_close(vec[:, 0], expected, atol=1e-6, rtol=0)


def test_degenerate_eigenspace_gets_the_hand_computed_canonical_basis():
    # 4-cycle: eigenvalues 0, 1, 1, 2; the eigenspace of 1 is spanned by e0 - e2 and e1 - e3.
    # P e0 = (e0 - e2) / 2 comes first, then P e1 = (e1 - e3) / 2 is already orthogonal to it.
    vec, val = laplacian_pe(_undirected(4, [(0, 1), (1, 2), (2, 3), (3, 0)]), 4)
    np.testing.assert_allclose(val[0].numpy(), [0.0, 1.0, 1.0, 2.0], atol=1e-6)
    r = 0.5 ** 0.5
    np.testing.assert_allclose(vec[:, 1:3].numpy(), [[r, 0.0], [0.0, r], [-r, 0.0], [0.0, -r]], atol=1e-6)


def _rotated_eigh(seed):
    """np.linalg.eigh with every degenerate eigenspace's basis turned by a random orthogonal
    matrix (a reflection for odd seeds): another basis an eigensolver could return."""
    real = np.linalg.eigh
    rng = np.random.default_rng(seed)

    def eigh(matrix):
        evals, evecs = real(matrix)
        starts = np.flatnonzero(np.diff(evals, prepend=-np.inf) > 1e-6)
        for a, b in zip(starts, list(starts[1:]) + [len(evals)]):
            q, _ = np.linalg.qr(rng.normal(size=(b - a, b - a)))
            if seed % 2:
                q[:, 0] *= -1
            evecs[:, a:b] = evecs[:, a:b] @ q
        return evals, evecs
    return eigh


# 6-cycle (two eigenvalues of multiplicity 2), star K_{1,4} (eigenvalue 1, multiplicity 3),
# complete K_5 (eigenvalue 5/4, multiplicity 4; cut by k = 3)
SYMMETRIC = {"cycle6": GRAPHS["cycle6"], "star5": _undirected(5, [(0, i) for i in range(1, 5)]),
             "complete5": _undirected(5, [(i, j) for i in range(5) for j in range(i + 1, 5)])}


@pytest.mark.parametrize("name", sorted(SYMMETRIC))
@pytest.mark.parametrize("k", [3, 5])
def test_lap_pe_does_not_depend_on_the_solver_basis(name, k, monkeypatch):
    g = SYMMETRIC[name]
    want_vec, want_val = laplacian_pe(g, k)
    for seed in range(4):
        monkeypatch.setattr(positional.np.linalg, "eigh", _rotated_eigh(seed))
        vec, val = laplacian_pe(g, k)
        torch.testing.assert_close(val, want_val, atol=1e-6, rtol=0)
        torch.testing.assert_close(vec, want_vec, atol=1e-6, rtol=0)


def test_lap_pe_pads_small_graphs_with_nan():
    vec, val = laplacian_pe(GRAPHS["triangle_pendant"], 6)
    assert torch.isnan(vec[:, 4:]).all() and torch.isnan(val[:, 4:]).all()
    assert not torch.isnan(vec[:, :4]).any() and not torch.isnan(val[:, :4]).any()


def test_lap_pe_isolated_node_has_eigenvalue_one():
    g = dgl.graph(([], []), num_nodes=1)
    vec, val = laplacian_pe(g, 2)
    assert val[0, 0].item() == pytest.approx(1.0) and vec[0, 0].item() == pytest.approx(1.0)
    assert random_walk_se(g, 3).tolist() == [[0.0, 0.0, 0.0]]


def test_lap_pe_sparse_path_agrees_with_dense(monkeypatch):
    g = GRAPHS["path5"]
    dense_vec, dense_val = laplacian_pe(g, 2)
    monkeypatch.setattr(positional, "DENSE_MAX_NODES", 2)
    sparse_vec, sparse_val = laplacian_pe(g, 2)
    torch.testing.assert_close(sparse_val, dense_val, atol=1e-5, rtol=0)
    torch.testing.assert_close(sparse_vec, dense_vec, atol=1e-5, rtol=0)


def test_pe_spec_validation():
    assert PESpec.from_any(None) == PESpec() and not PESpec()
    assert PESpec.from_any({"lap_k": 4}).key() == "lap4-rw0-v2"
    # version 1 differed only in leaving degenerate eigenspaces to LAPACK: computed as version 2
    assert PESpec.from_any({"lap_k": 4, "version": 1}).to_dict() == {"lap_k": 4, "rwse_k": 0, "version": 2}
    with pytest.raises(ValueError, match="unknown PE spec key.*'lapk'"):
        PESpec.from_any({"lapk": 4})
    with pytest.raises(ValueError, match="rwse_k must be an int >= 0"):
        PESpec(rwse_k=-1)
    with pytest.raises(ValueError, match="version"):
        PESpec.from_any({"lap_k": 4, "version": 0})


def _graph_list():
    return [GRAPHS[name].clone() for name in sorted(GRAPHS)]


def test_add_pe_caches_on_disk(tmp_path, monkeypatch):
    spec = {"lap_k": 3, "rwse_k": 4}
    first = add_positional_encodings(_graph_list(), spec, dataset_id="toy/v1", cache_root=tmp_path, progress=False)
    assert pe_cache_path("toy/v1", spec, tmp_path).is_file()
    for g in first:
        assert g.ndata["lap_eigvec"].shape == (g.num_nodes(), 3)
        assert g.ndata["lap_eigval"].shape == (g.num_nodes(), 3)
        assert g.ndata["rwse"].shape == (g.num_nodes(), 4)

    def boom(*args, **kwargs):
        raise AssertionError("recomputed instead of reading the cache")

    monkeypatch.setattr(positional, "laplacian_pe", boom)
    monkeypatch.setattr(positional, "random_walk_se", boom)
    second = add_positional_encodings(_graph_list(), spec, dataset_id="toy/v1", cache_root=tmp_path, progress=False)
    for a, b in zip(first, second):
        for key in ("lap_eigvec", "lap_eigval", "rwse"):
            torch.testing.assert_close(a.ndata[key], b.ndata[key], equal_nan=True, atol=0, rtol=0)


def test_add_pe_cache_rejects_other_graphs(tmp_path):
    add_positional_encodings(_graph_list(), {"rwse_k": 2}, dataset_id="toy", cache_root=tmp_path, progress=False)
    with pytest.raises(ValueError, match="computed for other graphs"):
        add_positional_encodings(_graph_list()[:2], {"rwse_k": 2}, dataset_id="toy", cache_root=tmp_path, progress=False)


def test_add_pe_without_id_or_spec(tmp_path):
    graphs = add_positional_encodings(_graph_list(), {"rwse_k": 2}, progress=False)
    assert all("rwse" in g.ndata and "lap_eigvec" not in g.ndata for g in graphs)
    assert all(not g.ndata.keys() for g in add_positional_encodings(_graph_list(), None))


def test_pe_cache_is_safetensors_with_the_spec_in_its_header(tmp_path):
    spec = {"lap_k": 2, "rwse_k": 3}
    add_positional_encodings(_graph_list(), spec, dataset_id="toy", cache_root=tmp_path, progress=False)
    path = pe_cache_path("toy", spec, tmp_path)
    assert path.suffix == ".safetensors" and [p.name for p in path.parent.iterdir()] == [path.name]
    with safe_open(str(path), "pt") as f:
        assert sorted(f.keys()) == ["lap_eigval", "lap_eigvec", "num_nodes", "rwse"]
        assert f.metadata() == {"dataset_id": "toy", "spec": '{"lap_k": 2, "rwse_k": 3, "version": 2}', "graphs": "4"}


@pytest.mark.parametrize("content", ["payload", "truncated", "empty"])
def test_unreadable_pe_cache_is_recomputed_with_one_line_and_runs_nothing(content, tmp_path, payload):
    spec, marker = {"rwse_k": 3}, tmp_path / "payload-ran"
    first = add_positional_encodings(_graph_list(), spec, dataset_id="toy", cache_root=tmp_path, progress=False)
    path = pe_cache_path("toy", spec, tmp_path)
    good = path.read_bytes()
    cached = load(good)
    path.write_bytes({"payload": payload(marker), "truncated": good[: len(good) // 2], "empty": b""}[content])
    with pytest.warns(UserWarning, match=f"PE cache {path} is unreadable .*; recomputing it") as record:
        again = add_positional_encodings(_graph_list(), spec, dataset_id="toy", cache_root=tmp_path, progress=False)
    assert not marker.exists() and "\n" not in str(record[0].message)
    assert all(torch.equal(a.ndata["rwse"], b.ndata["rwse"]) for a, b in zip(first, again))
    rewritten = load(path.read_bytes())
    assert all(torch.equal(rewritten[key], cached[key]) for key in ("num_nodes", "rwse")) and len(rewritten) == 2
