"""Partition a node dataset for DistDGL with ``dgl.distributed.partition_graph``.

    python tools/partition.py cora --parts 2 --out parts/cora
    python tools/partition.py synthetic --nodes 100000 --edges 1000000 --parts 2 --method random --out parts/sbm

Writes ``<out>/<name>.json`` (the partition config a ``dgl.distributed.DistGraph`` opens), one
folder per partition, and ``orig_nids.pt``: DGL renumbers the nodes partition by partition, and
new id ``i`` is the dataset's node ``orig_nids[i]``. The graph is the one the node trainer sees (one self-loop per node) with
``ndata`` feat, label, train_mask, val_mask and test_mask. ``--method metis`` balances the
training nodes and the edges over the partitions (DGL's METIS); ``random`` assigns nodes at random.
Train on the partitions with ``python tools/train.py RECIPE --dist-config <out>/<name>.json``
(:mod:`zoo.engine.dist_graph_training`). Exit codes: 0 done, 1 data error, 2 bad arguments.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import dgl  # noqa: E402
import torch  # noqa: E402

from zoo.data import DatasetError, load_node_dataset  # noqa: E402
from zoo.data.synthetic import synthetic_sbm_graph  # noqa: E402


def node_graph(args) -> dgl.DGLGraph:
    """The dataset's graph with its features, labels and split masks as ``ndata``."""
    if args.dataset == "synthetic":
        g = synthetic_sbm_graph(args.nodes, args.edges, homophily=args.homophily, seed=args.seed)
        graph = dgl.add_self_loop(dgl.graph(g.edges(), num_nodes=g.num_nodes()))
        graph.ndata.update(g.ndata)
        return graph
    data = load_node_dataset(args.dataset, split=args.split)
    graph = data.graph
    graph.ndata.update({"feat": data.features, "label": data.labels, "train_mask": data.train_mask,
                        "val_mask": data.val_mask, "test_mask": data.test_mask})
    return graph


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dataset", help="a node dataset card (e.g. cora) or 'synthetic' (zoo.data.synthetic)")
    parser.add_argument("--parts", type=int, default=2, help="number of partitions (machines), default 2")
    parser.add_argument("--method", choices=("metis", "random"), default="metis", help="partitioning (default metis)")
    parser.add_argument("--out", required=True, help="output folder for the partitions and their config")
    parser.add_argument("--split", type=int, default=0, help="split index of the card (default 0)")
    parser.add_argument("--nodes", type=int, default=100_000, help="synthetic: nodes (default 100000)")
    parser.add_argument("--edges", type=int, default=1_000_000, help="synthetic: directed edges (default 1000000)")
    parser.add_argument("--homophily", type=float, default=0.5, help="synthetic: edge homophily (default 0.5)")
    parser.add_argument("--seed", type=int, default=0, help="synthetic: seed (default 0)")
    args = parser.parse_args(argv)
    if args.parts < 1:
        print(f"error: --parts {args.parts} must be >= 1", file=sys.stderr)
        return 2
    try:
        graph = node_graph(args)
    except DatasetError as err:
        print(f"error: {err}", file=sys.stderr)
        return 1
    except ValueError as err:
        print(f"error: {err}", file=sys.stderr)
        return 2
    name = args.dataset
    balance = {"balance_ntypes": graph.ndata["train_mask"], "balance_edges": True} if args.method == "metis" else {}
    original, _ = dgl.distributed.partition_graph(graph, name, args.parts, args.out, part_method=args.method,
                                                  return_mapping=True, **balance)
    torch.save(original, Path(args.out) / "orig_nids.pt")
    print(f"{name}: {graph.num_nodes():,} nodes, {graph.num_edges():,} edges in {args.parts} {args.method} "
          f"partition(s); config {Path(args.out) / f'{name}.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
