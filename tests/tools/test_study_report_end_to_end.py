"""A CPU-budget study in miniature, through the commands the README gives: tools/sweep.py trains
two study recipes (zinc_cpu_g1 and its ungated twin, shrunk by --set to a 2-layer d 16 model, 1
epoch, 2 seeds, on 80 ESOL molecules), then tools/report.py renders the paired test against G1 and
the SigGate-GT mechanism tables from the diagnostics the trainer wrote."""
import json
from pathlib import Path

import pytest

from tests.tools.tool_loader import load_tool
from zoo.analysis.timing_report import allocator_label
from zoo.data import load_csv_dataset

RECIPES = Path(__file__).resolve().parents[2] / "recipes"
SHRINK = ["dataset=esol", "model.dim=16", "model.heads=2", "model.layers=2", "model.lap_k=4", "model.rwse_k=4",
          "model.dim_pe=4", "optim.batch_size=16"]


@pytest.fixture(scope="module")
def esol(zoo_data, zoo_cache):
    return load_csv_dataset(zoo_data / "moleculenet/ESOL/delaney-processed.csv", "smiles",
                            ["measured log solubility in mols per litre"], split="random", limit=80,
                            cache_root=zoo_cache, progress=False)


def test_study_recipes_train_and_report_their_mechanism_tables(offline_env, esol, tmp_path, monkeypatch, capsys):
    monkeypatch.setattr("zoo.engine.experiment.load_graph_dataset", lambda *args, **kwargs: esol)
    out = tmp_path / "runs"
    argv = [str(RECIPES / "zinc_cpu_g1.yaml"), str(RECIPES / "zinc_cpu_no_gate.yaml"), "--seeds", "0-1",
            "--epochs", "1", "--out", str(out), *(arg for item in SHRINK for arg in ("--set", item))]
    assert load_tool("sweep").main(argv) == 0
    metrics = json.loads(next(out.glob("zinc_cpu_g1/*/seed1/metrics.json")).read_text())
    assert [row["split"] for row in metrics["diagnostics"]] == ["test", "test"]
    assert metrics["diagnostics"][0]["graphs"] == esol.sizes["test"]
    capsys.readouterr()

    assert load_tool("report").main([str(out), "--reference", "zinc_cpu_g1", "--diagnostics"]) == 0
    text = capsys.readouterr().out
    assert "## Paired tests: zinc_cpu_g1 vs each model, by seed" in text
    assert "zinc_cpu_no_gate" in text.split("## Paired tests")[1]
    mechanism = text.split("## SigGate-GT mechanism")[1]
    assert "**zinc_cpu_g1** on esol (2 seeds)" in mechanism  # gate statistics: the gated run only
    assert "**zinc_cpu_no_gate**" not in mechanism
    assert "| zinc_cpu_no_gate | esol | 2 |" in mechanism  # entropy and stable rank rows of both
    assert "| siggate_gt output sigmoid per-head | MAD |" in mechanism and "| gps | MAD |" in mechanism
    assert "## Attention diagnostics" not in text  # no LTGA run here

    # --models picks the rows of the mechanism and timing tables in its order, and --reference joins them last
    assert load_tool("report").main([str(out), "--models", "zinc_cpu_no_gate", "--reference", "zinc_cpu_g1",
                                     "--diagnostics", "--timing"]) == 0
    text = capsys.readouterr().out
    for section in (text.split("### Attention entropy")[1].split("###")[0], text.split("## Training time")[1]):
        rows = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| zinc_cpu")]
        assert rows == ["| zinc_cpu_no_gate", "| zinc_cpu_g1"]

    # --by-allocator splits the timing rows by the malloc setting each run recorded (one here)
    setting = json.loads(next(out.glob("zinc_cpu_g1/*/seed0/environment.json")).read_text())["allocator"]
    assert load_tool("report").main([str(out), "--reference", "zinc_cpu_g1", "--timing", "--by-allocator"]) == 0
    timing = capsys.readouterr().out.split("## Training time")[1]
    assert f"| zinc_cpu_g1 | esol | {allocator_label(setting)} | 2 |" in timing
    assert load_tool("report").main([str(out), "--by-allocator"]) == 2
    assert "--by-allocator splits the --timing table; add --timing" in capsys.readouterr().err
