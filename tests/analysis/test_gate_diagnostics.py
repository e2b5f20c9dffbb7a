"""SigGate-GT diagnostics against hand-computed cases, a hand-set gate and a dense float64
re-computation of every layer's attention, gate, stable rank and MAD from its recorded input."""
import re
import sys

import dgl
import numpy as np
import pytest
import torch
from sklearn.metrics import pairwise_distances

from tools.benchmarks.models import random_molecules
from zoo import _progress
from zoo.analysis.gate_diagnostics import _by_size, gate_diagnostics, graph_stable_ranks, stable_rank
from zoo.models import create_model


def _molecules():
    """Graphs of 9, 9, 14 and 14 nodes, so the dense blocks are padded."""
    return dgl.batch([random_molecules(2, atoms=9, bonds=10, seed=1), random_molecules(2, atoms=14, bonds=16, seed=2)])


def test_stable_rank_by_hand():
    assert stable_rank(torch.diag(torch.tensor([2.0, 1.0]))) == pytest.approx((4 + 1) / 4)
    assert stable_rank(torch.zeros(3, 2)) == 0.0


def test_graph_stable_ranks_match_numpy_svd_per_graph():
    gen = torch.Generator().manual_seed(0)
    heads = torch.randn(3, 2, 8, 4, generator=gen)  # rows past each graph's size are padding noise
    sizes = [5, 2, 7]
    mask = torch.arange(7)[None, :] < torch.tensor(sizes)[:, None]
    heads[2, 1] = 0.0  # a dead head: no stable rank
    got = graph_stable_ranks(heads, mask)
    for b, size in enumerate(sizes):
        for h in range(2):
            s = np.linalg.svd(heads[b, h, :size].double().numpy(), compute_uv=False)
            want = (s**2).sum() / s[0] ** 2 if s[0] > 0 else np.nan
            assert got[b, h].item() == pytest.approx(want, rel=1e-10, nan_ok=True)


def test_gate_statistics_follow_a_hand_set_gate():
    torch.manual_seed(0)
    model = create_model("siggate_gt", dim=16, heads=2, layers=2, local="gine", pe="rwse", rwse_k=20, dim_pe=4)
    for layer in model.gps_layers():  # W_g = 0, b = 3 -> every gate is sigmoid(3) = 0.9526
        torch.nn.init.constant_(layer.attn.gate_proj.bias, 3.0)
    batch = _molecules()
    report = gate_diagnostics(model, [(batch, None)])
    assert len(report) == 2
    for row in report:
        assert row["gate_mean"] == pytest.approx(float(torch.sigmoid(torch.tensor(3.0))), rel=1e-6)
        assert row["gate_sd"] == pytest.approx(0.0, abs=1e-6)
        assert row["gate_above_0.9"] == 1.0 and row["gate_below_0.1"] == 0.0
        assert row["gate_count"] == batch.num_nodes() * 16 and row["graphs"] == 4
        # a constant gate c scales every head's output by c: the stable rank does not change
        assert row["stable_rank"] == pytest.approx(row["stable_rank_ungated"], rel=1e-6)
        assert 0 < row["attention_entropy"] <= np.log(14)
    assert all(layer.attn.record is False for layer in model.gps_layers())


def test_ungated_model_has_no_gate_statistics():
    model = create_model("gps", dim=16, heads=2, layers=1, local="none", pe="rwse", rwse_k=20, dim_pe=4)
    (row,) = gate_diagnostics(model, [(random_molecules(2), None)])
    assert "gate_mean" not in row and row["stable_rank"] == pytest.approx(row["stable_rank_ungated"])


def _dense_reference(layer, g, h: torch.Tensor) -> dict:
    """The layer's attention statistics recomputed graph by graph in float64 from its input ``h``:
    softmax(Q K^T / sqrt(d_k)) V per head, the sigmoid output gate, entropies, stable ranks (SVD)."""
    attn = layer.attn
    heads, d_k = attn.heads, attn.head_dim
    w_in, b_in = attn.in_proj.weight.detach().double(), attn.in_proj.bias.detach().double()
    w_g, b_g = attn.gate_proj.weight.detach().double(), attn.gate_proj.bias.detach().double()
    entropy, gates, ranks, ranks_ungated = [[] for _ in range(heads)], [], [], []
    start = 0
    for size in g.batch_num_nodes().tolist():
        x = h[start:start + size].double()
        start += size
        q, k, v = (x @ w_in.T + b_in).split(attn.dim, dim=1)
        gate = torch.sigmoid(x @ w_g.T + b_g)
        gates.append(gate.numpy())
        for head in range(heads):
            cols = slice(head * d_k, (head + 1) * d_k)
            a = torch.softmax(q[:, cols] @ k[:, cols].T / np.sqrt(d_k), dim=1)
            entropy[head].append(-(a * a.log()).sum(1).numpy())
            y = (a @ v[:, cols]).numpy()
            for bucket, matrix in ((ranks_ungated, y), (ranks, y * gate[:, cols].numpy())):
                s = np.linalg.svd(matrix, compute_uv=False)
                bucket.append((s**2).sum() / s[0] ** 2)
    return {"entropy": np.array([np.concatenate(rows) for rows in entropy]), "gate": np.concatenate(gates), "stable_rank": np.mean(ranks),
            "stable_rank_ungated": np.mean(ranks_ungated)}


