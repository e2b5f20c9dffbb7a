"""diagnostics_table / render_diagnostics on run folders with hand-written LTGA diagnostics."""
import json
from pathlib import Path

import pytest
import yaml

from zoo.analysis.diagnostics_report import diagnostics_table, render_diagnostics
from zoo.analysis.runs import ReportError, collect_runs


def write_run(root: Path, dataset: str, model: str, seed: int, q: list, zeros: list, cf: dict, agreement: list,
              diagnostics: bool = True, every_head: list | None = None, gini: list | None = None) -> None:
    """One LTGA seed folder; ``agreement`` the pruned-edge (edge, head) pairs agreement per layer
    (n = 4, kept 0.5 of 8); ``every_head``, if given, ``(pruned agreement, pruned n, kept agreement,
    kept n)`` per layer of the every-head definition (absent: a run recorded before it existed);
    ``gini`` the per-layer Gini (absent: a run recorded before it was)."""
    run = root / f"{dataset}_{model}" / "0123456789"
    (run / f"seed{seed}").mkdir(parents=True, exist_ok=True)
    (run / "config.yaml").write_text(yaml.safe_dump({"name": f"{dataset}_{model}", "dataset": dataset,
                                                     "model": {"name": "ltga"}}))
    curves = [{"epoch": 0, **{f"q_mean/layer0_head{h}": 1.0 for h in range(len(q))}},
              {"epoch": 1, **{f"q_mean/layer0_head{h}": v for h, v in enumerate(q)}}, {"epoch": 2}]
    block = {"accuracy": cf["trained"]}
    metrics = {"seed": seed, "split": seed, "main_metric": "accuracy", "best_epoch": 1, "curves": curves,
               "final": {"val": block, "test": block}}
    if diagnostics:
        metrics["diagnostics"] = {
            "layers": [{"exact_zero": z, **({"gini": gini[k]} if gini else {})} for k, z in enumerate(zeros)],
            "counterfactual": cf,
            "label_agreement": [{"pruned": {"agreement": a, "n": 0 if a is None else 4}, "kept": {"agreement": 0.5, "n": 8}}
                                for a in agreement]}
        if every_head is not None:
            metrics["diagnostics"]["label_agreement_every_head"] = [
                {"pruned": {"agreement": a, "n": n}, "kept": {"agreement": b, "n": m}} for a, n, b, m in every_head]
    (run / f"seed{seed}" / "metrics.json").write_text(json.dumps(metrics))


def test_means_over_seeds_at_the_best_epoch(tmp_path):
    write_run(tmp_path, "cora", "ltga_head", 0, q=[0.8, 1.4], zeros=[0.0, 0.10],
              cf={"trained": 0.80, "A_softmax": 0.78, "C_clamp_q": 0.80}, agreement=[None, 0.9], gini=[0.1, 0.3])
    write_run(tmp_path, "cora", "ltga_head", 1, q=[1.0, 1.6], zeros=[0.0, 0.30],
              cf={"trained": 0.81, "A_softmax": 0.81, "C_clamp_q": 0.82}, agreement=[None, 0.7], gini=[0.2, 0.6])
    write_run(tmp_path, "texas", "gat", 0, q=[], zeros=[], cf={"trained": 0.5}, agreement=[], diagnostics=False)
    table = diagnostics_table(collect_runs(tmp_path))
    assert list(table.index) == [("ltga_head", "cora")]  # the GAT run has no diagnostics
    row = table.loc[("ltga_head", "cora")]
    assert row.n == 2 and row.q_min == pytest.approx(0.9) and row.q_max == pytest.approx(1.5)
    assert row.zeros_l2 == pytest.approx(0.2) and row.zeros_l1 == 0.0
    assert row.cf_a == pytest.approx((-2.0 + 0.0) / 2) and row.cf_c == pytest.approx((0.0 + 1.0) / 2)
    assert row.agree_pruned == pytest.approx(0.8) and row.agree_kept == 0.5
    assert row.gini == pytest.approx((0.2 + 0.4) / 2)  # each seed's mean over layers, then over seeds
    text = render_diagnostics(table)
    assert "| ltga_head | cora | 2 | 0.90 | 1.50 | 0.0 | 20.0 | 0.300 | -1.00 | +0.50 | 0.80 | 0.50 |" in text


