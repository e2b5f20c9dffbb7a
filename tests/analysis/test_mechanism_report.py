"""The SigGate-GT mechanism tables from hand-written diagnostics: pooled gate statistics, head
spread of the entropy, MAD against depth and the stable-rank gain, each against a hand count."""
import json
import re

import numpy as np
import pytest
import yaml

from tests.tools.tool_loader import ROOT
from zoo.analysis.mechanism_report import (PAPER_DEPTH, PAPER_TABLE_12, PAPER_TABLE_13, PAPER_TABLE_15, depth_pairs,
                                           entropy_table, gate_table, mad_depth_table, mechanism_runs, rank_table,
                                           render_mechanism, sparsity_table)
from zoo.analysis.runs import ReportError, collect_runs

PAPER_TEXT = ROOT.parent / "shared" / "papers" / "siggate_gt.txt"  # the issue's ../shared/papers/siggate_gt.txt
GATED = {"name": "siggate_gt", "gate": "output", "gate_activation": "sigmoid", "gate_per_head": True, "dim": 8}


def _layer(k, mad_in, mad, rank, rank_ungated, entropy, gate=None):
    row = {"layer": k, "split": "test", "graphs": 4, "mad_in": mad_in, "mad": mad, "stable_rank": rank,
           "stable_rank_ungated": rank_ungated, "attention_entropy": float(np.mean(entropy)),
           "attention_entropy_per_head": entropy}
    if gate:
        mean, sd, below, above, count, heads = gate
        row.update({"gate_mean": mean, "gate_sd": sd, "gate_below_0.1": below, "gate_above_0.9": above,
                    "gate_count": count, "gate_mean_per_head": heads})
    return row


def _write(root, name, model, seed, layers, test, config_hash="0123456789"):
    run_dir = root / name / config_hash
    (run_dir / f"seed{seed}").mkdir(parents=True, exist_ok=True)
    config = {"name": name, "dataset": "zinc_smiles", "model": {**model, "layers": len(layers)}, "seeds": [0, 1]}
    (run_dir / "config.yaml").write_text(yaml.safe_dump(config))
    metrics = {"seed": seed, "split": 0, "dataset": "zinc_smiles", "main_metric": "mae",
               "final": {"val": {"mae": test}, "test": {"mae": test}}, "diagnostics": layers}
    (run_dir / f"seed{seed}" / "metrics.json").write_text(json.dumps(metrics))


@pytest.fixture()
def runs(tmp_path):
    root = tmp_path / "runs"
    for seed, shift in ((0, 0.0), (1, 0.1)):
        # 2 layers: 100 gate values at mean 0.8 (sd 0.1, none below 0.1) and 300 at 0.4 (sd 0.2, 20% below)
        _write(root, "zinc_cpu_g1", GATED, seed, [
            _layer(0, 0.9, 0.8, 3.0 + shift, 2.0, [1.0, 2.0], (0.8, 0.1, 0.0, 0.3, 100, [0.7, 0.9])),
            _layer(1, 0.8, 0.6, 4.0, 3.0, [1.5, 1.5], (0.4, 0.2, 0.2, 0.0, 300, [0.3, 0.5]))], 0.5 + shift)
        # the same recipe at depth 3, written under another config hash
        _write(root, "zinc_cpu_depth3_siggate", GATED, seed, [
            _layer(k, 0.9, 0.5 - shift, 2.0, 2.0, [1.0, 1.0], (0.5, 0.1, 0.0, 0.0, 10, [0.5, 0.5])) for k in range(3)],
            0.7, config_hash="abcdefabcd")
        _write(root, "zinc_cpu_no_gate", {"name": "gps", "dim": 8}, seed, [
            _layer(0, 1.0, 0.5, 2.0, 2.0, [2.0, 2.0]), _layer(1, 0.5, 0.25, 2.0, 2.0, [2.0, 2.0])], 0.6)
    return root


