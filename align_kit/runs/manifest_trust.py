"""What `align-kit sweep --resume` takes on trust from a sweep manifest.

A resume relaunches the sweep from its manifest (align_kit.runs.sweep_manifest): the first launch's overrides, its
`--config-dir`, and each job's overrides and folder. A sweep folder can be handed over, and its manifest then holds
someone else's command line, which could switch on what only the user may (a model folder's own code, uploads with
the user's token, a cache or output folder elsewhere, the environment's secrets in saved files). So:
- each launch records its manifest's fingerprint (the hash of those overrides and that folder) in this account's cache
  (LAUNCHES); a manifest whose fingerprint is recorded there is the user's own command line;
- any other manifest's overrides count as a shared file's (align_kit.experiment.typed_overrides): what only the
  command line may give is refused unless typed again on the `--resume` line, where the user sees it;
- whoever wrote it, its jobs must be the ones its sweep makes from those overrides, in order, and each job's folder,
  where recorded, must lie inside the sweep folder.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from align_kit.core.errors import ConfigError

LAUNCHES = "sweep_launches"  # in the cache: one empty file per fingerprint this account launched
FIX = "restore it, or start the sweep in a new folder"


def cache_root() -> Path:
    """This account's align_kit cache, from the environment alone (a manifest cannot choose where its record is)."""
    return Path(os.environ.get("ALIGN_KIT_CACHE") or Path.home() / ".cache" / "align_kit")


def fingerprint(manifest: dict) -> str:
    """The hash of what a resume relaunches from: the overrides (task and Hydra) and the --config-dir."""
    launched = [manifest["task_overrides"], manifest.get("hydra_overrides", []), manifest.get("config_dir")]
    return hashlib.sha256(json.dumps(launched).encode()).hexdigest()


def record_launch(manifest: dict) -> None:
    """Record that this account launched `manifest` (at each launch, as it is written). A cache that cannot be
    written leaves no record: the sweep still runs, and its resume takes the manifest as a shared file."""
    folder = cache_root() / LAUNCHES
    try:
        folder.mkdir(parents=True, exist_ok=True, mode=0o700)
        (folder / fingerprint(manifest)).touch()
    except OSError:
        pass


def launched_here(manifest: dict) -> bool:
    """Whether this account's align-kit launched `manifest` as it is (its record is in the cache, and is ours)."""
    record = cache_root() / LAUNCHES / fingerprint(manifest)
    try:
        return record.stat().st_uid == os.getuid()
    except OSError:
        return False


def check_job_folders(sweep_dir: Path, manifest: dict) -> None:
    """Each job's recorded folder lies inside the sweep folder (symlinks followed); one ConfigError line otherwise."""
    inside = os.path.realpath(sweep_dir)
    for number, entry in enumerate(manifest["jobs"]):
        folder = entry.get("folder")
        if folder is None:
            continue
        real = os.path.realpath(os.path.join(inside, folder))
        if not real.startswith(inside.rstrip(os.sep) + os.sep):
            raise ConfigError(
                f"{Path(sweep_dir) / 'sweep_manifest.json'}: jobs[{number}].folder={folder} is not inside the sweep "
                f"folder ({inside}); a manifest names only its own jobs' folders: {FIX}"
            )


def check_jobs_made(sweep_dir: Path, manifest: dict, made: list[tuple[str, ...]]) -> None:
    """The manifest's jobs are `made` (each job's task overrides, as the sweep expands now), in order; one ConfigError
    line naming the first that differs."""
    listed = [tuple(entry["overrides"]) for entry in manifest["jobs"]]
    for number in range(max(len(listed), len(made))):
        saved = " ".join(listed[number]) if number < len(listed) else None
        now = " ".join(made[number]) if number < len(made) else None
        if saved != now:
            raise ConfigError(
                f"{Path(sweep_dir) / 'sweep_manifest.json'} lists job {number} as {saved or '(none)'}, but its sweep "
                f"makes {now or '(none)'} from the manifest's own overrides; a resume runs only the jobs its sweep "
                f"makes: {FIX}"
            )
