"""Every bad input of tests/test_validation_table.py through the installed `align-kit` command, each in
its own process from an empty folder: how many end in a clear one-line error (exit 2), a traceback, or
something else (a wrong behaviour), and the wall time to reject a bad config.

Run: PYTHONPATH=. python benchmarks/bad_inputs.py   (about 1-3 s per input on 2 cores)
     PYTHONPATH=. python benchmarks/bad_inputs.py --lists SECURITY,LIFECYCLE   (only the table's lists named)
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests import test_validation_table as table
from tests.test_validation_table import CASES, make_data_files, make_victims, victims_untouched


def selected_cases(lists: str | None) -> list:
    """The table's cases, or only those of the list constants named (comma-separated, e.g. TYPES,SECURITY)."""
    if not lists:
        return CASES
    cases = []
    for name in lists.split(","):
        rows = getattr(table, name.strip(), None)
        if not isinstance(rows, list):
            sys.exit(f"bad_inputs: --lists names {name.strip()!r}, not a list of tests/test_validation_table.py")
        cases += rows
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lists", help="comma-separated list constants of the table (default: every case)")
    cases = selected_cases(parser.parse_args().lists)
    command = str(Path(sys.executable).parent / "align-kit")
    counts = {"clear": 0, "traceback": 0, "wrong": 0}
    seconds, wrong = [], []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "data").mkdir()
        data = make_data_files(root / "data")
        env = dict(os.environ, ALIGN_KIT_CACHE=str(root / "cache"), WANDB_SILENT="true")
        for index, (argv, fragment) in enumerate(cases):
            case = root / f"case{index}"
            work = case / "work"
            work.mkdir(parents=True)
            victim, victim_dir = make_victims(case)
            fill = {"{data}": str(data), "{victim_dir}": str(victim_dir), "{victim}": str(victim)}
            for placeholder, value in fill.items():
                argv = [arg.replace(placeholder, value) for arg in argv]
                fragment = fragment.replace(placeholder, value)
            started = time.perf_counter()
            result = subprocess.run([command, *argv], cwd=work, capture_output=True, text=True, env=env)
            seconds.append(time.perf_counter() - started)
            lines = result.stderr.splitlines()
            clear = (
                result.returncode == 2
                and len(lines) == 1
                and fragment in lines[0]
                and not any(work.iterdir())
                and victims_untouched(case)
            )
            kind = "clear" if clear else "traceback" if "Traceback" in result.stderr else "wrong"
            counts[kind] += 1
            if kind != "clear":
                wrong.append(f"{kind}: {' '.join(argv)} -> rc {result.returncode}: {lines[-1:]}")
    print(
        f"bad inputs tried: {len(cases)}; clear one-line errors: {counts['clear']}; "
        f"tracebacks: {counts['traceback']}; wrong behaviours: {counts['wrong']}"
    )
    print(
        f"wall time to reject (s): median {statistics.median(seconds):.2f}, "
        f"min {min(seconds):.2f}, max {max(seconds):.2f}, n {len(seconds)}"
    )
    for line in wrong:
        print(line)


if __name__ == "__main__":
    main()
