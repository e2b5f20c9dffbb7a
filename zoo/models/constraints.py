"""The valid range of a numeric model argument, declared in its annotation.

A model declares them in its constructor, e.g. ``dropout: Annotated[float, Interval(0, 1,
high_open=True)] = 0.5`` or ``heads: Annotated[int, AtLeast(1)] = 8`` (or the aliases below).
:func:`zoo.models.register_model` checks every declared range when the model is built, and
:func:`zoo.models.model_arguments` reports them (a recipe's model check uses them too):

>>> from zoo.models import create_model, model_arguments
>>> model_arguments("gcn")["dropout"].ranges
(Interval(low=0, high=1, low_open=False, high_open=True),)
>>> create_model("gcn", in_feats=5, num_classes=2, dropout=1.0)
Traceback (most recent call last):
ValueError: dropout is 1.0; it must be in [0, 1)
"""
from __future__ import annotations

import dataclasses
import math
from typing import Annotated


@dataclasses.dataclass(frozen=True)
class Interval:
    """``low <= value <= high``; an ``_open`` end excludes its bound, an infinite end is absent.

    >>> 1.0 in Interval(0, 1, high_open=True), str(Interval(0, 1, high_open=True))
    (False, 'in [0, 1)')
    """

    low: float = -math.inf
    high: float = math.inf
    low_open: bool = False
    high_open: bool = False

    def __contains__(self, value) -> bool:
        above = value > self.low if self.low_open else value >= self.low
        below = value < self.high if self.high_open else value <= self.high
        return bool(above and below)

    def __str__(self) -> str:
        if math.isinf(self.high):
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        return f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}{')' if self.high_open else ']'}"


def AtLeast(low: float) -> Interval:  # noqa: N802  (reads as a type in annotations)
    """``value >= low``: ``Annotated[int, AtLeast(1)]``.

    >>> str(AtLeast(1))
    '>= 1'
    """
    return Interval(low)


Count = Annotated[int, AtLeast(1)]
"""A number of layers, heads, units or classes: at least 1."""
DropoutRate = Annotated[float, Interval(0, 1, high_open=True)]
"""A dropout probability, in [0, 1)."""
NonNegative = Annotated[float, AtLeast(0)]
"""A real number that is at least 0 (e.g. LeakyReLU's negative slope)."""
Positive = Annotated[float, Interval(0, low_open=True)]
"""A real number above 0 (e.g. a learning rate)."""
EpochCount = Annotated[int, AtLeast(0)]
"""A number of epochs that may be 0 (e.g. a warm-up)."""