def test_gate_table_pools_layers_by_their_counts(runs):
    table = gate_table(mechanism_runs(collect_runs(runs)))
    layer1 = table.loc[("zinc_cpu_g1", "zinc_smiles", "1")]
    assert (layer1["mean"], layer1.head_min, layer1.head_max, layer1.n) == (0.8, 0.7, 0.9, 2)
    avg = table.loc[("zinc_cpu_g1", "zinc_smiles", "avg")]
    # by hand: weights 1/4, 3/4; mean 0.5; E[g^2] = (0.01 + 0.64) / 4 + 3 (0.04 + 0.16) / 4 = 0.3125
    assert avg["mean"] == pytest.approx(0.5) and avg.sd == pytest.approx(0.25)
    assert avg.below == pytest.approx(0.15) and avg.above == pytest.approx(0.075)
    assert (avg.head_min, avg.head_max) == (0.3, 0.9)
    assert "zinc_cpu_no_gate" not in table.index.get_level_values("model")


def test_entropy_depth_and_rank_tables(runs):
    records = mechanism_runs(collect_runs(runs))
    entropy = entropy_table(records)
    assert entropy.loc[("zinc_cpu_g1", "zinc_smiles", 1)].tolist() == pytest.approx([1.5, 0.5, 2])
    depth = mad_depth_table(records)
    gated = depth.xs("siggate_gt output sigmoid per-head", level="variant")
    assert sorted(gated.index.get_level_values("depth")) == [2, 3]
    assert len(set(gated.index.get_level_values("family"))) == 1  # only the depth differs: one row
    two = gated.xs(2, level="depth").iloc[0]
    assert two.mad == pytest.approx(0.6) and two.kept == pytest.approx(1.0)
    assert two.score == pytest.approx(0.55) and two.score_sd == pytest.approx(np.std([0.5, 0.6], ddof=1))
    three = gated.xs(3, level="depth").iloc[0]
    assert three.mad == pytest.approx(0.45) and three.mad_sd == pytest.approx(np.std([0.5, 0.4], ddof=1))
    assert three.kept == pytest.approx(0.45 / 0.6)  # of the shallowest depth's MAD, as the paper's Section 8.3
    ranks = rank_table(records).loc[("zinc_cpu_g1", "zinc_smiles")]
    # seed means over layers: gated 3.5 and 3.55, ungated 2.5 -> +41%
    assert ranks.gated == pytest.approx(3.525) and ranks.ungated == pytest.approx(2.5)
    assert ranks.gain == pytest.approx(100 * (3.525 / 2.5 - 1)) and ranks.up == 2


def test_render_and_old_runs(runs, tmp_path):
    text = render_mechanism(collect_runs(runs))
    for title in ("Table 15", "Table 13", "Table 12", "Tables 1-2"):
        assert title in text
    assert "**zinc_cpu_g1** on zinc_smiles (2 seeds)" in text
    assert "| **avg** | 0.50 | 0.25 | 15.0 | 7.5 | 0.30-0.90 |" in text
    assert "| siggate_gt output sigmoid per-head | MAD | 0.600 ± 0.000 | 0.450 ± 0.071 |" in text
    assert "| siggate_gt output sigmoid per-head | MAD % of 2 layers | 100 | 75 |" in text  # no paper cell at 2, 3
    old = tmp_path / "old"
    _write(old, "zinc_siggate", GATED, 0, [{"layer": 0, "mad": 0.5, "stable_rank": 2.0}], 0.5)
    assert mechanism_runs(collect_runs(old)) == []
    with pytest.raises(ReportError, match="no run has test-set GPS"):
        render_mechanism(collect_runs(old))


def test_depth_table_sets_the_papers_table_12_beside_ours_on_zinc(tmp_path):
    root = tmp_path / "runs"
    for name, model, depth, mad, mae in (("depth4_siggate", GATED, 4, 0.9, 0.10), ("depth8_siggate", GATED, 8, 0.6, 0.09),
                                         ("depth4_gps", {"name": "gps", "dim": 8}, 4, 0.8, 0.11)):
        _write(root, name, model, 0, [_layer(k, 0.5, mad, 2.0, 2.0, [1.0, 1.0]) for k in range(depth)], mae,
               config_hash=name[:10].ljust(10, "0"))
    text = render_mechanism(collect_runs(root))
    # by hand: kept 0.6 / 0.9 = 67%; the paper's 0.69 / 0.78 = 88%
    for row in ("| siggate_gt output sigmoid per-head | MAD | 0.900 [0.78] | 0.600 [0.69] |",
                "| gps | MAD | 0.800 [0.72] | - |",
                "| siggate_gt output sigmoid per-head | MAD % of 4 layers | 100 [100] | 67 [88] |",
                "| siggate_gt output sigmoid per-head | mae | 0.1000 [0.079] | 0.0900 [0.063] |",
                "| gps | mae | 0.1100 [0.092] | - |"):
        assert row in text, row



