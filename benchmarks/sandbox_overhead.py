"""Per-call cost of `run_python("print(1)")` under bubblewrap vs the process-only fallback, beside a bare
`python -I -S -c "print(1)"` subprocess (what any out-of-process execution pays).

The arms alternate call by call so drift on shared cores hits them alike; medians over --calls each. With
--baseline, another version of align_kit/sandbox.py runs its two modes as further arms in the same loop, and the
ratio of each mode to its baseline is printed (with the load average before and after: the cores are shared).
Run: .venv/bin/python benchmarks/sandbox_overhead.py --calls 50
     git show main:align_kit/sandbox.py > /tmp/old_sandbox.py
     .venv/bin/python benchmarks/sandbox_overhead.py --calls 100 --baseline /tmp/old_sandbox.py
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import statistics
import subprocess
import sys
import time

from align_kit import sandbox
from align_kit.sandbox import run_python


def bare() -> None:
    subprocess.run([sandbox._interpreter(), "-I", "-S", "-c", "print(1)"], capture_output=True, check=True)


def in_mode(mode: str, run=run_python):
    def call() -> None:
        os.environ[sandbox.MODE_ENV] = mode
        result = run("print(1)")
        assert (result.status, result.output) == ("ok", "1\n"), result

    return call


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=50)
    parser.add_argument("--baseline", help="another sandbox.py to run beside this one (its process and bwrap modes)")
    args = parser.parse_args()
    modes = {"process only": "process"}
    if sandbox._bwrap_works():
        modes["bubblewrap"] = "bwrap"
    else:
        print(f"bubblewrap skipped: {sandbox._BWRAP_PROBE['why']}")
    arms = {"bare subprocess": bare, **{name: in_mode(mode) for name, mode in modes.items()}}
    if args.baseline:
        spec = importlib.util.spec_from_file_location("baseline_sandbox", args.baseline)
        baseline = sys.modules[spec.name] = importlib.util.module_from_spec(spec)  # dataclasses looks it up
        spec.loader.exec_module(baseline)
        arms.update({f"{name} (baseline)": in_mode(mode, baseline.run_python) for name, mode in modes.items()})
    print(f"load before: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")
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
        print(f"{name:27s} median {ms:6.1f} ms/call  (min {min(times[name]) * 1000:.1f}, n={args.calls})")
    if "bubblewrap" in median:
        print(f"ratio bubblewrap / process only: {median['bubblewrap'] / median['process only']:.2f}")
    print(f"ratio process only / bare subprocess: {median['process only'] / median['bare subprocess']:.2f}")
    for name in modes if args.baseline else ():
        print(f"ratio {name} / its baseline: {median[name] / median[f'{name} (baseline)']:.2f}")
    print(f"load after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f} {os.getloadavg()[2]:.2f} (1, 5, 15 min)")


if __name__ == "__main__":
    main()
