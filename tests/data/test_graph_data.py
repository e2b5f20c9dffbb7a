"""GraphData, collate and make_dataloaders on hand-made graphs; from_graphs' cut and key mapping."""
import dgl
import pytest
import torch

from zoo.data import DatasetError, FEATURIZER_SPEC, GraphData, collate, make_dataloaders
from zoo.data.graph_data import featurizer_spec, from_graphs


def _path_graph(n):
    g = dgl.graph((torch.arange(n - 1), torch.arange(1, n)), num_nodes=n)
    return dgl.to_bidirected(g)


def _data(n=10):
    """n path graphs of 2..n+1 nodes, target = node count, split 6 / 2 / 2 of n = 10."""
    graphs = [_path_graph(i + 2) for i in range(n)]
    targets = torch.tensor([[float(i + 2)] for i in range(n)])
    split = {"train": torch.arange(6), "val": torch.tensor([6, 7]), "test": torch.tensor([8, 9])}
    return GraphData(name="toy", graphs=graphs, targets=targets, split=split, task="graph_regression",
                     metric="mae", featurizer={}, source="hand-made", split_source="fixed", dataset_id="toy-1",
                     card={})


def test_collate_batches_graphs_and_stacks_targets():
    graphs = [dgl.graph(([0], [1]), num_nodes=2), dgl.graph(([0, 1], [1, 2]), num_nodes=3)]
    batch, y = collate([(graphs[0], torch.tensor([1.0, 2.0])), (graphs[1], torch.tensor([3.0, float("nan")]))])
    assert batch.batch_size == 2 and batch.num_nodes() == 5 and y.shape == (2, 2)
    assert batch.batch_num_nodes().tolist() == [2, 3] and torch.isnan(y[1, 1])


def test_sizes_subset_and_num_tasks():
    data = _data()
    assert len(data) == 10 and data.num_tasks == 1 and data.sizes == {"train": 6, "val": 2, "test": 2}
    graph, target = data.subset("val")[1]
    assert graph.num_nodes() == 9 and target.item() == 9.0  # graph 7 has 7 + 2 nodes
    with pytest.raises(KeyError, match="unknown split 'dev'"):
        data.subset("dev")


def test_dataloaders_shuffle_train_only_and_reproducibly():
    data = _data()
    loaders = make_dataloaders(data, batch_size=4, eval_batch_size=8, seed=3)
    assert [len(loaders[k]) for k in ("train", "val", "test")] == [2, 1, 1]
    graph, y = next(iter(loaders["val"]))
    assert y[:, 0].tolist() == [8.0, 9.0]  # in order
    assert graph.batch_num_nodes().tolist() == [8, 9]  # each graph's node count is its target
    order = lambda: torch.cat([y for _, y in make_dataloaders(data, batch_size=4, seed=3)["train"]])[:, 0].tolist()
    assert order() == order() and sorted(order()) == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]
    fixed = torch.cat([y for _, y in make_dataloaders(data, batch_size=4, shuffle_train=False)["train"]])
    assert fixed[:, 0].tolist() == [2.0, 3.0, 4.0, 5.0, 6.0, 7.0]


def test_positional_encodings_attach_and_record_the_spec(tmp_path):
    data = _data(3)
    data.cache_root = tmp_path
    data.add_positional_encodings({"rwse_k": 2}, progress=False)
    assert data.pe_spec == {"lap_k": 0, "rwse_k": 2, "version": 2}
    # path graph 0-1: a 2-step walk returns with probability 1, a 1-step one never
    assert data.graphs[0].ndata["rwse"].tolist() == [[0.0, 1.0], [0.0, 1.0]]


def test_from_graphs_cuts_to_limit_and_maps_valid_to_val():
    card = {"name": "toy", "task": "graph_classification", "metric": "ap", "featurizer": "ogb-smiles2graph",
            "split": {"split_source": "given"}}
    graphs = [_path_graph(2) for _ in range(6)]
    split = {"train": [0, 3, 5], "valid": [1, 4], "test": [2]}
    data = from_graphs(card, graphs, torch.zeros(6, 2), split, limit=4, source="toy", version="v1")
    assert {k: v.tolist() for k, v in data.split.items()} == {"train": [0, 3], "val": [1], "test": [2]}
    assert len(data) == 4 and data.dataset_id == "toy-v1-n4" and data.featurizer == FEATURIZER_SPEC
    whole = from_graphs(card, graphs, torch.zeros(6, 2), split, limit=None, source="toy", version="v1")
    assert whole.sizes == {"train": 3, "val": 2, "test": 1} and whole.split_source == "given"


def test_featurizer_spec_by_name():
    assert featurizer_spec({"name": "x", "featurizer": "benchmarking-gnns-zinc-typedict"})["atom_types"] == 28
    with pytest.raises(DatasetError, match="featurizer 'rdkit-morgan' is not one of"):
        featurizer_spec({"name": "x", "featurizer": "rdkit-morgan"})
