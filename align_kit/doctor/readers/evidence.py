"""What counts as evidence that a file holds a run's metric history: rows carrying recognised metric names. Every
reader that can parse a file offers what it found (`Found`); the one with the most metric rows wins (`best`), and
when none has any, the one-line error says what each found.

A printed config is never a metric row: vLLM's compilation config, verl's Hydra config, `training_args.to_dict()`, a
dataset row. A logged metric dict is flat and mostly numbers, and the names it carries are metrics; a config nests,
holds words, flags and paths, and names settings (`num_generations`, `max_completion_length`, `temperature`, ...)
that no trainer logs as a metric.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from align_kit.doctor.keymaps import NOT_METRICS, is_known_metric, to_float

# Setting names a config holds and no trainer logs as a per-step metric: one of them marks a dict as a config.
CONFIG_FIELDS = frozenset(
    {
        "num_generations",
        "max_completion_length",
        "max_prompt_length",
        "per_device_train_batch_size",
        "gradient_accumulation_steps",
        "num_train_epochs",
        "max_steps",
        "warmup_ratio",
        "warmup_steps",
        "logging_steps",
        "save_steps",
        "output_dir",
        "model_name_or_path",
        "temperature",
        "top_p",
        "top_k",
        "min_p",
        "seed",
        "beta",
        "lora_r",
        "lora_alpha",
        "weight_decay",
        "max_grad_norm",
    }
)
# Below this share of recognised names among a dict's numeric keys, the one or two that match are settings that
# share a metric's name (`learning_rate` in a printed TrainingArguments), not a logged row.
MIN_KNOWN_SHARE = 0.05


_KEY_FACTS: dict[tuple[str, ...], tuple[bool, int]] = {}


def _key_facts(keys: tuple[str, ...]) -> tuple[bool, int]:
    """(names a setting, how many recognised metric names) of a row's keys; log rows repeat one key set, so cached."""
    facts = _KEY_FACTS.get(keys)
    if facts is None:
        if len(_KEY_FACTS) > 10_000:
            _KEY_FACTS.clear()
        facts = _KEY_FACTS[keys] = (
            any(key in CONFIG_FIELDS for key in keys),
            sum(1 for key in keys if key not in NOT_METRICS and is_known_metric(key)),
        )
    return facts


def is_config(row: Mapping[str, Any]) -> bool:
    """A printed config or data row rather than a logged metric row."""
    if not row:
        return True
    setting, known = _key_facts(tuple(row))
    if setting:
        return True
    numeric = words = 0
    for value in row.values():
        kind = type(value)
        if kind is float or kind is int:
            numeric += 1
        elif kind is dict or kind is list or kind is tuple:
            return True  # configs nest; a logged row is flat
        elif to_float(value) is not None:
            numeric += 1
        elif value is None or kind is bool or not any(char.isdigit() for char in str(value)):
            words += 1  # a flag, a name, a path; ms-swift's "5/3766" and "0.13%" are progress, not words
    if words * 2 > len(row):
        return True
    return known > 0 and known < MIN_KNOWN_SHARE * numeric


def metric_keys(row: Mapping[str, Any], columns: frozenset[str] = frozenset()) -> int:
    """How many of a row's keys are recognised metric names (or columns a --map names)."""
    known = _key_facts(tuple(row))[1]
    return known + (sum(1 for key in row if key in columns and not is_known_metric(key)) if columns else 0)


@dataclass
class Found:
    """What one reader found in a file: its runs' raw rows (by run name, "" for one run), how many rows carry
    recognised metric names, and a phrase for the error line when it found none."""

    family: str  # the format name the history will carry: trl_log_lines, verl_console, jsonl, trl_table, ...
    runs: dict[str, list] = field(default_factory=dict)  # name -> rows in the reader's own shape
    metric_rows: int = 0
    rows: int = 0
    configs: int = 0  # printed config dicts skipped
    absent: str = ""  # what was not there, when nothing was: "no `step:N` lines"
    notes: list[str] = field(default_factory=list)
    framework: str | None = None

    def describe(self) -> str:
        if self.absent and not self.rows and not self.configs:
            return f"{self.family}: {self.absent}"
        skipped = f" ({self.configs} config dict(s) skipped)" if self.configs else ""
        return f"{self.family}: {self.metric_rows} of {self.rows} rows with metric names{skipped}"


def count(found: Found, rows: Iterable[Mapping[str, Any]], columns: frozenset[str]) -> Found:
    """Fill in found.rows and found.metric_rows from its rows."""
    for row in rows:
        found.rows += 1
        if metric_keys(row, columns):
            found.metric_rows += 1
    return found


def best(candidates: list[Found]) -> Found | None:
    """The candidate with the most metric rows (the earlier on a tie); when none has any, the one with the most
    data rows (a CSV of unknown columns: its error then asks for --map); None when nothing was read at all."""
    with_metrics = [found for found in candidates if found.metric_rows]
    if with_metrics:
        return max(with_metrics, key=lambda found: found.metric_rows)  # max keeps the first of equals
    with_rows = [found for found in candidates if found.rows]
    return max(with_rows, key=lambda found: found.rows) if with_rows else None
