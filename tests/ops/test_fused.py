"""The fused CPU kernels (zoo/ops/csrc) against the pure-torch path, their reference.

The pure-torch path is itself checked against dense float64 references and the entmax package
(test_qsoftmax.py, test_entmax.py, test_sparsemax.py, which run on both paths). Here both paths
run on random power-law graphs with everything the kernels branch on: nodes without in-edges,
hubs, self-loops, multi-edges, ties at the max, -inf logits, head counts that do not fill a
SIMD vector, blocks, every shape of q / alpha and every branch of exp_q. Tolerances: float64
to 1e-12 (a few ulps through exp, log1p and sums over up to a few hundred edges); float32 to
a few ulps of 1 for weights and 1e-4 relative for gradients (sums of a few hundred terms,
each good to a few ulps).
"""
import contextlib

import dgl
import pytest
import torch

from tests.ops.graphs import make_graph
from zoo.ops import _fused, edge_entmax, edge_gatv2_logits, edge_qsoftmax, edge_sparsemax, edge_weighted_sum
from zoo.ops.gated_gcn import gated_gcn_messages

HEADS = 3  # not a multiple of the SIMD width: partial vectors everywhere


@pytest.fixture(scope="module", autouse=True)
def built():
    if _fused.kernels() is None:
        pytest.skip("the fused kernels could not be built here (see the RuntimeWarning)")


def power_law_graph(seed, nodes=120):
    """In-degrees ~ floor(U^-1.5) - 1 (about 40% zero, hubs up to 300), self-loops and multi-edges."""
    gen = torch.Generator().manual_seed(seed)
    degrees = (torch.rand(nodes, generator=gen).pow(-1.5).floor() - 1).clamp(max=300).long()
    return make_graph(degrees.tolist(), seed=seed)


def logits_for(graph, dtype, heads=HEADS, seed=0):
    """Logits on a grid of 0.25 (ties, also at the max) with some -inf, never all of a node's."""
    gen = torch.Generator().manual_seed(seed)
    z = (torch.randn(graph.num_edges(), heads, generator=gen, dtype=dtype) * 8).round() / 4
    at_max = z == dgl.ops.copy_e_max(graph, z)[graph.edges()[1]]
    masked = (torch.rand(z.shape, generator=gen) < 0.15) & ~at_max
    return z.masked_fill(masked, float("-inf"))


def run(op, graph, z, param, fused, **kwargs):
    """Output and gradients (logits, and param if a tensor) of ``sum(op * w)`` on one path."""
    z = z.clone().requires_grad_()
    param = param.clone().requires_grad_() if torch.is_tensor(param) else param
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(1))
    with contextlib.nullcontext() if fused else _fused.disabled():
        assert _fused.usable(z) == fused
        out = op(graph, z, param, **kwargs)
        grads = torch.autograd.grad((out * w).sum(), [z] + ([param] if torch.is_tensor(param) else []))
    return [out.detach(), *grads]


def assert_paths_agree(op, graph, z, param, **kwargs):
    fused, pure = run(op, graph, z, param, True, **kwargs), run(op, graph, z, param, False, **kwargs)
    double = z.dtype == torch.float64
    torch.testing.assert_close(fused[0], pure[0], atol=1e-12 if double else 1e-6, rtol=0)
    assert torch.equal(fused[0] == 0, pure[0] == 0)  # the same exact zeros
    for got, want in zip(fused[1:], pure[1:]):
        scale = float(want.abs().max()) + 1
        torch.testing.assert_close(got, want, atol=(1e-12 if double else 1e-5) * scale, rtol=1e-10 if double else 1e-4)
    return fused


