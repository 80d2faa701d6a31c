"""A run folder is locked while its run lives, so no second run can start, overwrite or resume there meanwhile.

The lock is an OS file lock (`flock`) on `<folder>/.align_kit.lock`, taken before anything else is written there and
held until the run ends. The OS drops it when the process ends, however it ends (SIGKILL included), so it never
goes stale as a PID file would. The holder writes who it is (PID, host, start time, command) into the file, so a
refused start can name it. Rank 0 alone locks a multi-process run's folder (the other ranks share it); a sweep
job locks its own job folder.

A lock is taken once per folder per process: `hold` inside a run the Hydra callback already locked is a no-op.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shlex
import socket
import sys
import time
from collections.abc import Iterator
from pathlib import Path

from align_kit.core.errors import ConfigError
from align_kit.core.processes import process_start_time

LOCK_FILE = ".align_kit.lock"
_COMMAND_CHARS = 200  # enough to recognise the command; a sweep's can be long

_held: dict[str, RunLock] = {}


class RunLock:
    def __init__(self, folder: Path, descriptor: int) -> None:
        self.folder = folder
        self.key = os.path.realpath(folder)
        self._descriptor = descriptor
        _held[self.key] = self

    def release(self) -> None:
        if _held.get(self.key) is self:
            del _held[self.key]
        with contextlib.suppress(OSError):
            os.close(self._descriptor)  # closing the last descriptor releases the flock


def held(folder: Path) -> bool:
    """Whether this process holds `folder`'s lock."""
    return os.path.realpath(folder) in _held


def _holder(descriptor: int) -> str:
    """Who holds the lock, as its holder wrote it into the file."""
    try:
        raw = os.pread(descriptor, 4096, 0)
        info = json.loads(raw)
        started = time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(float(info["started"])))
        return f"process {int(info['pid'])} on {info['host']}, started {started}: {info['command']}"
    except (OSError, ValueError, KeyError, TypeError):
        return "a process that has just started it"  # locked, but its holder has not written itself down yet


def _identity() -> bytes:
    program = sys.argv[0] if sys.argv[0].startswith("align-kit") else Path(sys.argv[0]).name  # "align-kit train"
    command = " ".join([program, shlex.join(sys.argv[1:])])
    if len(command) > _COMMAND_CHARS:
        command = command[: _COMMAND_CHARS - 3] + "..."
    info = {"pid": os.getpid(), "host": socket.gethostname(), "started": process_start_time(), "command": command}
    return json.dumps(info).encode()


def acquire(folder: Path, named: str, action: str = "a second run there") -> RunLock:
    """Lock `folder` (created if missing) for this process, or refuse (ConfigError) naming the live holder;
    `named` is how the error names the folder (e.g. `hydra.run.dir=run`)."""
    path = folder / LOCK_FILE
    try:
        folder.mkdir(parents=True, exist_ok=True)
        descriptor = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)  # never truncated: the holder's
    except OSError as error:
        raise ConfigError(f"{named} cannot be created or written ({error.strerror}); choose another folder") from None
    try:
        fcntl.flock(descriptor, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        holder = _holder(descriptor)
        os.close(descriptor)
        raise ConfigError(
            f"{named} is in use by a live run ({holder}); {action} is refused while it lives: wait for it to end "
            "(or stop it), or choose a new folder"
        ) from None
    # The folder may have been moved aside (train.overwrite=true) between open and flock: lock the new one.
    if not path.exists() or os.stat(path).st_ino != os.fstat(descriptor).st_ino:
        os.close(descriptor)
        return acquire(folder, named, action)
    os.ftruncate(descriptor, 0)
    os.pwrite(descriptor, _identity(), 0)
    return RunLock(folder, descriptor)


@contextlib.contextmanager
def hold(folder: Path, named: str) -> Iterator[None]:
    """`folder` locked for the block, unless this process already holds it (then it stays as it was)."""
    if held(folder):
        yield
        return
    lock = acquire(folder, named)
    try:
        yield
    finally:
        lock.release()


def release(folder: Path) -> None:
    lock = _held.get(os.path.realpath(folder))
    if lock is not None:
        lock.release()
