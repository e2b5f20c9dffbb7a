"""tools/benchmark.py layers / gps print a table with ratios to the peer (tiny sizes: a smoke test)."""
from tests.tools.tool_loader import load_tool

benchmark_cli = load_tool("benchmark")


def test_layers_and_gps_tables(capsys):
    assert benchmark_cli.main(["layers", "--nodes", "60", "--edges", "300", "--features", "16", "--repeats", "1"]) == 0
    assert benchmark_cli.main(["gps", "--batch-size", "2", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    for row in ("| gatv2 |", "| ltga_head |", "| ltga_edge |", "| gps |", "| siggate_gt |"):
        assert row in out
    peers = [line for line in out.splitlines() if line.startswith(("| gatv2 |", "| gps |"))]
    assert len(peers) == 2 and all(line.endswith("| 1.000 |") for line in peers)  # each peer's own ratio


def test_layers_with_sparse_features(capsys):
    assert benchmark_cli.main(["layers", "--nodes", "60", "--edges", "300", "--features", "40", "--repeats", "1",
                               "--density", "0.05"]) == 0
    out = capsys.readouterr().out
    assert "| ltga_head_sparse |" in out and "0/1 bag-of-words at density 0.05" in out


def test_aggregate_table(capsys):
    assert benchmark_cli.main(["aggregate", "--nodes", "50", "--edges", "200", "--repeats", "1"]) == 0
    out = capsys.readouterr().out
    assert "| dgl_update_all |" in out and "| edge_weighted_sum |" in out and "ms / forward+backward" in out