Q_CASES = {
    "softmax": lambda z: 1.0, "q2": lambda z: 2.0, "q1.5": lambda z: 1.5, "q0.7": lambda z: 0.7,
    "float_taylor": lambda z: 1 + 5e-5,
    "one": lambda z: torch.tensor(1.4, dtype=z.dtype),
    "head": lambda z: torch.tensor([0.6, 1.3, 1.9], dtype=z.dtype),
    "head_taylor": lambda z: torch.tensor([1 + 5e-5, 1 - 3e-5, 1.0], dtype=z.dtype),
    "head_mixed": lambda z: torch.tensor([1 + 5e-5, 0.8, 1.5], dtype=z.dtype),
    "edge": lambda z: 0.5 + torch.rand(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(2)),
    "edge_column": lambda z: 0.5 + torch.rand(len(z), 1, dtype=z.dtype, generator=torch.Generator().manual_seed(2)),
    "edge_mixed": lambda z: torch.where(torch.rand(z.shape, generator=torch.Generator().manual_seed(3)) < 0.5,
                                        1 + 2e-5, 1.7).to(z.dtype),
}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", Q_CASES)
def test_qsoftmax_paths_agree(case, dtype):
    graph = power_law_graph(seed=1)
    z = logits_for(graph, dtype)
    assert_paths_agree(edge_qsoftmax, graph, z, Q_CASES[case](z))


ALPHAS = {"one_tensor": torch.ones(HEADS), "1.2": 1.2, "1.5": 1.5, "2": 2.0, "3": 3.0, "softmax": 1.0,
          "head": torch.tensor([1.2, 1.5, 2.0]), "head_over_two": torch.tensor([1.2, 3.0, 2.0]),
          "one_value": torch.tensor(1.5)}


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("case", ALPHAS)
def test_entmax_paths_agree(case, dtype):
    graph = power_law_graph(seed=2)
    z = logits_for(graph, dtype)
    alpha = ALPHAS[case].to(dtype) if torch.is_tensor(ALPHAS[case]) else ALPHAS[case]
    if dtype == torch.float32 and case in ("3", "head_over_two"):
        # alpha > 2: d p / d z ~ p^(2 - alpha) grows without bound at the edge of the support, so float32
        # gradients differ by far more than rounding between any two correct implementations
        out = run(edge_entmax, graph, z, alpha, True)[0]
        torch.testing.assert_close(out, run(edge_entmax, graph, z, alpha, False)[0], atol=1e-6, rtol=0)
        return
    assert_paths_agree(edge_entmax, graph, z, alpha)


def test_sparsemax_paths_agree():
    graph = power_law_graph(seed=3)
    z = logits_for(graph, torch.float64)
    assert_paths_agree(lambda g, x, _: edge_sparsemax(g, x), graph, z, None)


@pytest.mark.parametrize("fused", [True, False])
def test_the_max_gradient_goes_to_the_first_tied_edge(fused):
    """Edges 1 and 2 tie at the max: on both paths the gradient is that of the q-softmax shifted by
    edge 1's logit (a float64 reference by autograd; q = 1.5 keeps every edge in the support), not
    wherever DGL's max kernel puts it (its AVX-512 float32 kernel, libxsmm, picks another edge)."""
    graph = dgl.graph(([0, 1, 2, 3], [4, 4, 4, 4]))
    z = torch.tensor([0.5, 1.0, 1.0, -0.25], dtype=torch.float64)
    got = run(edge_qsoftmax, graph, z, 1.5, fused)[1]
    x = z.clone().requires_grad_()
    e = (1 + 0.5 * (x - x[1])).pow(2)
    w = torch.randn(z.shape, dtype=z.dtype, generator=torch.Generator().manual_seed(1))  # run()'s weights
    (want,) = torch.autograd.grad((e / e.sum() * w).sum(), [x])
    assert got[1] != got[2]  # the tie is broken, not split
    torch.testing.assert_close(got, want, atol=1e-14, rtol=0)


@pytest.mark.parametrize("heads", [1, 8, 11])
def test_head_counts_around_the_vector_width(heads):
    """8 fills an AVX2 float32 vector, 11 needs two (three for float64), 1 uses one lane; 1-d logits too."""
    graph = power_law_graph(seed=4)
    for dtype in (torch.float32, torch.float64):
        z = logits_for(graph, dtype, heads=heads)
        assert_paths_agree(edge_qsoftmax, graph, z, torch.linspace(0.7, 1.6, heads, dtype=dtype))
        assert_paths_agree(edge_entmax, graph, z, torch.linspace(1.1, 2.0, heads, dtype=dtype))
    z = logits_for(graph, torch.float64, heads=1)[:, 0]
    assert_paths_agree(edge_qsoftmax, graph, z, 1.3)
    assert_paths_agree(edge_entmax, graph, z, 1.3)


