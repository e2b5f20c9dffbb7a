"""tools/partition.py: DGL's partitions of a node graph hold every node once, with its data."""
import json

import dgl
import torch

from tests.tools.tool_loader import load_tool
from zoo.data.synthetic import synthetic_sbm_graph

partition_cli = load_tool("partition")


def test_two_random_partitions_hold_every_node_once_with_its_data(tmp_path, capsys):
    out = tmp_path / "parts"
    args = ["synthetic", "--nodes", "400", "--edges", "3000", "--parts", "2", "--method", "random", "--seed", "4"]
    assert partition_cli.main([*args, "--out", str(out)]) == 0
    assert "2 random partition(s)" in capsys.readouterr().out
    assert json.loads((out / "synthetic.json").read_text())["num_parts"] == 2
    reference = synthetic_sbm_graph(400, 3000, homophily=0.5, seed=4)
    original = torch.load(out / "orig_nids.pt")
    owned, inner_edges = [], 0
    for part in range(2):
        graph, node_feats, _, book, *_ = dgl.distributed.load_partition(str(out / "synthetic.json"), part)
        nodes = original[book.partid2nids(part)]  # the dataset's ids of the nodes this partition owns
        assert torch.equal(node_feats["_N/feat"], reference.ndata["feat"][nodes])
        assert torch.equal(node_feats["_N/label"], reference.ndata["label"][nodes])
        owned.append(nodes)
        inner_edges += int(graph.edata["inner_edge"].sum())
    assert torch.equal(torch.cat(owned).sort().values, torch.arange(400))
    assert inner_edges == 3000 + 400  # the generator's edges and one self-loop per node


def test_a_bad_dataset_is_a_data_error(capsys, tmp_path, offline_env):
    assert partition_cli.main(["no_such_card", "--out", str(tmp_path)]) == 1
    assert "No dataset card named" in capsys.readouterr().err
