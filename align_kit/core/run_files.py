"""The files every run folder holds, by name: written by training, read by resume, sweeps and compare."""

import os
import re
from collections.abc import Callable
from pathlib import Path

from align_kit.core.errors import ConfigError

CONFIG_FILE = "config.yaml"  # the resolved config the run used
METRICS_FILE = "metrics.jsonl"  # one JSON object per logged step
SUMMARY_FILE = "summary.json"  # written when the run ends: final metrics, the policy, wall time
CHECKPOINT = re.compile(r"^checkpoint-(\d+)$")  # HF's checkpoint folders, checkpoint-<global step>
TRAINER_STATE = "trainer_state.json"  # HF writes it last into a checkpoint
HYDRA_RECORD = ".hydra"  # Hydra's record of the launch: config.yaml, hydra.yaml, overrides.yaml
ERROR_LOG = "error.log"  # the traceback of a sweep job that failed


def unused_name(path: Path) -> Path:
    """`path`, or `path-2`, `path-3`, ... : the first that does not exist, for a folder moved aside (nothing is
    ever renamed onto something that exists)."""
    candidate, number = path, 1
    while candidate.exists():
        number += 1
        candidate = path.with_name(f"{path.name}-{number}")
    return candidate


def latest_checkpoint(folder: Path, complete: bool = False) -> Path | None:
    """The checkpoint HF resumes from: the checkpoint-N folder with the highest N; with `complete`, the highest
    that holds trainer_state.json (HF writes it last, so a save cut short lacks it)."""
    found = [
        (int(match.group(1)), folder / name)
        for name in os.listdir(folder)
        if (match := CHECKPOINT.match(name))
        and (folder / name).is_dir()
        and (not complete or (folder / name / TRAINER_STATE).is_file())
    ]
    return max(found)[1] if found else None


def require_checkpoint(folder: Path) -> Path:
    """The checkpoint a resume of `folder` loads; a folder without one is refused."""
    checkpoint = latest_checkpoint(folder) if folder.is_dir() else None
    if checkpoint is None:
        raise ConfigError(
            f"train.resume=true but {folder} holds no checkpoint; pass the killed run's folder as "
            "hydra.run.dir=<folder> (it needs a checkpoint-*/ from trainer.save_steps)"
        )
    return checkpoint


def natural_order(path: Path) -> list:
    """A sort key: job folders 0, 1, ..., 10 sort by number, not as text ("10" before "2")."""
    return [int(part) if part.isdigit() else part for part in re.split(r"(\d+)", str(path))]


def find_folders(
    root: Path, is_match: Callable[[Path], bool], onerror: Callable[[OSError], None] | None = None
) -> list[Path]:
    """`root` when `is_match(root)`, else every matching folder below it, not inside one another (checkpoints and
    W&B files inside a run folder hold no further runs), hidden folders skipped, in natural order. `onerror` is
    called with the error of a folder that cannot be listed (os.walk passes over it by default)."""
    found = []
    for current, subfolders, _ in os.walk(root, onerror=onerror):
        if is_match(Path(current)):
            found.append(Path(current))
            subfolders.clear()
        else:
            subfolders[:] = [name for name in subfolders if not name.startswith(".")]
    return sorted(found, key=natural_order)
