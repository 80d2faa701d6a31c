"""GRPOConfig's field names, defaults and types, read from TRL's and transformers' source without
importing them (importing `trl` costs ~10 s; config errors must answer in about a second)."""

from __future__ import annotations

import ast
import importlib.util
from functools import lru_cache
from pathlib import Path

from align_kit.core.fields import Range

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


_AT_LEAST_ONE = Range(1)
_POSITIVE = Range(0, low_open=True)
_PROBABILITY = Range(0, 1)
_OPEN_PROBABILITY = Range(0, 1, low_open=True)  # (0, 1]: a share that must keep something
# The ranges of GRPOConfig's numbers that its types cannot say. A number not listed whose TRL default is >= 0 must be
# >= 0 (align_kit.experiment.schema).
TRAINER_RANGES: dict[str, Range] = {
    "learning_rate": _POSITIVE,
    "num_train_epochs": _POSITIVE,
    "per_device_train_batch_size": _AT_LEAST_ONE,
    "per_device_eval_batch_size": _AT_LEAST_ONE,
    "gradient_accumulation_steps": _AT_LEAST_ONE,
    "steps_per_generation": _AT_LEAST_ONE,
    "generation_batch_size": _AT_LEAST_ONE,
    "num_iterations": _AT_LEAST_ONE,
    "num_generations": Range(2, text="an integer >= 2 (group normalisation needs 2 completions per prompt)"),
    "max_completion_length": _AT_LEAST_ONE,
    "warmup_ratio": _PROBABILITY,  # transformers before 5 names it; a field TRL lacks is refused by name first
    "adam_beta1": Range(0, 1, high_open=True),
    "adam_beta2": Range(0, 1, high_open=True),
    "adam_epsilon": _POSITIVE,
    "temperature": _POSITIVE,
    "top_p": _OPEN_PROBABILITY,
    "min_p": _PROBABILITY,
    "repetition_penalty": _POSITIVE,
    "epsilon": _POSITIVE,
    "epsilon_high": _POSITIVE,
    "top_entropy_quantile": _OPEN_PROBABILITY,
    "vllm_gpu_memory_utilization": _OPEN_PROBABILITY,
    "vllm_tensor_parallel_size": _AT_LEAST_ONE,
    "save_total_limit": _AT_LEAST_ONE,  # null keeps every checkpoint
}
# Optional in GRPOConfig, but the batch shape and the length budget are computed from them.
TRAINER_REQUIRED = ("num_generations", "max_completion_length")
# transformers reads a value below 1 as a share of the total steps.
STEP_INTERVALS = ("logging_steps", "save_steps", "eval_steps")
STEP_INTERVAL_TEXT = "an integer >= 1, or a share of the run in (0, 1)"


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
