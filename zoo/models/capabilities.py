"""What a model offers beyond ``forward``, declared by inheriting these classes.

Trainers, diagnostics and fine-tuning ask ``isinstance(model, HasPositionalEncodings)``, never
``hasattr``: a model states each capability in its class line, and forgetting a method of one
it states is an error when the model is built (they are abstract base classes).

>>> class MyModel(HasPositionalEncodings, nn.Module):
...     def pe_spec(self): return {"rwse_k": 16}
>>> isinstance(MyModel(), HasPositionalEncodings)
True
>>> class Forgetful(HasPositionalEncodings, nn.Module):  # states the capability, lacks pe_spec
...     pass
>>> Forgetful()
Traceback (most recent call last):
TypeError: Can't instantiate abstract class Forgetful with abstract method pe_spec
"""
from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import nn

from zoo.nn.gps_layer import GPSLayer
from zoo.nn.ltga_conv import LTGAConv


class HasIndexParameters(ABC):
    """Attention indices (LTGA's q, or a capacity-matched control) trained by their own optimiser."""

    @abstractmethod
    def index_parameters(self) -> list[nn.Parameter]:
        """The parameters of the indices; the node trainer gives them a separate Adam after a warm-up."""

    @abstractmethod
    def q_values(self) -> list[torch.Tensor]:
        """The q of each layer in the last forward, with their graph (for the Shannon prior)."""


class HasLTGALayers(ABC):
    """Learnable Tsallis attention layers whose q and attention the diagnostics can override."""

    @abstractmethod
    def ltga_layers(self) -> list[LTGAConv]:
        """Every :class:`zoo.nn.LTGAConv` of the model, input first."""


class HasGPSLayers(ABC):
    """GraphGPS layers whose global attention (``layer.attn``, gated or not) the diagnostics record."""

    @abstractmethod
    def gps_layers(self) -> list[GPSLayer]:
        """Every :class:`zoo.nn.GPSLayer` of the model, input first."""


class HasPositionalEncodings(ABC):
    """A graph model that reads precomputed positional encodings from ``g.ndata``."""

    @abstractmethod
    def pe_spec(self) -> dict:
        """The encodings ``forward`` reads, as a spec for ``zoo.data.add_positional_encodings``."""


class HasHead(ABC):
    """A model whose output layers are ``self.head`` (an ``nn.Module``), replaceable for fine-tuning."""

    head: nn.Module

    @abstractmethod
    def reset_head(self, num_outputs: int) -> None:
        """Replace the head's last layer by a fresh one with ``num_outputs`` outputs."""