def test_no_diagnostics_is_a_clear_error(tmp_path):
    write_run(tmp_path, "texas", "gat", 0, q=[], zeros=[], cf={"trained": 0.5}, agreement=[], diagnostics=False)
    with pytest.raises(ReportError, match="no run has LTGA attention diagnostics"):
        diagnostics_table(collect_runs(tmp_path))


def test_every_head_agreement_is_offered_and_named(tmp_path):
    write_run(tmp_path, "cora", "ltga_head", 0, q=[1.2], zeros=[0.1, 0.2], cf={"trained": 0.8, "A_softmax": 0.8},
              agreement=[0.9, 0.7], every_head=[(None, 0, 0.4, 10), (0.25, 4, 0.6, 6)])
    write_run(tmp_path, "cora", "ltga_head", 1, q=[1.2], zeros=[0.1, 0.2], cf={"trained": 0.8, "A_softmax": 0.8},
              agreement=[0.5, 0.5], every_head=[(0.5, 2, 0.2, 8), (0.75, 4, 0.4, 6)])
    write_run(tmp_path, "texas", "ltga_head", 0, q=[1.0], zeros=[0.0, 0.0], cf={"trained": 0.5, "A_softmax": 0.5},
              agreement=[0.5, 0.5])  # recorded before every_head existed
    runs = collect_runs(tmp_path)
    pairs, every = diagnostics_table(runs), diagnostics_table(runs, "every_head")
    assert pairs.at[("ltga_head", "cora"), "agree_pruned"] == pytest.approx((0.8 + 0.5) / 2)
    # per seed, the mean over layers with pruned edges (0.25; (0.5 + 0.75) / 2), then over seeds
    assert every.at[("ltga_head", "cora"), "agree_pruned"] == pytest.approx((0.25 + 0.625) / 2)
    assert every.at[("ltga_head", "cora"), "agree_kept"] == pytest.approx((0.5 + 0.3) / 2)
    assert every.loc[("ltga_head", "texas"), ["agree_pruned", "agree_kept"]].isna().all()
    text = render_diagnostics(every)
    assert "| ltga_head | texas | 1 | 1.00 | 1.00 | 0.0 | 0.0 | - | +0.00 | - | - | - |" in text  # no Gini recorded
    assert text.endswith("pruned by every head / kept by at least one whose ends share a label (the paper's "
                         "definition, Section 5.2).\n")
    assert render_diagnostics(pairs).endswith("agree: share of pruned / kept edges (between training nodes) whose "
                                              "ends share a label.\n")
    with pytest.raises(ReportError, match="label agreement 'all' is not one of pairs, every_head"):
        diagnostics_table(runs, "all")


def test_depth_and_ablation_runs_add_their_sections(tmp_path):
    """--diagnostics on depth-sweep and ablation runs: their tables follow the attention table,
    and a folder with only non-LTGA depth runs (no attention diagnostics) still reports them."""
    from tests.analysis.test_ablation_report import write_ablation_run
    from tests.analysis.test_depth_report import write_depth_run

    write_depth_run(tmp_path / "depth", "cora_depth4_gcn", "cora", 0, 0.6, {"dirichlet_energy": 0.05, "mad": 0.4})
    text = render_diagnostics(diagnostics_table(collect_runs(tmp_path / "depth")))
    assert text.startswith("### Depth and over-smoothing (the LTGA paper's Table 19)\n\n| dataset | model |")
    assert "| cora | gcn | accuracy | 60.0 (n=1) [59.4 ± 11.1] | 0.050 [0.034] | 0.400 [0.487] |" in text
    assert "Ablations" not in text
    write_run(tmp_path / "all", "cora", "ltga_head", 0, q=[1.0], zeros=[0.0], cf={"trained": 0.8}, agreement=[0.5])
    write_ablation_run(tmp_path / "all", "minesweeper_ablate_delta_0.25", 0, 0.7, [1.2], 0.09)
    text = render_diagnostics(diagnostics_table(collect_runs([tmp_path / "all", tmp_path / "depth"])))
    keys = ("| model | dataset | n | q min", "### Depth", "### Ablations")
    attention, depth, ablation = (text.index(key) for key in keys)
    assert attention < depth < ablation
    assert "| minesweeper | δ | 0.25 | roc_auc | 70.0 | 1.200 | 0.090 | 1 | - | - |" in text
