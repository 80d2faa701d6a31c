"""A full disk stops the run with one line naming the folder and the free space, never a half-written checkpoint
left as if whole.

Writes of the run's own files (config.yaml, metrics.jsonl, a checkpoint, summary.json) that fail for want of space
raise `DiskFull`; `align_kit.train.main` prints it as one line and exits with DISK_FULL_EXIT_CODE. Python's writes say
ENOSPC (or EDQUOT, over a quota); torch.save's C++ writer says only "unexpected pos ..." and safetensors "os error
28", so a failed write also counts as a full disk when the folder's file system has (almost) no space left after it.
A checkpoint whose save failed is renamed `checkpoint-N.incomplete` (nothing is deleted): resume and the sweep's
relaunch look only at `checkpoint-N` folders, so they resume from the last whole one.
"""

from __future__ import annotations

import contextlib
import errno
import shutil
from collections.abc import Iterator
from pathlib import Path

from align_kit.core.run_files import unused_name

DISK_FULL_EXIT_CODE = 1
NEARLY_FULL_BYTES = 1 << 20  # under this much free space, a failed write is taken for a full disk
_NO_SPACE = (errno.ENOSPC, errno.EDQUOT)


RUN_AGAIN = "run again or resume from the last whole checkpoint"


class DiskFull(OSError):
    def __init__(self, folder: Path, what: str, moved: Path | None = None, then: str = RUN_AGAIN):
        aside = f"; the half-written {what} was moved to {moved.name}" if moved else ""
        super().__init__(
            errno.ENOSPC,
            f"no space left writing {what} in {folder} ({_free(folder)}){aside}; free some space (or choose a "
            f"folder on another disk), then {then}",
        )


def _free(folder: Path) -> str:
    try:
        usage = shutil.disk_usage(_existing(folder))
    except OSError:
        return "free space unknown"
    return f"{_size(usage.free)} free of {_size(usage.total)}"


def _size(count: int) -> str:
    for unit in ("bytes", "KiB", "MiB", "GiB"):
        if count < 1024 or unit == "GiB":
            return f"{count:.0f} {unit}" if unit == "bytes" else f"{count:.1f} {unit}"
        count /= 1024
    raise AssertionError("unreachable")


def _existing(folder: Path) -> Path:
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    return folder


def out_of_space(error: BaseException, folder: Path) -> bool:
    """Whether `error`, raised by a write into `folder`, came from a full disk (see the module docstring)."""
    if isinstance(error, DiskFull):
        return True
    if isinstance(error, OSError) and error.errno in _NO_SPACE:
        return True
    if not isinstance(error, OSError | RuntimeError) and "Safetensor" not in type(error).__name__:
        return False  # not a failed write: a bug while saving is itself, whatever the free space
    if "No space left on device" in str(error) or "os error 28" in str(error):
        return True
    try:
        return shutil.disk_usage(_existing(folder)).free < NEARLY_FULL_BYTES
    except OSError:
        return False


@contextlib.contextmanager
def writing(folder: Path, what: str, partial: Path | None = None, then: str = RUN_AGAIN) -> Iterator[None]:
    """A write of `what` into `folder`: a failure for want of space is DiskFull (after moving `partial`, the
    checkpoint folder being written, aside; `then`: what to do once space is freed), any other failure is itself."""
    try:
        yield
    except DiskFull:
        raise
    except Exception as error:
        if out_of_space(error, folder):
            raise DiskFull(folder, what, set_aside(partial) if partial is not None else None, then) from error
        raise


def set_aside(checkpoint: Path) -> Path | None:
    """Rename a checkpoint whose save failed to `checkpoint-N.incomplete[-k]`, so nothing takes it for whole."""
    if not checkpoint.is_dir():
        return None
    target = unused_name(checkpoint.with_name(f"{checkpoint.name}.incomplete"))
    checkpoint.rename(target)
    return target
