"""Speed and peak-memory benchmark of the edge normalisers: ``python tools/benchmark.py ops``.

Every (graph size, op) is measured in a fresh Python subprocess with the same environment:
the same power-law graph and float32 logits are built, one warm-up forward+backward is run,
then ``repeats`` timed forwards and forward+backwards (median wall clock), then the peak
resident memory of one more forward+backward above the resident memory just before it
(Linux ``VmHWM`` after resetting it through ``/proc/self/clear_refs``).
``MALLOC_MMAP_THRESHOLD_`` is fixed for all ops so that glibc maps every tensor above it on
its own and returns it when freed: the resident set then follows the live tensors.
"""
import json
import os
import re
import statistics
import subprocess
import sys
import time
from pathlib import Path

import dgl
import torch
from dgl.nn.functional import edge_softmax

from . import edge_entmax, edge_qsoftmax, edge_sparsemax

OPS = ("edge_softmax", "edge_qsoftmax", "edge_entmax", "edge_sparsemax", "padded_entmax_bisect")
MMAP_THRESHOLD = 1 << 16


def power_law_graph(num_edges, exponent=2.5, avg_degree=8, seed=0):
    """Random graph (Chung-Lu) whose in-degrees follow ``P(k) ~ k^-exponent``; sources uniform."""
    gen = torch.Generator().manual_seed(seed)
    nodes = max(1, num_edges // avg_degree)
    weight = torch.arange(1, nodes + 1, dtype=torch.float64).pow(-1 / (exponent - 1))
    dst = torch.multinomial(weight, num_edges, replacement=True, generator=gen)
    src = torch.randint(0, nodes, (num_edges,), generator=gen)
    return dgl.graph((src, dst), num_nodes=nodes)


def _padding(graph):
    """Row (destination) and column (rank among its in-edges) of every edge in a padded block."""
    dst = graph.edges()[1]
    degree = graph.in_degrees()
    order = torch.argsort(dst, stable=True)
    start = torch.cumsum(degree, 0) - degree
    col = torch.empty_like(dst)
    col[order] = torch.arange(len(dst)) - start[dst[order]]
    row = (torch.cumsum((degree > 0).long(), 0) - 1)[dst]
    return row, col, (int((degree > 0).sum()), int(degree.max()))


def padded_bytes(graph, heads, itemsize=4):
    """Bytes of one ``[num_dst, max_degree, heads]`` block."""
    degree = graph.in_degrees()
    return int((degree > 0).sum()) * int(degree.max()) * heads * itemsize


def _make_op(name, graph, heads):
    """A closure logits -> weights, with learned per-head q / alpha (tensors requiring grad)."""
    param = torch.full((heads,), 1.5, requires_grad=True)
    if name == "edge_softmax":
        return lambda z: edge_softmax(graph, z)
    if name == "edge_qsoftmax":
        return lambda z: edge_qsoftmax(graph, z, param)
    if name == "edge_entmax":
        return lambda z: edge_entmax(graph, z, param)
    if name == "edge_sparsemax":
        return lambda z: edge_sparsemax(graph, z)
    import entmax  # the naive peer: dense entmax_bisect over [num_dst, max_degree, H]

    row, col, (num_dst, width) = _padding(graph)

    def padded(z):
        block = z.new_full((num_dst, width, heads), float("-inf")).index_put((row, col), z)
        return entmax.entmax_bisect(block, param, dim=1)[row, col]
    return padded


def _rss_kib(field):
    status = Path("/proc/self/status").read_text()
    return int(re.search(rf"{field}:\s+(\d+)", status).group(1))


def measure(name, num_edges, heads, repeats):
    """Run in the worker process: median times (ms) and peak memory (MiB) of one op."""
    torch.manual_seed(0)
    graph = power_law_graph(num_edges)
    graph.create_formats_()
    op = _make_op(name, graph, heads)
    z = torch.randn(num_edges, heads, requires_grad=True)
    grad = torch.randn(num_edges, heads)

    def step(backward):
        out = op(z)
        if backward:
            out.backward(grad)
            z.grad = None

    step(True)
    times = {}
    for key, backward in (("fwd_ms", False), ("fwd_bwd_ms", True)):
        samples = []
        for _ in range(repeats):
            start = time.perf_counter()
            step(backward)
            samples.append(1e3 * (time.perf_counter() - start))
        times[key] = statistics.median(samples)
    Path("/proc/self/clear_refs").write_text("5")
    base = _rss_kib("VmRSS")
    step(True)
    return {**times, "peak_mib": (_rss_kib("VmHWM") - base) / 1024}


def _run_worker(name, num_edges, heads, repeats):
    env = {**os.environ, "MALLOC_MMAP_THRESHOLD_": str(MMAP_THRESHOLD),
           "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    args = json.dumps([name, num_edges, heads, repeats])
    done = subprocess.run([sys.executable, "-m", "zoo.ops.benchmark", args], env=env,
                          capture_output=True, text=True)
    if done.returncode:
        return {"error": done.stderr.strip().splitlines()[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(name, res, ref):
    if "skip" in res or "error" in res:
        return f"  {name:22s} {res.get('skip') or res['error']}"
    ratios = [res[k] / ref[k] for k in ("fwd_ms", "fwd_bwd_ms", "peak_mib")]
    return (f"  {name:22s} {res['fwd_ms']:9.1f} {res['fwd_bwd_ms']:11.1f} {res['peak_mib']:9.1f}"
            f"   {ratios[0]:6.2f} {ratios[1]:8.2f} {ratios[2]:6.2f}")


def run(edges=(10**4, 10**5, 10**6), heads=8, repeats=5, memory_fraction=0.5):
    """Print the benchmark table (one fresh subprocess per size and op)."""
    print(f"zoo.ops benchmark: power-law in-degrees (P(k) ~ k^-2.5, mean 8), float32, {heads} heads, "
          f"torch {torch.__version__} ({torch.get_num_threads()} threads), dgl {dgl.__version__}")
    print(f"q and alpha: learned per-head tensors = 1.5 (their gradients included); medians of "
          f"{repeats} runs after one warm-up, one fresh process per op and size")
    print(f"peak = resident-set high-water mark of one fwd+bwd above the resident set before it; "
          f"allocator: glibc with MALLOC_MMAP_THRESHOLD_={MMAP_THRESHOLD} for every op")
    available = _available_bytes()
    for num_edges in edges:
        graph = power_law_graph(num_edges)
        degree = graph.in_degrees()
        print(f"\nE = {num_edges:.0e}: {graph.num_nodes()} nodes, max in-degree {int(degree.max())}")
        print(f"  {'op':22s} {'fwd ms':>9s} {'fwd+bwd ms':>11s} {'peak MiB':>9s}   "
              f"{'fwd x':>6s} {'f+b x':>8s} {'mem x':>6s}   (x = ratio to edge_softmax)")
        ref = None
        for name in OPS:
            need = 8 * padded_bytes(graph, heads)
            if name.startswith("padded") and need > memory_fraction * available:
                res = {"skip": f"skipped: [num_dst, max_degree, H] blocks need ~{need / 2**30:.0f} GiB"}
            else:
                res = _run_worker(name, num_edges, heads, repeats)
            ref = ref or res
            print(_row(name, res, ref), flush=True)


def _available_bytes():
    meminfo = Path("/proc/meminfo").read_text()
    return 1024 * int(re.search(r"MemAvailable:\s+(\d+)", meminfo).group(1))


if __name__ == "__main__":
    print(json.dumps(measure(*json.loads(sys.argv[1]))))
