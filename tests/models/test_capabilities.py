"""Capabilities are declared: a stated capability must be implemented, only a stated one counts,
and each registered model states what the trainers, diagnostics and fine-tuning use."""
import pytest
import torch
from torch import nn

from zoo.engine.index_training import index_trajectory
from zoo.engine.node_trainer import _optimizers
from zoo.engine.recipe import OptimConfig
from zoo.models import (HasGPSLayers, HasHead, HasIndexParameters, HasLTGALayers, HasPositionalEncodings,
                        create_model)

CAPABILITIES = (HasIndexParameters, HasLTGALayers, HasGPSLayers, HasPositionalEncodings, HasHead)
NODE = {"in_feats": 4, "num_classes": 3}
DECLARED = {  # name: (data arguments, declared capabilities)
    "gcn": (NODE, set()), "gat": (NODE, set()), "gatv2": (NODE, set()),
    "ltga": (NODE, {HasIndexParameters, HasLTGALayers}),
    "gps": ({}, {HasGPSLayers, HasPositionalEncodings, HasHead}),
    "siggate_gt": ({}, {HasGPSLayers, HasPositionalEncodings, HasHead}),
}


@pytest.mark.parametrize("name", sorted(DECLARED))
def test_each_model_declares_its_capabilities(name):
    data, capabilities = DECLARED[name]
    model = create_model(name, **data)
    assert {c for c in CAPABILITIES if isinstance(model, c)} == capabilities


def test_a_declared_capability_must_be_implemented():
    class Forgetful(HasHead, nn.Module):
        pass

    with pytest.raises(TypeError, match="abstract method.*reset_head"):
        Forgetful()


def test_a_method_of_the_same_name_is_not_a_capability():
    """isinstance is nominal: a model with an undeclared ``index_parameters`` gets no second optimiser."""

    class Undeclared(nn.Module):
        def __init__(self):
            super().__init__()
            self.weight, self.q = nn.Parameter(torch.ones(2)), nn.Parameter(torch.zeros(1))

        def index_parameters(self):
            return [self.q]

        def q_values(self):
            return [self.q + 1]

    class Declared(Undeclared, HasIndexParameters):
        pass

    optim = OptimConfig(lr=0.1, q_lr=0.5)
    assert not isinstance(Undeclared(), HasIndexParameters)
    assert len(_optimizers(Undeclared(), optim)) == 1 and index_trajectory(Undeclared()) == {}
    declared = Declared()
    first, second = _optimizers(declared, optim)
    assert first.param_groups[0]["params"] == [declared.weight]
    assert second.param_groups[0]["params"] == [declared.q] and second.param_groups[0]["lr"] == 0.5
    assert index_trajectory(declared) == {"q_mean/layer0_head0": 1.0}


def test_ltga_layers_lists_every_layer_input_first():
    model = create_model("ltga", in_feats=4, num_classes=3, hidden=2, heads=2, layers=3)
    assert model.ltga_layers() == [*model.convs, model.out] and len(model.convs) == 2
