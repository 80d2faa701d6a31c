"""The process layout a launcher (torchrun, accelerate launch) gives this process.

Read from the launcher's environment (WORLD_SIZE, RANK), so the pre-flight, Hydra's callbacks and the
run-folder writes know it before torch.distributed or accelerate start. Rank 0 owns a run's outputs:
config.yaml, metrics.jsonl, summary.json, alerts, the W&B run; every rank trains.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from align_kit.core.errors import ConfigError

# How long another rank waits for rank 0 to open the run folder (Hydra writes .hydra/ right after its checks).
FOLDER_WAIT_S = 120.0


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return int(os.environ.get("RANK", "0"))


def is_main_process() -> bool:
    return rank() == 0


def require_named_run_folder(hydra_overrides: list[str]) -> None:
    """Each process would pick its own timestamped folder: a multi-process run names one for all."""
    if world_size() > 1 and not any(o.lstrip("+").startswith("hydra.run.dir=") for o in hydra_overrides):
        raise ConfigError(
            f"{world_size()} processes (WORLD_SIZE) share one run folder, and each would stamp its own: "
            "name it, hydra.run.dir=<folder>"
        )


def process_start_time() -> float:
    """When this process started (the epoch time), from /proc; a launcher starts every rank at once."""
    started = start_time_of("self")
    return started if started is not None else time.time() - time.process_time()


def start_time_of(pid: int | str) -> float | None:
    """When process `pid` started (the epoch time), from /proc; None where that cannot be read (no such process,
    no /proc). With the PID it names one process: a PID the OS reuses later belongs to one that started later."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        lines = Path("/proc/stat").read_text().splitlines()
        boot = next(int(line.split()[1]) for line in lines if line.startswith("btime"))
        return boot + int(fields[19]) / os.sysconf("SC_CLK_TCK")
    except (OSError, StopIteration, IndexError, ValueError):
        return None


def wait_for_main_process(folder: Path, started: float, timeout_s: float = FOLDER_WAIT_S) -> None:
    """Another rank waits until rank 0 has checked the run folder and Hydra has opened it (a .hydra/config.yaml
    written after this process started), so it never writes there first and trips rank 0's own check."""
    marker = folder / ".hydra" / "config.yaml"
    deadline = time.monotonic() + timeout_s
    while not (marker.exists() and marker.stat().st_mtime >= started - 1.0):
        if time.monotonic() > deadline:
            raise ConfigError(
                f"rank {rank()}: rank 0 did not open the run folder {folder} within {timeout_s:.0f} s; "
                "see rank 0's error above"
            )
        time.sleep(0.2)
