"""The checkpoints shipped in zoo/pretrained/: they load (sha256 verified), their cards are
complete, and (ZOO_SLOW=1) the test metric on their card is what the weights really give."""
import os

import pytest
import torch

from zoo.data import load_graph_dataset, make_dataloaders
from zoo.engine.graph_metrics import graph_metric
from zoo.engine.graph_trainer import predict
from zoo.models import list_models, load_pretrained
from zoo.models.registry import PRETRAINED_DIR

SHIPPED = list_models(pretrained=True)


def test_the_two_promised_checkpoints_ship():
    assert {"zinc_siggate", "molhiv_siggate_cpu"} <= set(SHIPPED)


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_checkpoint_loads_with_a_complete_card(name):
    assert (PRETRAINED_DIR / f"{name}.pt").stat().st_size <= 10_000_000
    model = load_pretrained(name)
    card = model.card
    for key in ("recipe", "featurizer", "pe_spec", "dataset", "split", "metrics", "command", "git_commit",
                "weights_sha256", "target_columns"):
        assert card[key], key
    assert card["metric"] in card["metrics"]["test"] and card["command"].startswith("python tools/train.py")
    assert card["num_parameters"] == sum(p.numel() for p in model.parameters())


@pytest.mark.skipif(os.environ.get("ZOO_SLOW") != "1", reason="slow: featurizes the whole dataset; set ZOO_SLOW=1")
@pytest.mark.parametrize("name", SHIPPED)
def test_card_test_metric_is_what_the_weights_give(name, zoo_data):
    model = load_pretrained(name)
    data = load_graph_dataset(model.card["recipe"]["dataset"], pe=model.pe_spec(), progress=False)
    loader = make_dataloaders(data, 256, seed=0)["test"]
    with torch.no_grad():
        output, target = predict(model, loader)
    metric = model.card["metric"]
    assert graph_metric(metric, target, output) == pytest.approx(model.card["metrics"]["test"][metric], abs=1e-5)
