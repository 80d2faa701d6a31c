"""How far a reasoning-gym option may go: up to the hardest level of the dataset's own curriculum.

reasoning-gym declares, beside most datasets, a curriculum (`reasoning_gym.coaching`): for each attribute that sets an
item's size or difficulty (chain_sum's number of terms, a grid's rows, a number's digits) the config fields it moves
and the levels its authors generate, easiest first. The generators' time grows with those fields, often without bound:
`max_terms=99999999999` draws a chain of billions of terms and the pre-flight never returned. A value past the
hardest level is outside what the library is built for, so it is refused before anything is generated; the easy side
is the dataset's own check (`validate`). Levels that are not numbers, or do not run one way, bound nothing.
"""

from __future__ import annotations

import numbers
from collections.abc import Mapping
from itertools import pairwise
from typing import Any

from align_kit.core.errors import ConfigError


def check_curriculum_ranges(name: str, options: Mapping[str, Any]) -> None:
    """Each of `options` (dataset `name`'s, as given) that a curriculum attribute moves lies within its hardest
    level; one ConfigError line naming the first that does not, its attribute's levels and the value to choose."""
    for key, value in options.items():
        if not _number(value):
            continue  # a type the option checks refuse, or not a number
        for attribute in _attributes_moving(name, key):
            levels = attribute.levels
            hardest, rising = levels[-1], levels[-1] > levels[0]
            if (value > hardest) if rising else (value < hardest):
                what = f"{attribute.description}; " if attribute.description else ""
                raise ConfigError(
                    f"task.options.{name}.{key}={value}: past the hardest level of reasoning-gym's curriculum for "
                    f"{name}'s {attribute.name} ({what}its levels run from {levels[0]} to {hardest}): the time to "
                    f"generate an item grows with it; choose {key} {'<=' if rising else '>='} {hardest}"
                )


def _attributes_moving(name: str, key: str) -> list:
    """The attributes of `name`'s curriculum that set the config field `key`, whose levels are numbers running one
    way (strictly rising or falling)."""
    from reasoning_gym.factory import CURRICULA

    if name not in CURRICULA:
        return []
    found = []
    for attribute in CURRICULA[name]()._attributes.values():
        fields = [getattr(attribute, f, None) for f in ("field_name", "lower_field_name", "upper_field_name")]
        levels = list(attribute.levels)
        if key not in fields or len(levels) < 2 or not all(map(_number, levels)):
            continue
        steps = list(pairwise(levels))
        if all(a < b for a, b in steps) or all(a > b for a, b in steps):
            found.append(attribute)
    return found


def _number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)