def test_depth_table_tests_each_row_against_g1_paired_by_seed(tmp_path):
    """Depth 4, seeds 0-2: G1 minus GPS is -0.03, 0.00, -0.04 (Shapiro keeps normality), so a paired t
    with 2 degrees of freedom, whose two-sided p is 1 - t / sqrt(t^2 + 2) by hand. Depth 8, seeds 0-1:
    two negative differences go to Wilcoxon, exact p 2 / 2^2 = 0.5. Depth 12 shares one seed: untested.
    Holm over the row's two tests: 2 p_4, then max(2 p_4, p_8)."""
    root = tmp_path / "runs"
    gps = {"name": "gps", "dim": 8}
    cases = {4: ([0.10, 0.12, 0.11], [0.13, 0.12, 0.15]), 8: ([0.09, 0.08], [0.10, 0.10]), 12: ([0.07], [0.08, 0.09])}
    for depth, (g1, ungated) in cases.items():
        for name, model, scores in ((f"depth{depth}_g1", GATED, g1), (f"depth{depth}_gps", gps, ungated)):
            for seed, score in enumerate(scores):
                _write(root, name, model, seed, [_layer(k, 0.5, 0.5, 2.0, 2.0, [1.0, 1.0]) for k in range(depth)],
                       score, config_hash=name.ljust(10, "0"))
    pairs = depth_pairs(mechanism_runs(collect_runs(root))).xs("gps", level="variant").droplevel(["dataset", "family"])
    diffs = np.array([-0.03, 0.00, -0.04])
    t = abs(diffs.mean()) / (diffs.std(ddof=1) / np.sqrt(3))
    p4 = 1 - t / np.sqrt(t**2 + 2)
    assert sorted(pairs.index) == [4, 8]
    assert pairs.loc[4, ["diff", "p", "holm"]].tolist() == pytest.approx([diffs.mean(), p4, 2 * p4])
    assert (pairs.loc[4, "test"], pairs.loc[8, "test"], pairs.loc[4, "n"]) == ("t", "wilcoxon", 3)
    assert pairs.loc[8, ["diff", "p", "holm"]].tolist() == pytest.approx([-0.015, 0.5, max(2 * p4, 0.5)])
    text = render_mechanism(collect_runs(root))
    assert (f"| gps | G1 − this row, mae, paired (test p, Holm) | -0.0233 (t {p4:.3f}, {2 * p4:.3f}), n 3 | "
            f"-0.0150 (wilcoxon 0.500, {max(2 * p4, 0.5):.3f}), n 2 | - |") in text

