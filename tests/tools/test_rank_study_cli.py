"""tools/rank_study.py: the tables print with the paper's figures beside ours."""
from tests.tools.tool_loader import load_tool

rank_cli = load_tool("rank_study")


def test_tables_and_markdown_file(tmp_path, capsys):
    out = tmp_path / "rank.md"
    assert rank_cli.main(["--seeds", "0-2", "--markdown", str(out)]) == 0
    text = capsys.readouterr().out
    assert text.strip() == out.read_text().strip()
    assert "| mean |" in text and "3.181 / 3.409 (+7.17%)" in text  # the paper's Table 1 mean
    assert "| c = 0.5 |" in text and "| rho = 0.6 |" in text and "+6.2%" in text  # Table 2 rows
    assert "3 seeds" in text


def test_one_seed_is_refused(capsys):
    assert rank_cli.main(["--seeds", "3"]) == 2
    assert "the paired test needs 2 or more" in capsys.readouterr().err
