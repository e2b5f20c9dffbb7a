"""tools/benchmark.py and its harnesses in tools/benchmarks/ (tiny sizes: no timing is asserted)."""
import re
from pathlib import Path

import pytest
import torch

from tests.tools.tool_loader import load_tool
from tools.benchmarks import ops as ops_benchmark
from tools.benchmarks.models import benchmark_gps, benchmark_layers
from zoo.ops import _fused

benchmark_cli = load_tool("benchmark")


def _rows(out: str) -> dict[str, tuple[str, str]]:
    """``| name | ms | ratio |`` table rows as name -> (ms, ratio) strings."""
    return {m[1]: (m[2], m[3]) for m in re.finditer(r"^\| ([^|]+?) \| ([\d.]+) \| ([\d.]+) \|$", out, re.M)}


def test_layers_and_gps_ratios_are_to_the_named_peer(capsys):
    for run, peer, names in ((lambda: benchmark_layers(nodes=60, edges=300, feats=16, repeats=1), "gatv2",
                              {"gatv2", "ltga_head", "ltga_edge"}),
                             (lambda: benchmark_gps(batch_size=2, repeats=1), "gps", {"gps", "siggate_gt"})):
        ms = run()
        out = capsys.readouterr().out
        assert set(ms) == names and f"ratio to {peer} |" in out
        assert _rows(out) == {name: (f"{value:.1f}", f"{value / ms[peer]:.3f}") for name, value in ms.items()}


