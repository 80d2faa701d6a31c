"""Whether an option value from the config fits the type a generator's config dataclass declares for it.

reasoning-gym's dataset configs are dataclasses whose fields are annotated (int, float, bool, str, Optional, Literal,
tuples and lists of those, enums); their own `validate` asserts ranges but not types, so a text where an integer is
expected ended in a traceback deep inside generation. Values arrive as YAML gives them (a list already a tuple);
nothing is coerced: "3" is not the whole number 3. Annotations this cannot judge (nested dataclasses, dates) pass,
and the dataset's own checks and a trial generation judge them.
"""

from __future__ import annotations

import enum
import math
import typing
from collections.abc import Sequence
from typing import Any

UNJUDGED = None  # what `expected` returns for an annotation it cannot judge


def expected(annotation: Any, value: Any) -> str | None:
    """What `annotation` expects, in words, when `value` does not fit it; None when it fits (or cannot be judged)."""
    origin, args = typing.get_origin(annotation), typing.get_args(annotation)
    if origin is typing.Union or type(annotation).__name__ == "UnionType":
        judged = [expected(arg, value) for arg in args]
        if any(verdict is None for verdict in judged):
            return None
        return " or ".join(verdict for verdict in judged)
    if annotation is type(None):
        return None if value is None else "null"
    if origin is typing.Literal:
        return None if value in args else f"one of [{', '.join(str(arg) for arg in args)}]"
    if annotation is bool:
        return None if isinstance(value, bool) else "true or false"
    if annotation is int:
        return None if isinstance(value, int) and not isinstance(value, bool) else "a whole number"
    if annotation is float:
        fits = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        return None if fits else "a finite number"
    if annotation is str:
        return None if isinstance(value, str) else "a text"
    if isinstance(annotation, type) and issubclass(annotation, enum.Enum):
        allowed = [member.value for member in annotation]
        return None if value in allowed or isinstance(value, annotation) else f"one of [{', '.join(map(str, allowed))}]"
    if annotation in (tuple, list) or origin in (tuple, list, Sequence):
        return _sequence(args, value)
    return UNJUDGED


def _sequence(args: tuple, value: Any) -> str | None:
    if not isinstance(value, (tuple, list)):
        item = f" of {_plural(args[0])}" if args and (len(args) == 1 or args[1:] == (Ellipsis,)) else ""
        return f"a list{item}"
    if not args:
        return None
    if len(args) == 2 and args[1] is Ellipsis or len(args) == 1:
        for item in value:
            if expected(args[0], item) is not None:
                return f"a list of {_plural(args[0])}"
        return None
    if len(value) != len(args) or any(expected(arg, item) is not None for arg, item in zip(args, value, strict=False)):
        return f"a list of {len(args)} items: {', '.join(_plural(arg, one=True) for arg in args)}"
    return None


def _plural(annotation: Any, one: bool = False) -> str:
    words = {int: ("whole number", "whole numbers"), float: ("finite number", "finite numbers"), str: ("text", "texts")}
    word = words.get(annotation, ("value", "values"))
    return word[0] if one else word[1]
