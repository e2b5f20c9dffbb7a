"""Model registry, assembled models and pretrained checkpoints with model cards.

Every module of this package is imported here, so a new file with ``@register_model`` is
registered without an import line naming it.
"""
import importlib
import pkgutil

from zoo.models.capabilities import HasGPSLayers, HasHead, HasIndexParameters, HasLTGALayers, HasPositionalEncodings
from zoo.models.constraints import AtLeast, Interval
from zoo.models.pretrained import PretrainedError, load_pretrained, save_pretrained
from zoo.models.registry import Argument, create_model, list_models, model_arguments, register_model

for _module in pkgutil.iter_modules(__path__, f"{__name__}."):
    importlib.import_module(_module.name)
del _module

__all__ = ["Argument", "AtLeast", "HasGPSLayers", "HasHead", "HasIndexParameters", "HasLTGALayers",
           "HasPositionalEncodings", "Interval", "PretrainedError", "create_model", "list_models", "load_pretrained",
           "model_arguments", "register_model", "save_pretrained"]