def test_ten_layer_zinc_models_get_the_papers_tables_13_and_15(tmp_path):
    root = tmp_path / "runs"
    gate = (0.5, 0.1, 0.2, 0.05, 10, [0.4, 0.6])
    for name, model, gated in (("zinc_g1", GATED, True), ("zinc_gps", {"name": "gps", "dim": 8}, False),
                               ("zinc_tanh", {**GATED, "gate_activation": "tanh"}, True)):
        layers = [_layer(k, 0.5, 0.5, 2.0, 2.0, [1.0, 3.0], gate if gated else None) for k in range(PAPER_DEPTH)]
        _write(root, name, model, 0, layers, 0.1, config_hash=name.ljust(10, "0"))
    text = render_mechanism(collect_runs(root))
    assert "**zinc_g1** on zinc_smiles (1 seed)" in text
    assert "| 1 | 0.50 [0.71] | 0.10 [0.13] | 20.0 [2.4] | 5.0 [4.1] | 0.40-0.60 |" in text
    assert "| **avg** | 0.50 [0.58] | 0.10 [0.19] | 20.0 [12.3] | 5.0 [8.7] | 0.40-0.60 |" in text
    assert "| 1 | 0.50 | 0.10 | 20.0 | 5.0 | 0.40-0.60 |" in text  # tanh: no paper row
    section = text.split("### Attention entropy")[1].split("###")[0]
    entropy = {line.split(" | ")[0].strip("| "): line.split(" | ")[3:] for line in section.splitlines()
               if line.startswith("| zinc_")}
    assert entropy["zinc_g1"][0] == "2.00 ± 1.00 [3.02]" and entropy["zinc_g1"][4] == "2.00 ± 1.00 [2.89]"
    assert entropy["zinc_gps"][9] == "2.00 ± 1.00 [1.72] |" and entropy["zinc_g1"][1] == "2.00 ± 1.00"
    assert "[" not in "".join(entropy["zinc_tanh"])


@pytest.mark.skipif(not PAPER_TEXT.exists(), reason=f"the paper's text is not at {PAPER_TEXT}")
def test_tables_12_13_and_15_as_transcribed_are_the_papers():
    lines = PAPER_TEXT.read_text().splitlines()
    header = next(line for line in lines if line.startswith("Method\t4\t8"))
    depths = [int(word) for word in header.split("\t")[1:-1]] + [int(header.split("\t")[-1].split()[0])]
    printed = {"gps": "GraphGPS", "siggate_gt output sigmoid per-head": "SigGate-GT"}
    for variant, quantities in PAPER_TABLE_12.items():
        for quantity, cells in quantities.items():
            row = next(line for line in lines if line.startswith(f"{printed[variant]} ({quantity.upper()} "))
            assert dict(zip(depths, map(float, row.split("\t")[1:]))) == cells, (variant, quantity)
    table_13 = _table_rows(lines, "Table 13.", 2)
    for variant, cells in PAPER_TABLE_13.items():
        assert [float(v) for v in re.findall(r"([\d.]+)\\pm", table_13[printed[variant]])] == list(cells.values())
        assert list(cells) == [1, 5, 10]  # the paper's columns: Layer 1, Layer 5, Layer 10
    table_15 = _table_rows(lines, "Table 15.", 11)
    for layer, (mean, sd, below, above) in PAPER_TABLE_15.items():
        assert [float(v) for v in re.findall(r"[\d.]+", table_15[layer])] == [mean, sd, below, above]


def _table_rows(lines: list[str], caption: str, count: int) -> dict[str, str]:
    """The first ``count`` rows after ``caption``'s column header, by their first cell."""
    start = next(i for i, line in enumerate(lines) if line.startswith(caption))
    header = next(i for i in range(start + 1, len(lines)) if "\t" in lines[i])
    rows = [line.split("\t", 1) for line in lines[header + 1:header + 1 + count]]
    return {first: rest for first, rest in rows}


