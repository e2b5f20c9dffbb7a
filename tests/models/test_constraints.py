"""The range vocabulary: membership at and around each bound, and the text an error shows."""
import math
import typing

import pytest

from zoo.models.constraints import AtLeast, Count, DropoutRate, Interval, NonNegative


@pytest.mark.parametrize("interval, inside, outside, text", [
    (Interval(0, 1, high_open=True), [0, 0.0, 0.5, 0.999999], [1, 1.0, -1e-12, 2.0, math.nan], "in [0, 1)"),
    (Interval(0, 1, low_open=True), [1e-12, 1, 1.0], [0, 0.0, 1.0000001, math.nan], "in (0, 1]"),
    (Interval(0, low_open=True), [1e-300, 7, math.inf], [0, -0.0, -1, math.nan], "> 0"),
    (AtLeast(1), [1, 2, 10**9], [0, -3, 0.5, math.nan], ">= 1"),
    (Interval(-1, 1), [-1, 0, 1], [-1.5, 1.5], "in [-1, 1]"),
])
def test_membership_and_text(interval, inside, outside, text):
    assert all(value in interval for value in inside)
    assert not any(value in interval for value in outside)
    assert str(interval) == text


def test_at_least_is_an_interval_without_upper_bound():
    assert AtLeast(0.5) == Interval(0.5, math.inf, False, False)


@pytest.mark.parametrize("alias, base, interval", [
    (Count, int, AtLeast(1)), (DropoutRate, float, Interval(0, 1, high_open=True)), (NonNegative, float, AtLeast(0)),
])
def test_aliases_are_annotated_types(alias, base, interval):
    assert typing.get_origin(alias) is typing.Annotated
    assert typing.get_args(alias) == (base, interval)
