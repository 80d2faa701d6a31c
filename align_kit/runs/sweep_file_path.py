"""A sweep file named by its path (`align-kit sweep PATH.yaml`, `align-kit doctor RUN --sweep PATH.yaml`): what makes
a path usable as one. It runs as `sweep=<its name>` from a folder of its own, so the name must be a plain name and
no shipped sweep's (Hydra would find the shipped one first)."""

from __future__ import annotations

import re
from pathlib import Path

from align_kit import CONF_DIR

SUFFIXES = (".yaml", ".yml")


def is_sweep_path(word: str) -> bool:
    return word.endswith(SUFFIXES) and "=" not in word


def name_problem(path: Path) -> str | None:
    """Why `path`'s name cannot name a sweep (None when it can)."""
    if path.suffix not in SUFFIXES:
        return f"{path}: a sweep file's name ends in .yaml"
    if not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9_-]*", path.stem):
        return f"{path}: name it with letters, digits, _ and - only (it becomes sweep={path.stem})"
    if (CONF_DIR / "sweep" / f"{path.stem}.yaml").exists():
        return (
            f"{path}: its name {path.stem!r} is a shipped sweep's (sweeps/{path.stem}.yaml), which would be run "
            "instead; rename the file"
        )
    return None