def test_sparsity_table_means_zeros_and_index_over_seeds(tmp_path):
    root = tmp_path / "runs"
    for seed, (zeros, q) in enumerate((([0.2, 0.4], [1.2, 1.6]), ([0.4, 0.6], [1.4, 1.8]))):
        q_layer = {**_layer(0, 0.9, 0.8, 3.0, 2.0, [1.0, 2.0]), "attention_zeros": float(np.mean(zeros)),
                   "attention_zeros_per_head": zeros, "q": q}
        _write(root, "zinc_sparsegate_q", {"name": "sparsegate_gt", "normaliser": "qsoftmax"}, seed, [q_layer], 0.5)
        dense = {**_layer(0, 0.9, 0.8, 3.0, 2.0, [1.0, 2.0]), "attention_zeros": 0.0,
                 "attention_zeros_per_head": [0.0, 0.0]}
        _write(root, "zinc_cpu_g1", GATED, seed, [dense], 0.5)
    _write(root, "zinc_old", GATED, 0, [_layer(0, 0.9, 0.8, 3.0, 2.0, [1.0, 2.0])], 0.5)  # before zeros were counted
    table = sparsity_table(mechanism_runs(collect_runs(root)))
    row = table.loc[("zinc_sparsegate_q", "zinc_smiles", 1)]
    # by hand: seed shares 0.3 and 0.5; per-head min 0.2, 0.4 and max 0.4, 0.6; q means 1.4 and 1.6
    assert (row.zeros, row.zeros_head_min, row.zeros_head_max) == pytest.approx((0.4, 0.3, 0.5))
    assert (row.index_mean, row.index_min, row.index_max) == pytest.approx((1.5, 1.3, 1.7))
    assert row["index"] == "q" and row.n == 2
    assert table.loc[("zinc_cpu_g1", "zinc_smiles", 1)]["index"] == "-"
    assert "zinc_old" not in table.index.get_level_values("model")
    text = render_mechanism(collect_runs(root))
    assert "| zinc_sparsegate_q | zinc_smiles | 1 | 2 | 40.0 | 30.0-50.0 | q 1.500 (1.300-1.700) |" in text
    assert "| zinc_cpu_g1 | zinc_smiles | 1 | 2 | 0.0 | 0.0-0.0 | - |" in text  # softmax beside it, as the baseline


def test_softmax_only_runs_get_one_line_for_their_zeros(tmp_path):
    """Only softmax models (GPS, SigGate-GT): exact zeros come from underflow alone, so one line names
    the largest share of a layer instead of a table of layers at 0.0."""
    root = tmp_path / "runs"
    for seed, share in enumerate((0.002, 0.004)):
        layers = [{**_layer(k, 0.9, 0.8, 3.0, 2.0, [1.0, 2.0]), "attention_zeros": share * k,
                   "attention_zeros_per_head": [0.0, 2 * share * k]} for k in range(3)]
        _write(root, "zinc_cpu_no_gate", {"name": "gps", "dim": 8}, seed, layers, 0.5)
    section = render_mechanism(collect_runs(root)).split("### Exact zeros")[1].split("###")[0]
    # by hand: layer 3 holds 2 x 0.2% and 2 x 0.4%, mean 0.6% over the seeds
    assert "at most 0.6% of a layer's (zinc_cpu_no_gate on zinc_smiles, layer 3)" in section
    assert "| zinc_cpu_no_gate |" not in section


def test_depth_rows_sharing_an_architecture_are_named_by_their_report_rows(tmp_path):
    root = tmp_path / "runs"
    sparse = {"name": "sparsegate_gt", "dim": 8}
    for name, model, mad in (("sparse_q", {**sparse, "normaliser": "qsoftmax"}, 0.5),
                             ("sparse_entmax", {**sparse, "normaliser": "entmax"}, 0.25),
                             ("plain_gps", {"name": "gps", "dim": 8}, 0.75)):
        _write(root, name, model, 0, [_layer(k, 0.9, mad, 2.0, 2.0, [1.0, 1.0]) for k in range(2)], 0.1,
               config_hash=name.ljust(10, "0"))
    text = render_mechanism(collect_runs(root))
    for row in ("| sparsegate_gt (sparse_q) | MAD | 0.500 |", "| sparsegate_gt (sparse_entmax) | MAD | 0.250 |",
                "| gps | MAD | 0.750 |"):
        assert row in text, row
    assert not re.search(r"\[[0-9a-f]{6}\]", text)  # no hash where the report rows tell the rows apart


def test_depth_rows_from_one_report_row_keep_their_config_hash(tmp_path):
    root = tmp_path / "runs"
    for seed, normaliser, config_hash in ((0, "qsoftmax", "aaaaaaaaaa"), (1, "entmax", "bbbbbbbbbb")):
        _write(root, "sparse", {"name": "sparsegate_gt", "dim": 8, "normaliser": normaliser}, seed,
               [_layer(k, 0.9, 0.5, 2.0, 2.0, [1.0, 1.0]) for k in range(2)], 0.1, config_hash=config_hash)
    text = render_mechanism(collect_runs(root))
    assert len(set(re.findall(r"\| sparsegate_gt \(sparse\) \[[0-9a-f]{6}\] \| MAD \|", text))) == 2
