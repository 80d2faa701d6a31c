"""align_kit.core.fields: ranges, the knob that puts a field's facts in its metadata, and field_facts."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing
from dataclasses import dataclass, field
from typing import Literal

import pytest

from align_kit.core.fields import SEED, Range, field_facts, knob


@pytest.mark.parametrize(
    ("bounds", "inside", "outside", "integer", "text"),
    [
        (Range(0, low_open=True), [1e-9, 5], [0, -1], False, "a number > 0"),
        (Range(1), [1, 2**40], [0.999, 0, -3], True, "an integer >= 1"),
        (Range(0), [0, 0.5], [-1e-9], True, "an integer >= 0"),
        (Range(0, 1), [0, 1, 0.5], [-0.1, 1.01], False, "a number in [0, 1]"),
        (Range(0, 1, low_open=True), [1, 1e-9], [0, 1.5], False, "a number in (0, 1]"),
        (Range(0, 1, high_open=True), [0, 0.999], [1, -0.5], False, "a number in [0, 1)"),
        (Range(high=5, high_open=True), [4.9, -100], [5, 6], False, "a number < 5"),
        (Range(high=5), [5, -100], [5.01], True, "an integer <= 5"),
        (Range(1e-4), [1e-4], [9e-5], False, "a number >= 0.0001"),
        (SEED, [0, 2**32 - 1], [-1, 2**32], True, "an integer in [0, 2^32)"),
        (Range(2, text="two or more"), [2], [1], True, "two or more"),
    ],
)
def test_range_holds_and_describes_its_bounds(bounds, inside, outside, integer, text):
    assert all(bounds.holds(value) for value in inside)
    assert not any(bounds.holds(value) for value in outside)
    assert bounds.describe(integer) == text


def test_knob_puts_help_source_and_range_in_the_metadata():
    item = knob(0.5, help="A share.", source="DAPO §3.1", gt=0, le=1)
    assert item.default == 0.5
    assert dict(item.metadata) == {"help": "A share.", "source": "DAPO §3.1", "range": Range(0, 1, low_open=True)}
    listed = knob(default_factory=list, help="Names.")
    assert listed.default_factory is list and listed.default is dataclasses.MISSING
    assert (listed.metadata["source"], listed.metadata["range"]) == (None, None)
    assert knob(0, within=SEED).metadata["range"] is SEED
    worded = knob(3, ge=1, text="an integer >= 1 (one per round)").metadata["range"]
    assert worded == Range(1, text="an integer >= 1 (one per round)")
    assert knob(lt=2, metadata={"schema": int}).metadata["schema"] is int


@pytest.mark.parametrize(
    "arguments",
    [{"ge": 0, "gt": 0}, {"le": 1, "lt": 1}, {"within": SEED, "ge": 0}, {"text": "words without bounds"}],
    ids=["two lower bounds", "two upper bounds", "within and a bound", "text without bounds"],
)
def test_knob_refuses_contradictory_bounds(arguments):
    with pytest.raises(ValueError):
        knob(1, **arguments)


@dataclass
class Inner:
    size: int = 2
    label: str = "x"


@dataclass
class Probe:
    mode: Literal["fast", "slow"] = knob("fast", help="How fast it goes.", source="Paper §2")
    rate: float | None = knob(None, gt=0, help="A rate.")
    count: int = knob(3, ge=1, le=10, help="A count.")
    level: Literal["low", "high"] | None = knob(None, help="A level, or none.")
    names: list[str] = knob(default_factory=lambda: ["a", "b"], help="Names.")
    inner: Inner = knob(default_factory=Inner, help="A nested block.")
    plain: bool = False
    needed: str = ""
    hidden: int = field(default=0, init=False)


def test_field_facts_read_a_dataclass_in_declaration_order():
    facts = {facts.name: facts for facts in field_facts(Probe)}
    assert list(facts) == ["mode", "rate", "count", "level", "names", "inner", "plain", "needed"]
    mode = facts["mode"]
    assert (mode.type, mode.default, mode.help, mode.source) == ("str", "fast", "How fast it goes.", "Paper §2")
    assert (mode.choices, mode.range, mode.bounds) == (("fast", "slow"), None, None)
    rate = facts["rate"]
    assert (rate.type, rate.default, rate.range, rate.choices) == ("float | None", "null", "a number > 0", None)
    assert rate.bounds == Range(0, low_open=True)
    assert (facts["count"].type, facts["count"].default, facts["count"].range) == ("int", "3", "an integer in [1, 10]")
    assert (facts["level"].type, facts["level"].choices) == ("str | None", ("low", "high"))
    assert (facts["names"].type, facts["names"].default) == ("list[str]", "[a, b]")
    assert (facts["inner"].type, facts["inner"].default) == ("Inner", "{size: 2, label: x}")
    plain = facts["plain"]
    assert (plain.type, plain.default, plain.help, plain.source, plain.range) == ("bool", "false", "", None, None)
    assert facts["needed"].default == '""'


def _node_classes() -> set[type]:
    """Every node dataclass of components/, models/ and monitor/settings.py, with the dataclasses of their blocks
    (the monitor's rule settings, the tiny model's warm start)."""
    from align_kit import components, models
    from align_kit.core.component import BUILDABLE

    for package in (components, models):
        for module in pkgutil.iter_modules(package.__path__):
            importlib.import_module(f"{package.__name__}.{module.name}")
    importlib.import_module("align_kit.monitor.settings")
    prefixes = ("align_kit.components.", "align_kit.models.", "align_kit.monitor.settings")
    found = {cls for path, cls in BUILDABLE.items() if path.startswith(prefixes) and dataclasses.is_dataclass(cls)}
    pending = list(found)
    while pending:
        cls = pending.pop()
        hints = typing.get_type_hints(cls)
        for item in dataclasses.fields(cls):
            block = item.metadata.get("schema") or hints[item.name]
            if dataclasses.is_dataclass(block) and block not in found:
                found.add(block)
                pending.append(block)
    return found


def test_every_field_of_the_components_models_and_monitor_settings_has_help():
    classes = _node_classes()
    names = {cls.__name__ for cls in classes}
    assert {
        "TRLAdvantage",
        "HFRollout",
        "TinyModel",
        "WarmStartConfig",
        "HealthMonitorConfig",
        "RewardPlateau",
    } <= names
    missing = [f"{cls.__name__}.{facts.name}" for cls in classes for facts in field_facts(cls) if not facts.help]
    assert missing == []
