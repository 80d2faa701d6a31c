"""One builder per cache entry: processes that need the same entry at once (parallel sweep jobs, the test suite's
parallel workers) wait for the first one's build and load it, instead of each building it again.

The lock is an OS file lock (`flock`) on `<entry>.lock` beside the entry; it ends with the process that holds it, so
a build that is killed leaves no lock behind (its partial folder never looks complete: the builders rename)."""

from __future__ import annotations

import contextlib
import fcntl
from collections.abc import Iterator
from pathlib import Path


@contextlib.contextmanager
def building(entry: Path) -> Iterator[None]:
    """Held while this process checks for `entry` and builds it; callers check again once inside."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    with open(entry.with_name(f"{entry.name}.lock"), "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the handle closes
        yield
