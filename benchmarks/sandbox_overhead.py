"""Per-call cost of `run_python("print(1)")` under bubblewrap vs the process-only fallback, beside a bare
`python -I -S -c "print(1)"` subprocess (what any out-of-process execution pays).

The three arms alternate call by call so drift on shared cores hits them alike; medians over --calls each.
Run: .venv/bin/python benchmarks/sandbox_overhead.py --calls 50
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from align_kit import sandbox
from align_kit.sandbox import run_python


def bare() -> None:
    subprocess.run([sandbox._interpreter(), "-I", "-S", "-c", "print(1)"], capture_output=True, check=True)


def in_mode(mode: str):
    def call() -> None:
        os.environ[sandbox.MODE_ENV] = mode
        result = run_python("print(1)")
        assert (result.status, result.output) == ("ok", "1\n"), result

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    args = parser.parse_args()
    arms = {"bare subprocess": bare, "process only": in_mode("process")}
    if sandbox._bwrap_works():
        arms["bubblewrap"] = in_mode("bwrap")
    else:
        print(f"bubblewrap skipped: {sandbox._BWRAP_PROBE['why']}")
    for call in arms.values():  # warm up: page cache, bwrap's one-time probe
        call()
    times: dict[str, list[float]] = {name: [] for name in arms}
    for _ in range(args.calls):
        for name, call in arms.items():
            start = time.perf_counter()
            call()
            times[name].append(time.perf_counter() - start)
    median = {name: statistics.median(t) * 1000 for name, t in times.items()}
    for name, ms in median.items():
        print(f"{name:16s} median {ms:6.1f} ms/call  (min {min(times[name]) * 1000:.1f}, n={args.calls})")
    if "bubblewrap" in median:
        print(f"ratio bubblewrap / process only: {median['bubblewrap'] / median['process only']:.2f}")
    print(f"ratio process only / bare subprocess: {median['process only'] / median['bare subprocess']:.2f}")


if __name__ == "__main__":
    main()