def test_blocks():
    """A message-flow block of half the destinations (every other one, some without in-edges)."""
    graph = power_law_graph(seed=5)
    dst = torch.arange(0, graph.num_nodes(), 2)
    frontier = dgl.in_subgraph(graph, dst)
    block = dgl.to_block(frontier, dst_nodes=dst)
    assert (block.in_degrees() == 0).any() and block.num_src_nodes() > block.num_dst_nodes()
    z = logits_for(graph, torch.float64)[frontier.edata[dgl.EID][block.edata[dgl.EID]]]
    assert_paths_agree(edge_qsoftmax, block, z, torch.tensor([0.6, 1.3, 1.9], dtype=z.dtype))
    assert_paths_agree(edge_entmax, block, z, torch.tensor([1.2, 1.5, 3.0], dtype=z.dtype))


def test_int32_graphs():
    graph = power_law_graph(seed=9).int()
    z = logits_for(graph, torch.float64)
    assert_paths_agree(edge_qsoftmax, graph, z, torch.tensor([0.6, 1.3, 1.9], dtype=z.dtype))
    assert_paths_agree(edge_entmax, graph, z, torch.tensor([1.2, 1.5, 2.0], dtype=z.dtype))


@pytest.mark.parametrize("op, param", [(edge_qsoftmax, torch.tensor([0.6, 1 + 5e-5, 1.9])),
                                       (edge_qsoftmax, "edge"), (edge_entmax, torch.tensor([1.2, 1.5, 3.0]))])
def test_thread_counts_agree(op, param):
    """Destinations are split over tasks by edges; parameter gradients are summed per task."""
    graph = power_law_graph(seed=6, nodes=1500)
    z = logits_for(graph, torch.float64)
    assert z.numel() > 32768  # ATen's GRAIN_SIZE: smaller graphs run on one thread
    param = Q_CASES["edge"](z) if isinstance(param, str) else param.double()
    results = []
    for threads in (1, 3):
        torch.set_num_threads(threads)
        results.append(run(op, graph, z, param, True))
    for one, several in zip(*results):
        torch.testing.assert_close(one, several, atol=1e-12 * (float(one.abs().max()) + 1), rtol=0)


def test_not_converged_warns_on_both_paths():
    graph = power_law_graph(seed=7)
    z = logits_for(graph, torch.float64)
    for fused in (True, False):
        with pytest.warns(RuntimeWarning, match=r"edge_entmax: threshold not converged in max_iter=1 Newton"):
            run(edge_entmax, graph, z, 1.5, fused, n_bisect=0, max_iter=1)


# ---- edge_gatv2_logits: one fused loop per edge against the chunked pure-torch path ---------------

def gatv2_run(graph, dtype, fused, heads=HEADS, feats=5, edge_term=False, seed=0):
    """Logits and the gradients of feat_src, feat_dst, attn (and edge_term) of ``sum(logits * w)``."""
    gen = torch.Generator().manual_seed(seed)
    make = lambda *shape: torch.randn(*shape, generator=gen, dtype=dtype).requires_grad_()  # noqa: E731
    inputs = [make(graph.num_src_nodes(), heads, feats), make(graph.num_dst_nodes(), heads, feats), make(heads, feats)]
    inputs += [make(graph.num_edges(), heads, feats)] if edge_term else []
    w = torch.randn(graph.num_edges(), heads, generator=gen, dtype=dtype)
    with contextlib.nullcontext() if fused else _fused.disabled():
        assert _fused.usable(inputs[0]) == fused
        out = edge_gatv2_logits(graph, *inputs[:3], 0.2, *inputs[3:])
        grads = torch.autograd.grad((out * w).sum(), inputs)
    return [out.detach(), *grads]


