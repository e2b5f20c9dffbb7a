"""The checkpoints shipped in zoo/pretrained/: they load (card and weights digests verified), they
are the ones README names, their cards are complete, and (ZOO_SLOW=1) the test metric on their
card is what the weights really give."""
import os
from pathlib import Path

import pytest
import torch

from zoo.data import load_graph_dataset, make_dataloaders
from zoo.engine.card_command import check_command
from zoo.engine.export import MAX_EXPORT_BYTES
from zoo.engine.graph_metrics import graph_metric
from zoo.engine.graph_trainer import predict
from zoo.engine.recipe import build_recipe
from zoo.models import list_models, load_pretrained
from zoo.models.registry import PRETRAINED_DIR

README = Path(__file__).resolve().parents[1] / "README.md"
SHIPPED = list_models(pretrained=True)
# weights_sha256 recorded when each checkpoint was made (molhiv_siggate_cpu: the zoo-pretrained/1
# .pt file it was converted from; zinc_siggate and molhiv_siggate: exported as safetensors), and the
# checkpoint digests README lists: an independent record of what ships
PT_WEIGHTS_SHA256 = {"zinc_siggate": "c3af0f59644f496f0173930e8980184f375945fb64da8a082a4056d9033e196a",
                     "molhiv_siggate_cpu": "3f8e09274eab5a2e17199d025357aad276b351625ad556d64aa50d2ae41787e1",
                     "molhiv_siggate": "e263cac519a649a586535042440c6b3ea86122cd16d7fb054fbea5ac538531b1"}
CHECKPOINT_SHA256 = {"zinc_siggate": "2748e79dc0e39119570175f632e9122ab5c5a4164a2fbd8ca06b847143bad4c9",
                     "molhiv_siggate_cpu": "c2c5f1ca6d38fc7e47e4f039526754a1704e519d2dd1d09dd937a13919a646eb",
                     "molhiv_siggate": "5c92c3fd32dd244480f0917a486379212840908ced44d3ad5604d8e10f7bc29b"}


def test_the_promised_checkpoints_ship():
    assert {"zinc_siggate", "molhiv_siggate_cpu", "molhiv_siggate"} <= set(SHIPPED)
    assert not list(PRETRAINED_DIR.glob("*.pt"))  # only the new format ships


@pytest.mark.parametrize("name", sorted(PT_WEIGHTS_SHA256))
def test_shipped_weights_and_card_are_the_recorded_ones(name):
    card = load_pretrained(name).card  # recomputes the digests from the files
    assert card["weights_sha256"] == card["sha256"]["weights"] == PT_WEIGHTS_SHA256[name]
    assert card["sha256"]["checkpoint"] == CHECKPOINT_SHA256[name]
    assert CHECKPOINT_SHA256[name] in README.read_text()


@pytest.mark.parametrize("name", SHIPPED)
def test_shipped_checkpoint_loads_with_a_complete_card(name):
    assert (PRETRAINED_DIR / f"{name}.safetensors").stat().st_size <= MAX_EXPORT_BYTES
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


@pytest.mark.parametrize("name", SHIPPED)
def test_readme_gives_the_card_command(name):
    card = load_pretrained(name).card
    check_command(card["command"], build_recipe(card["recipe"]), seed=0)
    assert f"`{card['command']}`" in README.read_text()
