"""Every bad input of tests/behaviour/test_bad_input_table.py through the installed `align-kit` command, each in
its own process from an empty folder: how many end in a clear one-line error (exit 2), a traceback, or
something else (a wrong behaviour), and the wall time to reject a bad config. The table's CASES (config errors),
OTHER (errors of sweep, compare and doctor, each with its own prefix) and CALLBACK (the plain-TRL HealthCallback's
arguments: each row's Python run by a driver that prints a ConfigError as one line and exits 2, as the CLI does).

Run: PYTHONPATH=. python benchmarks/bad_inputs.py   (about 1-3 s per input on 2 cores)
     PYTHONPATH=. python benchmarks/bad_inputs.py --record before.jsonl   (each case's outcome, to compare versions)
     PYTHONPATH=. python benchmarks/bad_inputs.py --lists SECURITY,LIFECYCLE   (only the table's lists named)
A command still running after --timeout seconds accepted its config and started a job: it is killed with its
process group and counted as a wrong behaviour. An exit 2 with one line that lacks the row's words (older code
refusing the same input in other words) is counted apart, as "refused in other words".
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from tests.behaviour import test_bad_input_table as table
from tests.behaviour.test_bad_input_table import (
    CALLBACK,
    CASES,
    OTHER,
    make_data_files,
    make_victims,
    victims_untouched,
)

TABLE_FILE = "tests/behaviour/test_bad_input_table.py"
# CALLBACK rows run as `python -c DRIVER CODE`: a ConfigError is the one line, as the CLI prints a config error.
CALLBACK_DRIVER = """import sys
from align_kit.core.errors import ConfigError
from tests.behaviour.test_bad_input_table import build_callback
try:
    build_callback(sys.argv[1])
except ConfigError as error:
    print(f"align-kit: config error: {error}", file=sys.stderr)
    sys.exit(2)
"""


def _row(row: tuple) -> tuple[list[str], str | None, str]:
    """(argv, the line's prefix or None, fragment) of a row of any list; a CALLBACK row's argv is ["python:", code]."""
    if len(row) == 3:
        return row
    argv, fragment = row
    return (["python:", argv] if isinstance(argv, str) else argv), None, fragment


def selected_cases(lists: str | None) -> list:
    """The table's cases, or only those of the list constants named (comma-separated, e.g. TYPES,SECURITY)."""
    if not lists:
        return [_row(row) for row in (*CASES, *OTHER, *CALLBACK)]
    cases = []
    for name in lists.split(","):
        rows = getattr(table, name.strip(), None)
        if not isinstance(rows, list):
            sys.exit(f"bad_inputs: --lists names {name.strip()!r}, not a list of {TABLE_FILE}")
        cases += [_row(row) for row in rows]
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lists", help="comma-separated list constants of the table (default: every case)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a command counts as accepted")
    parser.add_argument("--record", help="write each case's outcome (its kind and error line) to this JSONL file")
    args = parser.parse_args()
    record = open(args.record, "x") if args.record else None
    cases = selected_cases(args.lists)
    command = str(Path(sys.executable).parent / "align-kit")
    counts = {"clear": 0, "other words": 0, "traceback": 0, "wrong": 0}
    seconds, wrong = [], []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "data").mkdir()
        data = make_data_files(root / "data")
        env = dict(os.environ, ALIGN_KIT_CACHE=str(root / "cache"), WANDB_SILENT="true")
        for index, (argv, prefix, fragment) in enumerate(cases):
            written_argv = argv
            case = root / f"case{index}"
            work = case / "work"
            work.mkdir(parents=True)
            victim, victim_dir = make_victims(case)
            fill = {"{data}": str(data), "{victim_dir}": str(victim_dir), "{victim}": str(victim)}
            for placeholder, value in fill.items():
                argv = [arg.replace(placeholder, value) for arg in argv]
                fragment = fragment.replace(placeholder, value)
            started = time.perf_counter()
            if argv[0] == "python:":  # a CALLBACK row, from the repository root so that `tests` imports
                python_env = dict(env, PYTHONPATH=os.pathsep.join(filter(None, [os.getcwd(), env.get("PYTHONPATH")])))
                argv = [sys.executable, "-c", CALLBACK_DRIVER, argv[1]]
                returncode, stderr = run(argv[0], argv[1:], work, python_env, args.timeout)
            else:
                returncode, stderr = run(command, argv, work, env, args.timeout)
            seconds.append(time.perf_counter() - started)
            lines = stderr.splitlines()
            refused = returncode == 2 and len(lines) == 1 and not any(work.iterdir()) and victims_untouched(case)
            if refused:
                words = fragment in lines[0] and (prefix is None or lines[0].startswith(prefix))
                kind = "clear" if words else "other words"
            else:
                kind = "traceback" if "Traceback" in stderr else "wrong"
            counts[kind] += 1
            if record:
                # Paths of this run's scratch folder are written back as the table's placeholders, so two
                # records (two versions of the code) compare line by line.
                shown = lines[-1] if lines else ""
                for placeholder, value in fill.items():
                    shown = shown.replace(value, placeholder)
                row = {"index": index, "argv": written_argv, "kind": kind, "returncode": returncode, "line": shown}
                record.write(json.dumps(row) + "\n")
                record.flush()
            if kind != "clear":
                wrong.append(f"{kind}: {' '.join(argv)} -> rc {returncode}: {lines[-1:]}")
    print(
        f"bad inputs tried: {len(cases)}; clear one-line errors: {counts['clear']}; refused in other words: "
        f"{counts['other words']}; tracebacks: {counts['traceback']}; wrong behaviours: {counts['wrong']}"
    )
    print(
        f"wall time to reject (s): median {statistics.median(seconds):.2f}, "
        f"min {min(seconds):.2f}, max {max(seconds):.2f}, n {len(seconds)}"
    )
    for line in wrong:
        print(line)


def run(command: str, argv: list[str], work: Path, env: dict, timeout: float) -> tuple[int | None, str]:
    """(exit status, stderr) of `align-kit <argv>`; (None, ...) when it was still running after `timeout`."""
    process = subprocess.Popen(
        [command, *argv],
        cwd=work,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    try:
        _, stderr = process.communicate(timeout=timeout)
        return process.returncode, stderr
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        _, stderr = process.communicate()
        return None, stderr + f"\nstill running after {timeout:.0f} s: the config was accepted"


if __name__ == "__main__":
    main()
