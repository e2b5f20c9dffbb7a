"""Speed and peak-memory benchmark of the edge normalisers: ``python tools/benchmark.py ops``.

Per graph size, one fresh worker process times all ops interleaved (one warm-up, then
``repeats`` rounds of forward, then of forward+backward; medians of wall clock), so that
load from other processes hits them alike; its glibc keeps freed tensors for reuse
(``MALLOC_MMAP_THRESHOLD_`` at its 32 MiB maximum, no trimming). Peak memory: one fresh
process per op and size, in which glibc maps every tensor above 64 KiB on its own
(``MALLOC_MMAP_THRESHOLD_=65536``) so that the resident set follows the live tensors;
after one warm-up, the Linux ``VmHWM`` is reset through ``/proc/self/clear_refs`` and the
peak of one forward+backward above the resident set just before it is reported.
The padded peer (dense ``entmax_bisect`` over ``[num_dst, max_degree, H]``) runs once,
without warm-up, in its own processes, and is skipped where its blocks would not fit.
"""
import importlib.util
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

from zoo.ops import _fused, edge_entmax, edge_qsoftmax, edge_sparsemax

OPS = ("edge_softmax", "edge_qsoftmax", "edge_entmax", "edge_sparsemax")
PEER = "padded_entmax_bisect"
TIME_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 25), "MALLOC_TRIM_THRESHOLD_": str(1 << 40),
            "OMP_WAIT_POLICY": "PASSIVE"}
MEMORY_ENV = {"MALLOC_MMAP_THRESHOLD_": str(1 << 16)}


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


def _setup(names, num_edges, heads):
    """The graph, float32 logits requiring grad, an output gradient and one step per op."""
    torch.manual_seed(0)
    graph = power_law_graph(num_edges)
    graph.create_formats_()
    z = torch.randn(num_edges, heads, requires_grad=True)
    grad = torch.randn(num_edges, heads)

    def stepper(op):
        def step(backward):
            out = op(z)
            if backward:
                out.backward(grad)
                z.grad = None
        return step
    return {name: stepper(_make_op(name, graph, heads)) for name in names}


def time_ops(names, num_edges, heads, repeats):
    """Worker: median forward and forward+backward milliseconds of each op, interleaved."""
    steps = _setup(names, num_edges, heads)
    if PEER not in names:
        for step in steps.values():
            step(True)
    samples = {(name, key): [] for name in names for key in ("fwd_ms", "fwd_bwd_ms")}
    for key, backward in (("fwd_ms", False), ("fwd_bwd_ms", True)):
        for _ in range(repeats):
            for name, step in steps.items():
                start = time.perf_counter()
                step(backward)
                samples[name, key].append(1e3 * (time.perf_counter() - start))
    return {name: {key: statistics.median(samples[name, key]) for key in ("fwd_ms", "fwd_bwd_ms")}
            for name in names}


def peak_memory(name, num_edges, heads):
    """Worker: peak resident MiB of one forward+backward above the resident set before it."""
    step = _setup([name], num_edges, heads)[name]
    if name != PEER:
        step(True)
    Path("/proc/self/clear_refs").write_text("5")
    base = _rss_kib("VmRSS")
    step(True)
    return {"peak_mib": (_rss_kib("VmHWM") - base) / 1024}


def _worker(env, func, *args):
    """Run ``func(*args)`` in a fresh interpreter with ``env`` added; its result or an error."""
    env = {**os.environ, **env, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    done = subprocess.run([sys.executable, "-m", "tools.benchmarks.ops", json.dumps([func, *args])],
                          env=env, capture_output=True, text=True)
    if done.returncode:
        return {"error": (done.stderr.strip().splitlines() or ["killed"])[-1]}
    return json.loads(done.stdout.strip().splitlines()[-1])


def _row(name, res, ref):
    if "skip" in res or "error" in res:
        return f"  {name:22s} {res.get('skip') or res['error']}"
    if "peak_mib" not in ref:
        return f"  {name:22s} {res}"
    ratios = [res[k] / ref[k] for k in ("fwd_ms", "fwd_bwd_ms", "peak_mib")]
    return (f"  {name:22s} {res['fwd_ms']:9.1f} {res['fwd_bwd_ms']:11.1f} {res['peak_mib']:9.1f}"
            f"   {ratios[0]:6.2f} {ratios[1]:8.2f} {ratios[2]:6.2f}")


def run(edges=(10**4, 10**5, 10**6), heads=8, repeats=5, memory_fraction=0.5):
    """Print the benchmark table."""
    env = ", ".join(f"{k}={v}" for k, v in TIME_ENV.items())
    print(f"zoo.ops benchmark: power-law in-degrees (P(k) ~ k^-2.5, mean 8), float32 logits, {heads} heads;"
          f" torch {torch.__version__} ({torch.get_num_threads()} threads), dgl {dgl.__version__};"
          f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs")
    path = ("fused CPU kernels (zoo/ops/csrc)" if _fused.usable(torch.zeros(1, heads))
            else "pure torch on DGL's sparse primitives")
    print(f"edge_qsoftmax, edge_entmax and edge_sparsemax run as: {path}")
    print(f"q, alpha: learned per-head tensors at 1.5 (their gradients included). Times: medians of "
          f"{repeats} interleaved rounds after a warm-up, one process per size, glibc {env}")
    print(f"peak: resident-set high-water mark of one fwd+bwd above the resident set before it, one "
          f"process per op and size, glibc MALLOC_MMAP_THRESHOLD_={MEMORY_ENV['MALLOC_MMAP_THRESHOLD_']}")
    available = _available_bytes()
    for num_edges in edges:
        graph = power_law_graph(num_edges)
        print(f"\nE = {num_edges:.0e}: {graph.num_nodes()} nodes, max in-degree {int(graph.in_degrees().max())}")
        print(f"  {'op':22s} {'fwd ms':>9s} {'fwd+bwd ms':>11s} {'peak MiB':>9s}   "
              f"{'fwd x':>6s} {'f+b x':>8s} {'mem x':>6s}   (x = ratio to edge_softmax)")
        times = _worker(TIME_ENV, "time_ops", OPS, num_edges, heads, repeats)
        need = 8 * padded_bytes(graph, heads)
        if importlib.util.find_spec("entmax") is None:
            peer = {"skip": "skipped: the entmax package is not installed (pip install entmax)"}
        elif need > memory_fraction * available:
            peer = {"skip": f"skipped: its [num_dst, max_degree, H] blocks need ~{need / 2**30:.0f} GiB"}
        else:
            peer = _worker(TIME_ENV, "time_ops", [PEER], num_edges, heads, 1)
            peer = peer.get(PEER, peer)
        results = {**({} if "error" in times else times), PEER: peer}
        for name in OPS + (PEER,):
            res = results.get(name, times)
            if "skip" not in res and "error" not in res:
                res.update(_worker(MEMORY_ENV, "peak_memory", name, num_edges, heads))
            print(_row(name, res, results.get(OPS[0], {})), flush=True)


def _available_bytes():
    meminfo = Path("/proc/meminfo").read_text()
    return 1024 * int(re.search(r"MemAvailable:\s+(\d+)", meminfo).group(1))


if __name__ == "__main__":
    func, *args = json.loads(sys.argv[1])
    print(json.dumps({"time_ops": time_ops, "peak_memory": peak_memory}[func](*args)))