def assert_runs_agree(run, graph, dtype, **kwargs):
    """``run(graph, dtype, fused, **kwargs)`` (outputs and gradients) on both paths: sums of up to a
    few hundred edges' terms, in another order."""
    fused, pure = run(graph, dtype, True, **kwargs), run(graph, dtype, False, **kwargs)
    double = dtype == torch.float64
    for got, want in zip(fused, pure):
        scale = float(want.abs().max()) + 1
        torch.testing.assert_close(got, want, atol=(1e-12 if double else 1e-5) * scale, rtol=1e-10 if double else 1e-4)
    return fused


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("heads, feats", [(1, 1), (3, 5), (2, 11), (8, 16)])  # F around the vector width
def test_gatv2_logits_paths_agree(heads, feats, dtype):
    """Power-law in-degrees: hubs of up to 300 in-edges, nodes without in- or out-edges, loops."""
    graph = dgl.add_nodes(power_law_graph(seed=10), 3)  # and three isolated nodes
    assert (graph.in_degrees() == 0).any() and (graph.out_degrees() == 0).any()
    fused = assert_runs_agree(gatv2_run, graph, dtype, heads=heads, feats=feats, edge_term=heads == 2)
    assert bool((fused[1][graph.out_degrees() == 0] == 0).all())  # a source of no edge gets no gradient


def test_gatv2_logits_on_blocks_and_int32_graphs():
    graph = power_law_graph(seed=11)
    dst = torch.arange(0, graph.num_nodes(), 2)
    block = dgl.to_block(dgl.in_subgraph(graph, dst), dst_nodes=dst)
    assert (block.in_degrees() == 0).any() and block.num_src_nodes() > block.num_dst_nodes()
    assert_runs_agree(gatv2_run, block, torch.float64, edge_term=True)
    assert_runs_agree(gatv2_run, graph.int(), torch.float64)


@pytest.mark.parametrize("feats", [8, 2])  # heads as wide as a float64 vector or more; narrower heads
def test_gatv2_logits_thread_counts_agree(feats):
    """Edges are split over threads for the logits and nodes over fixed tasks for the gradients:
    every logit and node gradient is the same sum in the same order, whatever the thread count."""
    graph = power_law_graph(seed=6, nodes=1500)
    assert graph.num_edges() * HEADS * feats > 32768  # ATen's GRAIN_SIZE: smaller graphs run on one thread
    results = []
    for threads in (1, 3):
        torch.set_num_threads(threads)
        results.append(gatv2_run(graph, torch.float64, True, feats=feats, edge_term=True))
    for k, (one, several) in enumerate(zip(*results)):
        if k == 3:  # attn: per-task partial sums, added by torch
            torch.testing.assert_close(one, several, atol=1e-12 * (float(one.abs().max()) + 1), rtol=0)
        else:
            assert torch.equal(one, several)


# ---- edge_weighted_sum: the fused sums against the per-head sparse products ------------------------

def aggregate_run(graph, dtype, fused, heads=HEADS, feats=5, seed=0):
    """Output and the gradients of weights and feat of ``sum(out * w)``."""
    gen = torch.Generator().manual_seed(seed)
    weights = torch.rand(graph.num_edges(), heads, generator=gen, dtype=dtype).requires_grad_()
    feat = torch.randn(graph.num_src_nodes(), heads, feats, generator=gen, dtype=dtype).requires_grad_()
    w = torch.randn(graph.num_dst_nodes(), heads, feats, generator=gen, dtype=dtype)
    with contextlib.nullcontext() if fused else _fused.disabled():
        assert _fused.usable(feat) == fused
        out = edge_weighted_sum(graph, weights, feat)
        grads = torch.autograd.grad((out * w).sum(), [weights, feat])
    return [out.detach(), *grads]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("heads, feats", [(1, 1), (3, 5), (2, 11), (8, 16)])  # F around the vector width
def test_weighted_sum_paths_agree(heads, feats, dtype):
    graph = dgl.add_nodes(power_law_graph(seed=12), 3)  # hubs, nodes without in- or out-edges, loops
    fused = assert_runs_agree(aggregate_run, graph, dtype, heads=heads, feats=feats)
    assert bool((fused[0][graph.in_degrees() == 0] == 0).all())  # no in-edges: a zero row
    assert bool((fused[2][graph.out_degrees() == 0] == 0).all())  # no out-edges: no feat gradient


