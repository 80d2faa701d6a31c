"""A reasoning-gym option's value against its config's annotation: what fits, and the words for what was expected."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from datetime import date
from typing import Literal, Optional

import pytest

from align_kit.tasks.option_types import expected


class Colour(enum.Enum):
    RED = "red"
    BLUE = "blue"


@pytest.mark.parametrize(
    ("annotation", "value", "want"),
    [
        (int, 3, None),
        (int, "3", "a whole number"),  # never coerced
        (int, 3.0, "a whole number"),
        (int, True, "a whole number"),
        (float, 3, None),
        (float, 0.5, None),
        (float, float("nan"), "a finite number"),
        (float, "0.5", "a finite number"),
        (bool, False, None),
        (bool, 0, "true or false"),
        (str, "x", None),
        (str, 1, "a text"),
        (Optional[int], None, None),  # noqa: UP045 (reasoning-gym writes Optional)
        (Optional[int], "a", "a whole number or null"),  # noqa: UP045
        (int | None, 2, None),
        (Literal["simple", "natural"], "natural", None),
        (Literal["simple", "natural"], "bogus", "one of [simple, natural]"),
        (Colour, "blue", None),
        (Colour, "green", "one of [red, blue]"),
        (list[str], ("a", "b"), None),
        (list[str], ("a", 2), "a list of texts"),
        (list[str], "a", "a list of texts"),
        (tuple[str, ...], ("+", "-"), None),
        (tuple[int, int], (1, 2), None),
        (tuple[int, int], (1,), "a list of 2 items: whole number, whole number"),
        (list[tuple[float, float]], ((0.1, 0.2),), None),
        (list[tuple[float, float]], ((0.1, "x"),), "a list of values"),
        (Sequence[str], ("plain",), None),
        (tuple, (1, "a"), None),
        (tuple, 1, "a list"),
        (date, "not judged", None),  # left to the dataset's own checks and a trial generation
    ],
)
def test_a_value_fits_its_annotation_or_names_what_was_expected(annotation, value, want):
    assert expected(annotation, value) == want