def _mad(h: np.ndarray, sizes) -> float:
    """Chen et al.'s MAD per graph with scikit-learn's cosine distances (no equal rows here)."""
    means, start = [], 0
    for size in sizes:
        d = pairwise_distances(h[start:start + size], metric="cosine")
        start += size
        means += list(d.sum(1) / (size - 1))
    return float(np.mean(means))


def test_diagnostics_match_a_dense_float64_reference():
    torch.manual_seed(1)
    model = create_model("siggate_gt", dim=16, heads=2, layers=2, local="gine", pe="rwse", rwse_k=20, dim_pe=4,
                         attn_dropout=0.0)
    for layer in model.gps_layers():  # an input-dependent gate spread over (0, 1)
        torch.nn.init.normal_(layer.attn.gate_proj.weight, std=0.5)
    batch = _molecules()
    inputs, outputs = [], []
    hooks = [handle for layer in model.gps_layers() for handle in (
        layer.register_forward_pre_hook(lambda m, args: inputs.append(args[1].detach())),
        layer.register_forward_hook(lambda m, args, out: outputs.append(out[0].detach())))]
    model.eval()
    with torch.no_grad():
        model(batch)
    for handle in hooks:
        handle.remove()
    sizes = batch.batch_num_nodes().tolist()
    # batches of three graphs and one (regrouped by size, still three to a batch: 9, 9 and 14 nodes
    # padded together): the sums must pool over batches as over one
    halves = [dgl.batch(dgl.unbatch(batch)[:3]), dgl.batch(dgl.unbatch(batch)[3:])]
    report = gate_diagnostics(model, [(part, None) for part in halves])
    for layer, row, h_in, h_out in zip(model.gps_layers(), report, inputs, outputs):
        want = _dense_reference(layer, batch, h_in)
        # float32 model against float64 reference: weights and entropies agree to ~1e-6
        assert row["attention_entropy"] == pytest.approx(want["entropy"].mean(), abs=1e-5)
        assert row["attention_entropy_per_head"] == pytest.approx(list(want["entropy"].mean(1)), abs=1e-5)
        gate = want["gate"]
        assert row["gate_mean"] == pytest.approx(gate.mean(), abs=1e-6)
        assert row["gate_sd"] == pytest.approx(gate.std(), abs=1e-6)
        assert row["gate_count"] == gate.size
        for key, threshold, side in (("gate_below_0.1", 0.1, np.less), ("gate_above_0.9", 0.9, np.greater)):
            borderline = np.mean(np.abs(gate - threshold) < 1e-5)  # float32 may round these either way
            assert abs(row[key] - np.mean(side(gate, threshold))) <= borderline
        assert 0 < gate.min() and gate.max() < 1 and row["gate_sd"] > 0.05
        per_head = gate.reshape(-1, 2, 8).mean((0, 2))
        assert row["gate_mean_per_head"] == pytest.approx(list(per_head), abs=1e-6)
        assert row["stable_rank"] == pytest.approx(want["stable_rank"], rel=1e-4)
        assert row["stable_rank_ungated"] == pytest.approx(want["stable_rank_ungated"], rel=1e-4)
        assert row["mad_in"] == pytest.approx(_mad(h_in.double().numpy(), sizes), rel=1e-5)
        assert row["mad"] == pytest.approx(_mad(h_out.double().numpy(), sizes), rel=1e-5)


