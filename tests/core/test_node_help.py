"""Every knob of a reward, task or logger node says what it does (core/fields.py's `help`), so the docs reference
generated from the nodes has no blank row."""

from __future__ import annotations

import dataclasses
import importlib
import pkgutil
import typing

import pytest

import align_kit.rewards
import align_kit.tasks
import align_kit.tracking
from align_kit.core.component import BUILDABLE
from align_kit.core.fields import field_facts

PACKAGES = (align_kit.rewards, align_kit.tasks, align_kit.tracking)
PREFIXES = tuple(f"{package.__name__}." for package in PACKAGES)

# A class registers itself in BUILDABLE when its module runs, so every module is imported before the walk.
for package in PACKAGES:
    for module in pkgutil.walk_packages(package.__path__, prefix=f"{package.__name__}."):
        importlib.import_module(module.name)


def nested_dataclasses(cls: type) -> list[type]:
    """Dataclasses a node's field holds, such as the items of `penalties: list[Penalty]`: a config writes their
    keys too."""
    found = []
    for hint in typing.get_type_hints(cls).values():
        for arg in typing.get_args(hint):
            if isinstance(arg, type) and dataclasses.is_dataclass(arg) and arg not in found:
                found.append(arg)
    return found


NODES = sorted((cls for key, cls in BUILDABLE.items() if key.startswith(PREFIXES)), key=lambda cls: cls.__qualname__)
CLASSES = list(dict.fromkeys(NODES + [item for node in NODES for item in nested_dataclasses(node)]))


def test_the_walk_finds_the_nodes_of_each_package():
    names = {cls.__qualname__ for cls in CLASSES}
    # One node of each package, named by hand, and the item dataclass of a list field.
    assert {"Arena", "HttpJudge", "ToolCallsTask", "HFDatasetTask", "WandbLogger", "Penalty"} <= names
    assert all(cls.__module__.startswith(PREFIXES) for cls in CLASSES)


@pytest.mark.parametrize("cls", CLASSES, ids=lambda cls: f"{cls.__module__}.{cls.__qualname__}")
def test_every_field_has_help(cls):
    facts = field_facts(cls)
    missing = [fact.name for fact in facts if not fact.help.strip()]
    assert not missing, f"{cls.__qualname__}: fields without help: {missing}"
    for fact in facts:
        assert fact.source is None or (isinstance(fact.source, str) and fact.source.strip()), fact.name


def test_an_inherited_field_keeps_its_help_and_an_override_has_its_own():
    from align_kit.rewards.base import RewardNode
    from align_kit.rewards.format import ThinkFormat
    from align_kit.rewards.tool_steps import ToolPenalty

    def help_of(cls: type, name: str) -> str:
        return next(fact.help for fact in field_facts(cls) if fact.name == name)

    assert help_of(ThinkFormat, "weight") == help_of(RewardNode, "weight")
    assert help_of(ToolPenalty, "max_value") != help_of(RewardNode, "max_value")
