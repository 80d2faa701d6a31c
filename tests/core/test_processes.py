"""Several processes (torchrun / accelerate launch): what each rank reads from its launcher and the run-folder checks
that count processes. The runs themselves are in tests/behaviour/test_multiprocess.py."""

from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest

from align_kit.core.errors import ConfigError
from align_kit.core.processes import process_start_time, require_named_run_folder, wait_for_main_process


def test_a_multi_process_run_names_its_folder(two_processes):
    require_named_run_folder(["hydra.run.dir=outputs/x"])
    with pytest.raises(ConfigError, match=r"2 processes .* hydra.run.dir=<folder>"):
        require_named_run_folder(["hydra.job.chdir=false"])


def test_one_process_needs_no_folder_name(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    require_named_run_folder([])


def test_other_ranks_wait_for_rank_0_to_open_the_folder(tmp_path, monkeypatch):
    monkeypatch.setenv("RANK", "1")
    marker = tmp_path / ".hydra" / "config.yaml"
    marker.parent.mkdir()
    marker.write_text("old: run\n")
    old = time.time() - 3600
    os.utime(marker, (old, old))  # an earlier run's folder: not rank 0's work
    with pytest.raises(ConfigError, match=r"rank 1: rank 0 did not open the run folder"):
        wait_for_main_process(tmp_path, started=time.time(), timeout_s=0.3)
    marker.write_text("new: run\n")
    wait_for_main_process(tmp_path, started=time.time() - 1, timeout_s=0.3)


def test_process_start_time_is_when_the_process_started():
    # A child started now: its start time lies between the clock before and after it ran (to within /proc's
    # whole-second boot time). The test process itself may have started long ago (a slow suite), but not later.
    before = time.time()
    code = "from align_kit.core.processes import process_start_time; print(process_start_time())"
    printed = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    after = time.time()
    assert before - 1 < float(printed) <= after
    assert process_start_time() <= before
