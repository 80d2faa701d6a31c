"""What a node's field says about itself: what it does, where it comes from, which numbers it accepts.

A node is a dataclass. Each field is declared with `knob(...)`, which keeps its facts in the field's metadata
(`help`, `source`, `range`), and a field with a fixed set of names is annotated `Literal[...]`. `field_facts(cls)`
reads them back, one `FieldFacts` per init field: align_kit.experiment.schema checks a config against them and the
docs reference prints them, so a node's knobs are described in one place, beside their code.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import dataclass
from functools import cache
from typing import Any

SEED_LIMIT = 2**32  # numpy's and torch's seeds are unsigned 32-bit


@dataclass(frozen=True)
class Range:
    """The numbers a field accepts: bounds that may be open or closed, or missing on one side. `text`, when set,
    is the description errors show instead of the generated one."""

    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    text: str = ""

    def holds(self, value: float) -> bool:
        if self.low is not None and (value < self.low or (self.low_open and value == self.low)):
            return False
        return self.high is None or not (value > self.high or (self.high_open and value == self.high))

    def describe(self, integer: bool) -> str:
        if self.text:
            return self.text
        if self.low is not None and self.high is not None:
            brackets = ("(" if self.low_open else "[", ")" if self.high_open else "]")
            bounds = f"in {brackets[0]}{self.low:g}, {self.high:g}{brackets[1]}"
        elif self.low is not None:
            bounds = f"{'>' if self.low_open else '>='} {self.low:g}"
        else:
            bounds = f"{'<' if self.high_open else '<='} {self.high:g}"
        return f"{'an integer' if integer else 'a number'} {bounds}"


SEED = Range(0, SEED_LIMIT, high_open=True, text="an integer in [0, 2^32)")


def knob(
    default: Any = dataclasses.MISSING,
    *,
    default_factory: Any = dataclasses.MISSING,
    help: str = "",
    source: str | None = None,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    lt: float | None = None,
    text: str = "",
    within: Range | None = None,
    metadata: dict | None = None,
) -> Any:
    """A dataclass field with its facts: `help` (what it does, the recommended value), `source` (paper and section,
    or the seeds' chapter section), and its range from `ge`/`gt` (lower bound) and `le`/`lt` (upper bound), or a
    shared `within` range such as SEED; `text` words the range for errors. `metadata` adds other keys (the
    schema's `schema`, `function`)."""
    if (ge is not None and gt is not None) or (le is not None and lt is not None):
        raise ValueError("knob takes one lower bound (ge or gt) and one upper bound (le or lt)")
    low, high = (ge if gt is None else gt), (le if lt is None else lt)
    if within is not None and (low is not None or high is not None):
        raise ValueError("knob takes either `within` or bounds, not both")
    if within is None and (low is not None or high is not None):
        within = Range(low, high, low_open=gt is not None, high_open=lt is not None, text=text)
    elif text:
        raise ValueError("knob's `text` describes bounds; give ge/gt/le/lt with it")
    facts = {"help": help, "source": source, "range": within, **(metadata or {})}
    return dataclasses.field(default=default, default_factory=default_factory, metadata=facts)


@dataclass(frozen=True)
class FieldFacts:
    """One init field of a node, as the schema checks it and the docs print it."""

    name: str
    type: str  # the annotation, readable: "float | None", "list[str]"
    default: str  # as a config file writes it: "null", "true", "[a, b]"; "(required)" when there is none
    help: str
    source: str | None
    range: str | None  # the range's description, e.g. "a number > 0"
    choices: tuple[str, ...] | None  # the names a Literal annotation allows
    bounds: Range | None  # the range itself, for checking a value


def _members(hint: Any) -> tuple[Any, ...]:
    """The alternatives of a union (`float | None` -> float, NoneType), or the hint alone."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return typing.get_args(hint)
    return (hint,)


def type_text(hint: Any) -> str:
    """A type hint as a reader writes it: `float | None`, `list[str]`; a Literal by its values' type."""
    if hint is type(None) or hint is Any:
        return "None" if hint is type(None) else "Any"
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        return " | ".join(dict.fromkeys(type_text(arg) for arg in args))
    if origin is typing.Literal:
        return " | ".join(dict.fromkeys(type(arg).__name__ for arg in args))
    if origin is not None:
        inner = ", ".join(type_text(arg) for arg in args)
        return f"{origin.__name__}[{inner}]" if inner else origin.__name__
    return hint.__name__ if isinstance(hint, type) else str(hint)


def value_text(value: Any) -> str:
    """A default as a config file writes it (YAML flow style)."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, str):
        return value if value.strip() else json.dumps(value)
    if dataclasses.is_dataclass(value):
        value = {item.name: getattr(value, item.name) for item in dataclasses.fields(value) if item.init}
    if isinstance(value, dict):
        return "{" + ", ".join(f"{key}: {value_text(item)}" for key, item in value.items()) + "}"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(value_text(item) for item in value) + "]"
    return repr(value)


def _default_text(item: dataclasses.Field) -> str:
    if item.default is not dataclasses.MISSING:
        return value_text(item.default)
    if item.default_factory is not dataclasses.MISSING:
        return value_text(item.default_factory())
    return "(required)"


def _choices(hint: Any) -> tuple[str, ...] | None:
    values = [
        value
        for member in _members(hint)
        if typing.get_origin(member) is typing.Literal
        for value in typing.get_args(member)
    ]
    return tuple(values) or None


@cache
def _facts(cls: type) -> tuple[FieldFacts, ...]:
    hints = typing.get_type_hints(cls)
    found = []
    for item in dataclasses.fields(cls):
        if not item.init:
            continue
        hint = hints[item.name]
        numbers = {member for member in _members(hint) if member in (int, float)}
        bounds = item.metadata.get("range")
        found.append(
            FieldFacts(
                name=item.name,
                type=type_text(hint),
                default=_default_text(item),
                help=item.metadata.get("help", ""),
                source=item.metadata.get("source"),
                range=bounds.describe(integer=numbers == {int}) if bounds is not None else None,
                choices=_choices(hint),
                bounds=bounds,
            )
        )
    return tuple(found)


def field_facts(cls: type) -> list[FieldFacts]:
    """The facts of every init field of the dataclass `cls`, in declaration order."""
    return list(_facts(cls))
