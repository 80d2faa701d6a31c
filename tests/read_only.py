"""A folder this process cannot write into, for the tests of refused output folders.

Permission bits do not stop root (the test machines run as root): a folder chmod-ed 0o555 is tried first, and when
this process can still create a file there, sysfs's /sys/kernel, which refuses new files to every user."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest


def writable(folder: Path) -> bool:
    try:
        with tempfile.TemporaryFile(dir=folder):
            return True
    except OSError:
        return False


def unwritable_folder(tmp_path: Path) -> Path:
    folder = tmp_path / "read_only"
    folder.mkdir()
    os.chmod(folder, 0o555)
    if not writable(folder):
        return folder
    sysfs = Path("/sys/kernel")
    if sysfs.is_dir() and not writable(sysfs):
        return sysfs
    pytest.skip("no folder this process cannot write (root without sysfs)")