def test_cli_gps_one_block_rows_on_wide_molecules(capsys, monkeypatch):
    from zoo.nn import gated_attention
    seen = []  # the size groups of each attention call that took the grouped path
    real = gated_attention.dense_batch_groups

    def spy(g, device):
        groups = real(g, device)
        if groups is not None:
            seen.append(len(groups))
        return groups
    monkeypatch.setattr(gated_attention, "dense_batch_groups", spy)
    assert benchmark_cli.main(["gps", "--models", "siggate_gt", "--batch-size", "3", "--atoms", "40-90",
                               "--one-block", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "batches of 3 random molecules (40-90 atoms)" in out and "| siggate_gt (one block) |" in out
    # 10 layers x (2 warm-up + 1 timed) steps of the grouped row; the one-block row adds none
    assert len(seen) == 30 and all(n > 1 for n in seen)
    assert gated_attention.GROUP_MIN_WIDTH == 32  # restored after the one-block steps


def test_cli_gps_min_width_rows_group_from_that_width_on_the_cpu_clock(capsys, monkeypatch):
    from zoo.nn import gated_attention
    seen = []  # (GROUP_MIN_WIDTH, group count) of each attention call
    real = gated_attention.dense_batch_groups

    def spy(g, device):
        groups = real(g, device)
        seen.append((gated_attention.GROUP_MIN_WIDTH, 1 if groups is None else len(groups)))
        return groups
    monkeypatch.setattr(gated_attention, "dense_batch_groups", spy)
    # molecules of 20-60 atoms: from 32 nodes they split into groups, from 64 they form one block;
    # both rows step one model with the recipe's flat-buffer AdamW (a second optimizer would orphan it)
    assert benchmark_cli.main(["gps", "--recipe", "recipes/zinc_siggate.yaml", "--models", "siggate_gt",
                               "--batch-size", "4", "--atoms", "20-60", "--min-width", "64", "--clock", "cpu",
                               "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "| model | CPU ms / training step (median) |" in out
    assert set(_rows(out)) == {"siggate_gt", "siggate_gt (groups from 64)"}
    assert {width for width, _ in seen} == {32, 64}
    assert all(count > 1 for width, count in seen if width == 32)
    assert all(count == 1 for width, count in seen if width == 64)
    assert gated_attention.GROUP_MIN_WIDTH == 32


def test_cli_gps_pure_ops_rows_run_gated_gcn_without_the_fused_kernels(capsys, monkeypatch):
    from zoo.ops import gated_gcn
    seen = []  # whether the fused kernels were usable at each GatedGCN message passing
    real = gated_gcn.gated_gcn_messages

    def spy(graph, proj, ce):
        seen.append(_fused.usable(proj))
        return real(graph, proj, ce)
    monkeypatch.setattr("zoo.nn.gps_layer.gated_gcn_messages", spy)
    assert benchmark_cli.main(["gps", "--recipe", "recipes/zinc_siggate.yaml", "--models", "gps", "--batch-size", "2",
                               "--pure-ops", "--repeats", "1"]) == 0
    assert set(_rows(capsys.readouterr().out)) == {"gps", "gps (pure-torch ops)"}
    # 10 layers x (2 warm-up + 1 timed) steps of each row; the fused kernels are back on afterwards
    built = _fused.kernels() is not None
    assert (seen.count(True), seen.count(False)) == ((30, 30) if built else (0, 60))
    assert _fused.usable(torch.zeros(1)) == built


def test_cpu_clock_counts_cpu_time_not_sleep():
    import time

    from tools.benchmarks.models import _median_step_ms
    # a sleep takes no CPU; the margin leaves room for the process's other threads (e.g. OpenMP spinning)
    ms = _median_step_ms({"sleep": lambda: time.sleep(0.2)}, repeats=1, warmup=0, clock="cpu")
    wall = _median_step_ms({"sleep": lambda: time.sleep(0.2)}, repeats=1, warmup=0, clock="wall")
    assert ms["sleep"] < 100 < 200 <= wall["sleep"]


def test_cli_layers_with_sparse_features(capsys):
    assert benchmark_cli.main(["layers", "--nodes", "60", "--edges", "300", "--features", "40", "--repeats", "1",
                               "--density", "0.05"]) == 0
    out = capsys.readouterr().out
    assert set(_rows(out)) == {"gatv2", "ltga_head", "ltga_edge", "ltga_head_sparse"}
    assert "0/1 bag-of-words at density 0.05" in out


def test_cli_aggregate_table(capsys):
    assert benchmark_cli.main(["aggregate", "--nodes", "50", "--edges", "200", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    fused = {"edge_weighted_sum, fused"} if _fused.kernels() is not None else set()
    assert set(_rows(out)) == {"dgl_update_all", "edge_weighted_sum, pure torch"} | fused
    assert "ms / forward+backward" in out


def test_cli_logits_table(capsys):
    assert benchmark_cli.main(["logits", "--nodes", "50", "--edges", "200", "--features", "4", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    fused = {"edge_gatv2_logits, fused"} if _fused.kernels() is not None else set()
    assert set(_rows(out)) == {"materialised", "edge_gatv2_logits, pure torch"} | fused and "8 heads x 4" in out


def test_cli_logits_without_the_materialised_path_compares_to_pure_torch(capsys):
    assert benchmark_cli.main(["logits", "--nodes", "50", "--edges", "200", "--features", "4", "--repeats", "1",
                               "--without-materialised"]) == 0
    out = capsys.readouterr().out
    rows = _rows(out)
    assert "materialised" not in rows and rows["edge_gatv2_logits, pure torch"][1] == "1.000"
    assert "ratio to edge_gatv2_logits, pure torch" in out


def test_cli_logits_times_each_chunk_size_asked_for(capsys):
    assert benchmark_cli.main(["logits", "--nodes", "50", "--edges", "200", "--features", "4", "--repeats", "1",
                               "--chunk-powers", "4", "10"]) == 0
    rows = set(_rows(capsys.readouterr().out))
    assert {"edge_gatv2_logits, pure torch 2^4", "edge_gatv2_logits, pure torch 2^10"} < rows


def test_ops_worker_times_each_op_in_a_fresh_process():
    result = ops_benchmark._worker(ops_benchmark.TIME_ENV, "time_ops", ["edge_softmax", "edge_entmax"], 2000, 2, 1)
    assert set(result) == {"edge_softmax", "edge_entmax"}
    assert all(set(times) == {"fwd_ms", "fwd_bwd_ms"} for times in result.values())


def test_gps_train_step_with_a_recipe_clips_as_the_trainer_does():
    import torch

    from tools.benchmarks.models import _train_step
    from zoo.engine.recipe import OptimConfig

    for optim, clipped in ((OptimConfig(optimizer="adamw", clip_grad_norm=1.0), True), (None, False)):
        model = torch.nn.Linear(3, 1)
        _train_step(model, lambda m: 100.0 * m(torch.ones(4, 3)).sum(), optim)()
        norm = torch.linalg.vector_norm(torch.cat([p.grad.flatten() for p in model.parameters()]))
        assert (norm <= 1.0 + 1e-5) == clipped  # unclipped, the gradient norm is 400 * sqrt(4)


def test_pyg_peer_without_torch_geometric_is_one_error_line(monkeypatch):
    import sys

    import pytest

    monkeypatch.setitem(sys.modules, "torch_geometric.nn", None)  # import fails as if not installed
    with pytest.raises(SystemExit, match="pip install torch-geometric==2.6.1"):
        benchmark_cli.main(["gps", "--batch-size", "2", "--repeats", "1", "--peer", "pyg"])


def test_pyg_peer_has_the_zoo_models_parameter_count_and_trains(capsys):
    import pytest

    pytest.importorskip("torch_geometric", reason="optional bench extra: pip install torch-geometric==2.6.1")
    ms = benchmark_gps(batch_size=2, repeats=1, peer="pyg")
    out = capsys.readouterr().out
    assert set(ms) == {"pyg_gpsconv", "gps", "siggate_gt"} and "ratio to pyg_gpsconv |" in out
    counts = dict(re.findall(r"(\w+) (\d+)", out.split("parameters: ")[1]))
    assert counts["pyg_gpsconv"] == counts["gps"]


def test_gps_normaliser_times_the_sparsegate_model_after_the_others(capsys):
    assert benchmark_cli.main(["gps", "--batch-size", "2", "--repeats", "1", "--models", "siggate_gt",
                               "--normaliser", "qsoftmax"]) == 0
    out = capsys.readouterr().out
    assert list(_rows(out)) == ["siggate_gt", "sparsegate_gt_qsoftmax"] and "ratio to siggate_gt |" in out


def test_gps_train_step_with_a_recipe_steps_a_learned_q_with_its_own_optimiser():
    import torch

    from tools.benchmarks.models import _train_step, random_molecules
    from zoo.engine.recipe import OptimConfig
    from zoo.models import create_model

    model = create_model("sparsegate_gt", dim=16, heads=2, layers=1, local="gine", pe="rwse", rwse_k=20, dim_pe=4)
    batch = random_molecules(2)
    (a,) = model.index_parameters()
    _train_step(model, lambda m: m(batch).sum(), OptimConfig(optimizer="adamw", q_lr=0.1))()
    assert torch.all(a.abs() > 0.05) and a.grad is None  # one Adam step of about q_lr, then zeroed


def test_cli_scale_prints_seeds_per_second_and_peak_rss(capsys):
    """A tiny graph in a fresh worker process: 400 nodes, 200 of them training nodes, all in one
    batch of the recipe's 1024 (the timed batch of epoch 1)."""
    assert benchmark_cli.main(["scale", "--nodes", "400", "--modes", "sampled", "--batches", "1"]) == 0
    header, row = capsys.readouterr().out.splitlines()[-2:]
    assert header.split() == ["nodes", "mode", "seeds/s", "seeds", "seconds", "peak", "GiB", "total", "GiB"]
    nodes, mode, rate, seeds, seconds, peak, total = row.split()
    assert (nodes, mode, seeds) == ("400", "sampled", "200")
    assert float(rate.replace(",", "")) > 0 and float(seconds) >= 0
    assert float(peak) == float(total) > 0.1  # one process: an interpreter with torch and DGL is > 100 MiB


def test_scale_rows_name_a_failed_run():
    from tools.benchmarks.scale import HEADER, format_row
    row = format_row(10**6, "full", {"error": "exit code -9 (killed: out of memory?)"})
    assert row.split()[:2] == ["1,000,000", "full"] and row.endswith("out of memory?)")
    ok = format_row(10**5, "ranks2", {"seeds_per_s": 1234.5, "seeds": 20480, "seconds": 16.59, "peak_rss_gib": 1.5,
                                      "total_rss_gib": 3.0})
    assert ok.split() == ["100,000", "ranks2", "1,234", "20,480", "16.59", "1.50", "3.00"]
    assert len(HEADER.split()) == len(ok.split()) + 2  # "peak GiB", "total GiB" are two words each


def test_gps_on_real_batches_steps_through_the_trainers_training_batches(offline_env, capsys):
    """--dataset times the models on the card's training batches (seed 0), built for its targets and
    featurizer: the title's mean size is that of the first repeats + 2 batches the trainer's loader
    gives, computed here independently."""
    from zoo.data import load_graph_dataset, make_dataloaders

    assert benchmark_cli.main(["gps", "--models", "siggate_gt", "--batch-size", "8", "--dataset", "freesolv",
                               "--repeats", "2"]) == 0
    out = capsys.readouterr().out
    data = load_graph_dataset("freesolv", seed=0, progress=False)
    batches = [graphs for (graphs, _), _ in zip(make_dataloaders(data, 8, seed=0)["train"], range(4))]
    mean = sum(g.num_nodes() / g.batch_size for g in batches) / len(batches)
    assert f"batches of 8 freesolv training graphs (mean {mean:.1f} nodes over the timed batches)" in out
    assert "| siggate_gt |" in out


def test_real_batch_loss_takes_the_next_batch_at_every_step():
    from tools.benchmarks.models import _real_batch_loss

    seen = []
    batches = [(f"graphs{i}", torch.tensor([[float(i)]])) for i in range(3)]
    loss = _real_batch_loss(batches, "graph_regression")
    values = [float(loss(lambda graphs: seen.append(graphs) or torch.zeros(1, 1))) for _ in range(4)]
    assert seen == ["graphs0", "graphs1", "graphs2", "graphs0"] and values == [0.0, 1.0, 2.0, 0.0]  # L1 to 0


@pytest.mark.parametrize("argv, message", [
    (["gps", "--dataset", "molhvi"], "No dataset card named 'molhvi'"),
    (["gps", "--recipe", "recipes/nope.yaml"], "recipe file not found: recipes/nope.yaml"),
    (["gps", "--recipe", "recipes/cora_gat.yaml"], "is not a siggate_gt recipe; give one such as"),
    (["gps", "--min-width", "0"], "--min-width '0' is not a width in nodes; give a whole number such as 64"),
    (["gps", "--atoms", "40-4"], "--atoms '40-4' is not a molecule size; give N or LOW-HIGH"),
    (["allocator", "--atoms", "many"], "--atoms 'many' is not a molecule size; give N or LOW-HIGH"),
    (["allocator", "--jemalloc", "/nowhere/libjemalloc.so.2"], "--jemalloc /nowhere/libjemalloc.so.2: no such file"),
    (["allocator", "--batches", "0"], "--batches 0: give at least 1 batch"),
])
def test_bad_gps_inputs_are_one_error_line(argv, message, capsys):
    assert benchmark_cli.main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and message in err and "Traceback" not in err


SIGGATE_RECIPES = sorted((Path(__file__).resolve().parents[2] / "recipes").glob("*_siggate.yaml"))


def test_the_siggate_recipes_are_found():
    assert len(SIGGATE_RECIPES) >= 6


@pytest.mark.parametrize("recipe", SIGGATE_RECIPES, ids=[path.stem for path in SIGGATE_RECIPES])
def test_gps_configs_of_every_siggate_recipe_build_both_models(recipe):
    """The ungated row drops exactly the gate's keys: ``gate_weight_init`` (added to the recipes
    after the benchmark's own list of gate keys) once made ``--recipe`` with ``--models gps`` fail."""
    from tools.benchmarks.models import gps_configs
    from zoo.models.registry import check_model_arguments

    ungated, gated = gps_configs(str(recipe))
    assert set(gated) - set(ungated) == {key for key in gated if key.startswith("gate")}
    check_model_arguments("gps", **ungated)
    check_model_arguments("siggate_gt", **gated)
