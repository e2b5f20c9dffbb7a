"""make_report and tools/report.py end to end over a small tree of run folders written by the tests."""
import subprocess
import sys

import pytest

from tests.analysis.report_inputs import OFFSETS
from tests.tools.tool_loader import ROOT, load_tool
from zoo.analysis.report import make_report


def test_other_metric_split_and_csv(runs):
    markdown, frame = make_report([runs], models=["gat"], metric="nll", split="val")
    assert "val nll" in markdown and "in %" not in markdown
    assert frame.at["gat", "texas"] == pytest.approx(0.4 - OFFSETS.mean())
    assert frame.at["gat", "texas_n"] == 5
    _, frame = make_report([runs], tuned={"qfrozen": "qfrozen_*"})
    assert frame.at["qfrozen (tuned)", "picked"] == "cora=qfrozen_2.0; texas=qfrozen_1.5; tolokers=qfrozen_2.0"


def test_cli_writes_outputs(runs, tmp_path):
    done = subprocess.run([sys.executable, str(ROOT / "tools" / "report.py"), str(runs), "--reference", "ltga_edge",
                           "--tuned", "qfrozen=qfrozen_*", "--markdown", str(tmp_path / "t.md"),
                           "--csv", str(tmp_path / "t.csv")], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert "qfrozen (tuned)" in done.stdout and (tmp_path / "t.md").read_text() == done.stdout
    assert (tmp_path / "t.csv").read_text().startswith("model,cora,cora_sd,cora_n")


def test_cli_exits_2_with_a_clear_message(runs, tmp_path, capsys):
    (tmp_path / "empty").mkdir()
    tool = load_tool("report")
    assert tool.main([str(tmp_path / "empty")]) == 2
    assert f"error: no finished runs (<recipe>/<config-hash>/seed<k>/metrics.json) under {tmp_path / 'empty'}" \
        in capsys.readouterr().err
    assert tool.main([str(runs), "--reference", "gcn"]) == 2
    assert "no runs of model 'gcn'" in capsys.readouterr().err
    assert tool.main([str(runs), "--alpha", "5"]) == 2
    assert "alpha must lie in (0, 1), got 5.0" in capsys.readouterr().err
    assert tool.main([str(runs), "--tuned", "q=qfrozen_*", "--tune-seeds", "0-x"]) == 2
    assert "seeds '0-x': '0-x' is not a seed or a range; write them like 0-9 or 0,3,5" in capsys.readouterr().err
    assert tool.main([str(runs), "--tuned", "q=qfrozen_*", "--tune-seeds", "0-2"]) == 0
    assert "validation main metric over seeds 0-2 (never test)" in capsys.readouterr().out
    assert tool.main([str(runs), "--diagnostics"]) == 2
    assert "no run has LTGA attention diagnostics" in capsys.readouterr().err
    assert tool.main([str(runs), "--timing"]) == 2
    assert "no run recorded its training time" in capsys.readouterr().err


def test_cli_pruning_and_agreement_options(tmp_path, capsys):
    from tests.analysis.test_diagnostics_report import write_run
    runs = tmp_path / "ltga"
    write_run(runs, "cora", "ltga_head", 0, q=[1.5], zeros=[0.1, 0.3],
              cf={"trained": 0.8, "A_softmax": 0.7, "B_random_prune": 0.6, "C_clamp_q": 0.8},
              agreement=[0.9, 0.7], every_head=[(0.5, 2, 0.4, 10), (0.25, 4, 0.6, 6)])
    tool = load_tool("report")
    assert tool.main([str(runs), "--diagnostics"]) == 0
    pairs = capsys.readouterr().out
    assert tool.main([str(runs), "--diagnostics", "--agreement", "every_head"]) == 0
    every = capsys.readouterr().out
    assert "| 0.80 | 0.50 |" in pairs and "| 0.38 | 0.50 |" in every  # (0.5 + 0.25) / 2 over layers
    assert "(the paper's definition, Section 5.2)" in every and "(the paper's definition" not in pairs
    assert tool.main([str(runs), "--pruning"]) == 0
    out = capsys.readouterr().out
    # agreement pooled over layers: pruned (1 + 1) / 6, kept (4 + 3.6) / 16
    assert "## Pruning validity" in out and "| ltga_head | cora | 1 | 20.0 | 80.0 | 70.0 | 60.0 | 33.3 | 47.5 |" in out
    with pytest.raises(SystemExit) as exit_info:  # argparse's own exit 2
        tool.main([str(runs), "--diagnostics", "--agreement", "all"])
    assert exit_info.value.code == 2 and "invalid choice: 'all'" in capsys.readouterr().err


def test_holm_family_option_names_itself(runs, capsys):
    tool = load_tool("report")
    assert tool.main([str(runs), "--reference", "ltga_edge"]) == 0
    default = capsys.readouterr().out
    assert tool.main([str(runs), "--reference", "ltga_edge", "--holm", "dataset"]) == 0
    assert capsys.readouterr().out == default  # the default family is the one reports always used
    assert tool.main([str(runs), "--reference", "ltga_edge", "--holm", "table"]) == 0
    across = capsys.readouterr().out
    assert "Holm-corrected over the comparisons within each dataset;" in default
    assert "Holm-corrected over every comparison of the table (all datasets at once);" in across
    assert across.split("## Paired tests")[0] == default.split("## Paired tests")[0]  # the table itself is unchanged


def test_cli_sets_the_ltga_paper_beside_ours_with_an_oracle_row(runs, capsys):
    tool = load_tool("report")
    assert tool.main([str(runs), "--reference", "ltga_edge", "--tuned", "qfrozen=qfrozen_*",
                      "--oracle", "qfrozen=qfrozen_*", "--paper", "ltga"]) == 0
    out = capsys.readouterr().out
    assert "| qfrozen (test oracle; not a baseline) |" in out and "[58.4 ± 6.0]" in out   # Table 9's oracle, Texas
    assert "| avg (paper's datasets) | avg rank (paper's datasets) | avg (all datasets) | avg rank (all datasets) |" \
        in out
    assert "## Friedman test and Nemenyi critical difference: paper's datasets" in out
    assert tool.main([str(runs), "--tuned", "q15=qfrozen_1.5", "--tuned", "q20=qfrozen_2.0"]) == 0
    out = capsys.readouterr().out
    assert "| q15 (tuned) |" in out and "| q20 (tuned) |" in out   # a repeated option adds rows, never replaces
    assert tool.main([str(runs), "--tuned", "q=qfrozen_1.5", "--tuned", "q=qfrozen_2.0"]) == 2
    assert "--tuned names the row 'q' twice" in capsys.readouterr().err
    assert tool.main([str(runs), "--oracle", "qfrozen"]) == 2
    assert "--oracle takes NAME=PATTERN items separated by commas, got 'qfrozen'" in capsys.readouterr().err
    assert tool.main([str(runs), "--paper", "ltga", "--split", "val"]) == 2
    assert "the LTGA paper reports test accuracy, but this table is val accuracy" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        tool.main([str(runs), "--paper", "gat"])
    assert exit_info.value.code == 2 and "invalid choice: 'gat'" in capsys.readouterr().err
