"""What differs between two resolved configs, key by key: a run's resume checks its config.yaml with it, and a
sweep's relaunch each job's recorded config (align_kit.runs.run_folder, align_kit.runs.sweep_manifest)."""

from __future__ import annotations

import math
from typing import Any

# Keys a resume may change: they say how long to train, how to log and where files live, not what is trained.
RESUME_MAY_CHANGE = (
    "train.resume",
    "train.overwrite",
    "trainer.max_steps",
    "trainer.disable_tqdm",
    "logger.*",
    "paths.*",
)
RESUME_MAY_CHANGE_TEXT = "trainer.max_steps (raised), trainer.disable_tqdm, logger.*, paths.*"


def flatten(config: Any, prefix: str = "") -> dict[str, Any]:
    if not isinstance(config, dict):
        return {prefix.rstrip("."): config}
    flat: dict[str, Any] = {}
    for key, value in config.items():
        flat.update(
            flatten(value, f"{prefix}{key}.") if isinstance(value, dict) and value else {f"{prefix}{key}": value}
        )
    return flat


def _may_change(key: str, saved: Any, composed: Any) -> bool:
    if key == "trainer.max_steps":
        return isinstance(saved, int) and isinstance(composed, int) and composed >= saved
    return any(
        key == allowed or (allowed.endswith("*") and key.startswith(allowed[:-1])) for allowed in RESUME_MAY_CHANGE
    )


def _same(saved: Any, composed: Any) -> bool:
    if isinstance(saved, float) and isinstance(composed, float) and math.isnan(saved) and math.isnan(composed):
        return True
    return saved == composed and type(saved) is type(composed)


def config_differences(saved: dict, composed: dict) -> list[str]:
    """`key (saved -> composed)` for every key outside RESUME_MAY_CHANGE that differs; absent keys show as unset."""
    old, new = flatten(saved), flatten(composed)
    unset = object()
    differing = []
    for key in sorted(old.keys() | new.keys()):
        before, after = old.get(key, unset), new.get(key, unset)
        if not _same(before, after) and not _may_change(key, before, after):
            shown = ["unset" if value is unset else repr(value) for value in (before, after)]
            differing.append(f"{key} ({shown[0]} -> {shown[1]})")
    return differing
