"""Every bad input of tests/behaviour/test_bad_input_table.py through the installed `align-kit` command, each in
its own process from an empty folder: how many end in a clear one-line error (exit 2), a traceback, or
something else (a wrong behaviour), and the wall time to reject a bad config.

Run: PYTHONPATH=. python benchmarks/bad_inputs.py   (about 1-3 s per input on 2 cores)
     PYTHONPATH=. python benchmarks/bad_inputs.py --record before.jsonl   (each case's outcome, to compare versions)
     PYTHONPATH=. python benchmarks/bad_inputs.py --lists SECURITY,LIFECYCLE   (only the table's lists named)
     PYTHONPATH=. python benchmarks/bad_inputs.py --since main   (only the rows added since; --before main: the others)
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
from tests.behaviour.test_bad_input_table import CASES, make_data_files, make_victims, victims_untouched

TABLE_FILE = "tests/behaviour/test_bad_input_table.py"


def every_case() -> list:
    """The table's config-error cases, then the cases whose one line is another command's error (compare, sweep)."""
    return CASES + [(argv, fragment) for argv, _, fragment in table.LIFECYCLE_OTHER]


def rows_at(ref: str) -> set[str]:
    """The argv of every row the table held at git revision `ref` (its file read with `git show`, then run)."""
    source = subprocess.run(["git", "show", f"{ref}:{TABLE_FILE}"], capture_output=True, text=True, check=True).stdout
    namespace: dict = {"__name__": "bad_input_table_at_ref"}
    exec(compile(source, f"{ref}:{TABLE_FILE}", "exec"), namespace)
    old = namespace["CASES"] + [(argv, fragment) for argv, _, fragment in namespace.get("LIFECYCLE_OTHER", [])]
    return {" ".join(argv) for argv, _ in old}


def selected_cases(lists: str | None, since: str | None = None) -> list:
    """The table's cases, or only those of the list constants named (comma-separated, e.g. TYPES,SECURITY); with
    `since` (a git revision), only the rows added after it."""
    cases = every_case() if not lists else _listed(lists)
    if since:
        old = rows_at(since)
        cases = [(argv, fragment) for argv, fragment in cases if " ".join(argv) not in old]
    return cases


def _listed(lists: str) -> list:
    cases = []
    for name in lists.split(","):
        rows = getattr(table, name.strip(), None)
        if not isinstance(rows, list):
            sys.exit(f"bad_inputs: --lists names {name.strip()!r}, not a list of {TABLE_FILE}")
        cases += rows
    return cases


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--lists", help="comma-separated list constants of the table (default: every case)")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds before a command counts as accepted")
    parser.add_argument("--record", help="write each case's outcome (its kind and error line) to this JSONL file")
    parser.add_argument("--since", help="only the rows added to the table after this git revision (e.g. main)")
    parser.add_argument("--before", help="only the rows the table held at this git revision")
    args = parser.parse_args()
    record = open(args.record, "x") if args.record else None
    cases = selected_cases(args.lists, args.since)
    if args.before:
        held = rows_at(args.before)
        cases = [(argv, fragment) for argv, fragment in cases if " ".join(argv) in held]
    command = str(Path(sys.executable).parent / "align-kit")
    counts = {"clear": 0, "other words": 0, "traceback": 0, "wrong": 0}
    seconds, wrong = [], []
    with tempfile.TemporaryDirectory() as scratch:
        root = Path(scratch)
        (root / "data").mkdir()
        data = make_data_files(root / "data")
        env = dict(os.environ, ALIGN_KIT_CACHE=str(root / "cache"), WANDB_SILENT="true")
        for index, (argv, fragment) in enumerate(cases):
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
            returncode, stderr = run(command, argv, work, env, args.timeout)
            seconds.append(time.perf_counter() - started)
            lines = stderr.splitlines()
            refused = returncode == 2 and len(lines) == 1 and not any(work.iterdir()) and victims_untouched(case)
            if refused:
                kind = "clear" if fragment in lines[0] else "other words"
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
