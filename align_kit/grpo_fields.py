"""GRPOConfig's field names and defaults, read from TRL's and transformers' source without
importing them (importing `trl` costs ~10 s; config errors must answer in about a second)."""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path

MISSING = object()

_SOURCES = (
    ("transformers", "training_args.py", "TrainingArguments"),
    ("trl", "trainer/grpo_config.py", "GRPOConfig"),
)


def _class_fields(package: str, relative: str, class_name: str) -> dict[str, object]:
    spec = importlib.util.find_spec(package)
    source = Path(spec.submodule_search_locations[0], relative).read_text()
    for node in ast.parse(source).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            fields = {}
            for statement in node.body:
                if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name):
                    fields[statement.target.id] = _default(statement.value)
            return fields
    raise RuntimeError(f"{class_name} not found in {package}/{relative}: TRL version changed?")


def _default(value: ast.expr | None) -> object:
    # Fields are `name: T = field(default=..., metadata=...)` or `name: T = literal`.
    if isinstance(value, ast.Call):
        for keyword in value.keywords:
            if keyword.arg == "default":
                value = keyword.value
                break
        else:
            return MISSING
    if value is None:
        return MISSING
    try:
        return ast.literal_eval(value)
    except ValueError:
        return MISSING


@lru_cache(maxsize=1)
def grpo_config_fields() -> dict[str, object]:
    """Every settable GRPOConfig field mapped to its default (MISSING when not a literal)."""
    fields: dict[str, object] = {}
    for package, relative, class_name in _SOURCES:
        fields.update(_class_fields(package, relative, class_name))
    return fields
