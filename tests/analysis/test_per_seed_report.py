"""render_per_seed on hand-built tables, and tools/report.py --per-seed on hand-written run folders."""
from tests.analysis.report_inputs import table_of, write_mae_run
from tests.tools.tool_loader import load_tool
from zoo.analysis.per_seed_report import render_per_seed


def test_each_cell_seed_by_seed_with_gaps_marked():
    table = table_of({("gat", "cora"): {0: 81.2, 1: 80.9, 2: 82.25}, ("ltga", "cora"): {0: 83.0, 2: 81.5},
                      ("gat", "texas"): {1: 55.0}}, rows=["gat", "ltga"], datasets=["cora", "texas"])
    text = render_per_seed(table)
    lines = text.splitlines()
    assert lines[0] == "| model | dataset | metric | seed 0 | seed 1 | seed 2 |"
    assert lines[2:5] == ["| gat | cora | accuracy | 81.20 | 80.90 | 82.25 |",
                          "| gat | texas | accuracy | - | 55.00 | - |",
                          "| ltga | cora | accuracy | 83.00 | - | 81.50 |"]   # ltga has no texas runs: no line
    assert "in %" in text


def test_a_named_metric_in_table_units():
    table = table_of({("g1", "zinc"): {3: 0.09561, 4: 0.0923}}, rows=["g1"], datasets=["zinc"],
                     metric="mae", percent=False, higher_is_better=False)
    assert "| g1 | zinc | mae | 0.0956 | 0.0923 |" in render_per_seed(table)
    assert "in %" not in render_per_seed(table)
    table.scores["g1", "zinc"][4] = 332872010293.39  # an eval-mode overflow: 3 significant digits
    assert "| g1 | zinc | mae | 0.0956 | 3.33e+11 |" in render_per_seed(table)


def test_cli_appends_the_per_seed_table(tmp_path, capsys):
    for seed, (g1, gps) in enumerate([(0.0892, 0.0978), (0.0906, 0.0918)]):
        write_mae_run(tmp_path, "g1", seed, val=g1 + 0.01, test=g1)
        write_mae_run(tmp_path, "gps", seed, val=gps + 0.01, test=gps)
    tool = load_tool("report")
    assert tool.main([str(tmp_path), "--reference", "g1", "--per-seed"]) == 0
    out = capsys.readouterr().out
    per_seed = out.split("## Per seed")[1]
    assert "| g1 | zinc | mae | 0.0892 | 0.0906 |" in per_seed
    assert "| gps | zinc | mae | 0.0978 | 0.0918 |" in per_seed
    assert tool.main([str(tmp_path)]) == 0 and "## Per seed" not in capsys.readouterr().out


def test_percent_and_own_units_keep_their_digits():
    table = table_of({("sig", "molhiv"): {0: 78.5612}, ("sig", "peptides_func"): {0: 0.53141}}, rows=["sig"],
                     datasets=["molhiv", "peptides_func"], percent={"molhiv"},
                     main_metrics={"molhiv": "roc_auc", "peptides_func": "ap"})
    lines = render_per_seed(table).splitlines()
    assert lines[2:4] == ["| sig | molhiv | roc_auc | 78.56 |", "| sig | peptides_func | ap | 0.5314 |"]
    assert lines[-1] == ("test split, in % on molhiv, own units elsewhere, per seed; a tuned row shows the seeds "
                         "of the model it picked.")
