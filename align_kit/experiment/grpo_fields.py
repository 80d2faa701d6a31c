"""GRPOConfig's field names, defaults and types, read from TRL's and transformers' source without
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
# Where transformers defines the enums its `Enum | str` annotations name (lr_scheduler_type, optim, ...).
_ENUM_SOURCES = (("transformers", "trainer_utils.py"), ("transformers", "training_args.py"))

# GRPOConfig's string fields take a fixed set of names that TRL lists only in help text and checks
# after the model has loaded; the values below are the ones TRL 1.16's help text names.
GRPO_CHOICES = {
    "loss_type": ("grpo", "dr_grpo", "dapo", "bnpo", "cispo", "sapo", "luspo", "vespo"),
    "scale_rewards": ("group", "batch", "none"),
    "importance_sampling_level": ("token", "sequence"),
    "multi_objective_aggregation": ("sum_then_normalize", "normalize_then_sum"),
    "vllm_mode": ("server", "colocate"),
    "vllm_model_impl": ("transformers", "vllm"),
    "vllm_importance_sampling_mode": ("token_truncate", "token_mask", "sequence_truncate", "sequence_mask"),
}


def _source(package: str, relative: str) -> ast.Module:
    spec = importlib.util.find_spec(package)
    return ast.parse(Path(spec.submodule_search_locations[0], relative).read_text())


def _class_body(package: str, relative: str, class_name: str) -> list[ast.stmt]:
    for node in _source(package, relative).body:
        if isinstance(node, ast.ClassDef) and node.name == class_name:
            return node.body
    raise RuntimeError(f"{class_name} not found in {package}/{relative}: TRL version changed?")


def _fields(package: str, relative: str, class_name: str) -> dict[str, ast.AnnAssign]:
    return {
        statement.target.id: statement
        for statement in _class_body(package, relative, class_name)
        if isinstance(statement, ast.AnnAssign) and isinstance(statement.target, ast.Name)
    }


def _keyword(value: ast.expr | None, name: str) -> ast.expr | None:
    if isinstance(value, ast.Call):
        return next((keyword.value for keyword in value.keywords if keyword.arg == name), None)
    return None


def _default(value: ast.expr | None) -> object:
    # Fields are `name: T = field(default=..., metadata=...)` or `name: T = literal`.
    if isinstance(value, ast.Call):
        value = _keyword(value, "default")
    if value is None:
        return MISSING
    try:
        return ast.literal_eval(value)
    except ValueError:
        return MISSING


def _metadata_choices(value: ast.expr | None) -> tuple[str, ...] | None:
    metadata = _keyword(value, "metadata")
    if not isinstance(metadata, ast.Dict):
        return None
    for key, item in zip(metadata.keys, metadata.values, strict=True):
        if isinstance(key, ast.Constant) and key.value == "choices":
            try:
                return tuple(ast.literal_eval(item))
            except ValueError:
                return None
    return None


@lru_cache(maxsize=1)
def _all_fields() -> dict[str, ast.AnnAssign]:
    fields: dict[str, ast.AnnAssign] = {}
    for package, relative, class_name in _SOURCES:
        fields.update(_fields(package, relative, class_name))
    return fields


@lru_cache(maxsize=1)
def grpo_config_fields() -> dict[str, object]:
    """Every settable GRPOConfig field mapped to its default (MISSING when not a literal)."""
    return {name: _default(statement.value) for name, statement in _all_fields().items()}


@lru_cache(maxsize=1)
def grpo_field_annotations() -> dict[str, tuple[ast.expr, tuple[str, ...] | None]]:
    """Every GRPOConfig field mapped to (its annotation as written, its choices if the source lists them)."""
    return {
        name: (statement.annotation, GRPO_CHOICES.get(name) or _metadata_choices(statement.value))
        for name, statement in _all_fields().items()
    }


@lru_cache(maxsize=1)
def transformers_enums() -> dict[str, tuple[str, ...]]:
    """The string values of transformers' `ExplicitEnum` classes (SchedulerType, OptimizerNames, ...)."""
    enums: dict[str, tuple[str, ...]] = {}
    for package, relative in _ENUM_SOURCES:
        for node in _source(package, relative).body:
            if not isinstance(node, ast.ClassDef) or not any(
                isinstance(base, ast.Name) and base.id.endswith("Enum") for base in node.bases
            ):
                continue
            values = [
                statement.value.value
                for statement in node.body
                if isinstance(statement, ast.Assign)
                and isinstance(statement.value, ast.Constant)
                and isinstance(statement.value.value, str)
            ]
            if values:
                enums[node.name] = tuple(values)
    return enums
