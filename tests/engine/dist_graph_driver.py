"""Launched by test_dist_graph_training.py: ``PART_CONFIG OUT [STOP | poison]`` trains the test's recipe
(full neighbourhoods, no dropout, 3 epochs) in DGL's standalone mode through
:func:`zoo.engine.dist_graph_training.train_dist_graph`, writing ``last.pt`` after every epoch; with
STOP, the run is interrupted after epoch STOP's checkpoint (a killed job to resume); with
``poison``, the test nodes' features become inf after the last epoch, before the final evaluation."""
import sys
from pathlib import Path

import torch

from zoo.engine.dist_graph_training import open_dist_graph, train_dist_graph
from zoo.engine.recipe import load_recipe

RECIPE = Path(__file__).resolve().parents[2] / "recipes" / "cora_ltga_edge_sampled.yaml"
EXACT = ["train.sampler.fanouts=[-1,-1]", "model.dropout=0.0", "model.attn_dropout=0.0"]  # the test's runs too
EPOCHS = 3


def interrupt_after(stop):
    def on_epoch_end(epoch, row):
        if epoch == stop:
            raise KeyboardInterrupt
    return on_epoch_end


def poison_test_nodes(graph):
    def on_epoch_end(epoch, row):
        if epoch == EPOCHS - 1:
            test = torch.nonzero(graph.ndata["test_mask"][0:graph.num_nodes()]).squeeze(1)
            graph.ndata["feat"][test] = torch.full((len(test), graph.ndata["feat"].shape[1]), float("inf"))
    return on_epoch_end


if __name__ == "__main__":
    part_config, out, *mode = sys.argv[1:]
    recipe = load_recipe(RECIPE, EXACT, epochs=EPOCHS)
    data = open_dist_graph(recipe, part_config, None)
    hook = None if not mode else poison_test_nodes(data.graph) if mode[0] == "poison" else interrupt_after(int(mode[0]))
    train_dist_graph(recipe, data, 0, out, checkpoint_every=0, on_epoch_end=hook)