def test_exact_zeros_count_real_pairs_only_per_graph_and_head():
    torch.manual_seed(2)
    model = create_model("sparsegate_gt", dim=16, heads=2, layers=2, local="gine", pe="rwse", rwse_k=20, dim_pe=4,
                         attn_dropout=0.0, normaliser="sparsemax")
    for layer in model.gps_layers():  # sharp scores, so sparsemax cuts some keys and keeps others
        torch.nn.init.normal_(layer.attn.in_proj.weight, std=2.0)
    batch = _molecules()
    graphs = dgl.unbatch(batch)
    # reference: each graph alone (no padding at all), zeros counted per head in numpy
    zeros, pairs = np.zeros((2, 2)), 0
    model.eval()
    for graph in graphs:
        for layer in model.gps_layers():
            layer.attn.record = True
        with torch.no_grad():
            model(graph)
        n = graph.num_nodes()
        for i, layer in enumerate(model.gps_layers()):
            weights = layer.attn.last_attn[0, :, :n, :n].numpy()  # [H, n, n], one graph
            zeros[i] += (weights == 0).sum((1, 2))
            layer.attn.record = False
        pairs += n * n
    halves = [dgl.batch(graphs[:3]), dgl.batch(graphs[3:])]  # graphs of 9 and 14 nodes padded together
    report = gate_diagnostics(model, [(part, None) for part in halves])
    for row, want in zip(report, zeros):
        assert row["attention_zeros_per_head"] == pytest.approx(list(want / pairs), abs=1e-12)
        assert row["attention_zeros"] == pytest.approx(want.sum() / (2 * pairs), abs=1e-12)
    assert 0 < report[0]["attention_zeros"] < 1 and "q" not in report[0] and "alpha" not in report[0]


def test_graphs_are_regrouped_by_size_in_batches_as_large_as_the_first():
    sizes = [14, 5, 9, 30, 7, 9, 21]
    graphs = [random_molecules(1, atoms=n, bonds=n, seed=n) for n in sizes]
    loader = [(dgl.batch(graphs[:3]), None), (dgl.batch(graphs[3:5]), None), (dgl.batch(graphs[5:]), None)]
    regrouped = _by_size(loader, None)
    assert [[g.num_nodes() for g in chunk] for chunk in regrouped] == [[5, 7, 9], [9, 14, 21], [30]]
    assert [[g.num_nodes() for g in chunk] for chunk in _by_size(loader, 2)] == [[5, 7, 9], [14, 30]]
    feats = sorted(dgl.unbatch(dgl.batch(graphs)), key=lambda g: g.num_nodes())
    for got, want in zip([g for chunk in regrouped for g in chunk], feats):
        assert all(torch.equal(got.ndata[key], want.ndata[key]) for key in want.ndata)


def test_progress_counts_the_graphs_done(capsys, monkeypatch):
    """Seven graphs regrouped into chunks of 3, 3 and 1: in a log (LINE_EVERY 0), a line after each
    chunk but the last, under the given label; the same rows as without progress; nothing unasked."""
    monkeypatch.setattr(sys.stderr, "isatty", lambda: False)
    monkeypatch.setattr(_progress, "LINE_EVERY", 0.0)
    graphs = [random_molecules(1, atoms=n, bonds=n, seed=n) for n in (14, 5, 9, 30, 7, 9, 21)]
    loader = [(dgl.batch(graphs[:3]), None), (dgl.batch(graphs[3:5]), None), (dgl.batch(graphs[5:]), None)]
    model = create_model("siggate_gt", dim=16, heads=2, layers=1, local="gine", pe="rwse", rwse_k=20, dim_pe=4)
    shown = gate_diagnostics(model, loader, progress="diagnostics, test split")
    lines = [re.sub(r"[0-9]+ s$", "N s", line) for line in capsys.readouterr().err.splitlines()]
    assert lines == ["diagnostics, test split: 3/7 graphs, N s", "diagnostics, test split: 6/7 graphs, N s"]
    assert gate_diagnostics(model, loader) == shown and capsys.readouterr().err == ""


def test_rows_carry_the_layer_index_per_head():
    torch.manual_seed(3)
    model = create_model("sparsegate_gt", dim=16, heads=2, layers=2, local="gine", pe="rwse", rwse_k=20, dim_pe=4,
                         normaliser="qsoftmax", q_mode="head")
    with torch.no_grad():
        model.gps_layers()[1].attn.q_logit.copy_(torch.tensor([0.5, -1.0]))
    report = gate_diagnostics(model, [(_molecules(), None)])
    delta = model.gps_layers()[1].attn.delta
    assert report[0]["q"] == [1.0, 1.0]
    assert report[1]["q"] == pytest.approx([1 + delta * np.tanh(0.5), 1 + delta * np.tanh(-1.0)], abs=1e-6)
    softmax = create_model("siggate_gt", dim=16, heads=2, layers=1, local="gine", pe="rwse", rwse_k=20, dim_pe=4)
    assert "q" not in gate_diagnostics(softmax, [(_molecules(), None)])[0]