def test_weighted_sum_on_blocks_and_int32_graphs():
    graph = power_law_graph(seed=13)
    dst = torch.arange(0, graph.num_nodes(), 2)
    block = dgl.to_block(dgl.in_subgraph(graph, dst), dst_nodes=dst)
    assert (block.in_degrees() == 0).any() and block.num_src_nodes() > block.num_dst_nodes()
    assert_runs_agree(aggregate_run, block, torch.float64)
    assert_runs_agree(aggregate_run, graph.int(), torch.float64)


@pytest.mark.parametrize("feats", [8, 2])
def test_weighted_sum_thread_counts_agree(feats):
    """Every output row, weight gradient and feat gradient is one sum in one order, whatever the
    thread count."""
    graph = power_law_graph(seed=6, nodes=1500)
    assert graph.num_edges() * HEADS * feats > 32768  # ATen's GRAIN_SIZE: smaller graphs run on one thread
    results = []
    for threads in (1, 3):
        torch.set_num_threads(threads)
        results.append(aggregate_run(graph, torch.float64, True, feats=feats))
    for one, several in zip(*results):
        assert torch.equal(one, several)


# ---- gated_gcn_messages: GatedGCN's fused edge step against index_select / index_add_ ----------------

def gated_gcn_run(graph, dtype, fused, dim=5, seed=0):
    """h', e' and the gradients of proj and ce of ``sum(h' * w) + sum(e' * v)``."""
    gen = torch.Generator().manual_seed(seed)
    proj = torch.randn(graph.num_nodes(), 4 * dim, generator=gen, dtype=dtype).requires_grad_()
    ce = torch.randn(graph.num_edges(), dim, generator=gen, dtype=dtype).requires_grad_()
    w, v = torch.randn(graph.num_nodes(), dim, generator=gen, dtype=dtype), torch.randn(ce.shape, generator=gen, dtype=dtype)
    with contextlib.nullcontext() if fused else _fused.disabled():
        assert _fused.usable(proj) == fused
        h_new, e_new = gated_gcn_messages(graph, proj, ce)
        grads = torch.autograd.grad((h_new * w).sum() + (e_new * v).sum(), [proj, ce])
    return [h_new.detach(), e_new.detach(), *grads]


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("dim", [1, 5, 8, 19])  # around the vector width (8 floats, 4 doubles)
def test_gated_gcn_paths_agree(dim, dtype):
    graph = dgl.add_nodes(power_law_graph(seed=14), 3)  # hubs, nodes without in- or out-edges, loops
    fused = assert_runs_agree(gated_gcn_run, graph, dtype, dim=dim)
    pure = gated_gcn_run(graph, dtype, False, dim=dim)
    assert torch.equal(fused[1], pure[1])  # e' = (D h_i + E h_j) + C e: the same adds in the same order
    lonely, proj = graph.in_degrees() == 0, torch.randn(graph.num_nodes(), 4 * dim, dtype=dtype,
                                                          generator=torch.Generator().manual_seed(0))
    assert torch.equal(fused[0][lonely], proj[lonely, :dim])  # no in-edges: h' = A h exactly
    sources = graph.out_degrees() == 0
    assert bool((fused[2][sources, dim:3 * dim] == 0).all())  # no out-edges: no gradient of B h or D h


def test_gated_gcn_on_int32_graphs():
    assert_runs_agree(gated_gcn_run, power_law_graph(seed=15).int(), torch.float64)


def test_gated_gcn_thread_counts_agree():
    """Every node's and edge's value and gradient is one sum in one order, whatever the thread count."""
    graph = power_law_graph(seed=6, nodes=1500)
    assert graph.num_edges() * 16 > 32768  # ATen's GRAIN_SIZE: smaller graphs run on one thread
    results = []
    for threads in (1, 3):
        torch.set_num_threads(threads)
        results.append(gated_gcn_run(graph, torch.float64, True, dim=16))
    for one, several in zip(*results):
        assert torch.equal(one, several)
