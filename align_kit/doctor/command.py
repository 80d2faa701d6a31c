"""`align-kit doctor PATH...`: read each run's logged history, replay the health monitor's rules over it, print a
verdict, the timeline of what fired, what could not be judged and the advice; `--json` for automation.

Exit codes: 0 healthy, 1 warning, 3 failing, 4 unjudged (the worst run decides), 2 bad input (one line naming the
file and what was expected; with --json also a JSON object with an "error" field on stdout, so a `| jq` consumer
reads it). Only the standard library is imported at module level, so `align-kit doctor --help` answers at once.
"""

from __future__ import annotations

import argparse
import difflib
import math
import os
import sys
from collections.abc import Sequence
from operator import itemgetter
from pathlib import Path
from typing import NoReturn

DESCRIPTION = """Diagnose GRPO runs from their logs, trained with align_kit, TRL, verl, OpenRLHF or anything that logs a
CSV/JSONL: the live health monitor's rules replayed over the logged history (one implementation), a verdict
(healthy / warning / failing / unjudged), the timeline of what fired, the rules that could not judge and why, and
advice in the run's own framework's terms, ordered by the tuning priorities of 18.3.8 (data > clipping > KL and
learning rate > sampling).

inputs (detected by content): an align_kit run or sweep folder, a TRL trainer_state.json (or an output or
checkpoint folder holding one), a console log / SLURM output / notebook / pasted excerpt with TRL log dicts or
verl step lines, a progress table (CSV or text), a W&B offline run folder, wandb:ENTITY/PROJECT/RUN_ID, a W&B CSV
export, or any CSV/JSONL with --map."""

EPILOG = """exit codes: 0 healthy (whether it learns was judged, nothing fired), 1 warning, 3 failing, 4 unjudged
(nothing fired, but whether it learns could not be judged), 2 bad input
(with --json, also {"error": ...} on stdout); with several runs the worst verdict decides.
files: read when they are regular files of at most 512 MiB (set ALIGN_KIT_DOCTOR_MAX_MB to raise the cap); a
folder of more than 200 logs or TensorBoard runs is refused (ALIGN_KIT_DOCTOR_MAX_RUNS raises it), never read in part.
figures: only with --figures DIR (one PNG per run; an existing file is kept unless --force).
follow: --follow PATH re-reads PATH every --interval s, prints alerts as they fire, stops after --idle s without
growth or on Ctrl-C, then reports."""


PIPE_CLOSED = 141
INTERRUPTED = 130  # 128 + SIGINT, as a shell reports a process Ctrl-C ended


class DoctorArgumentError(Exception):
    pass


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # one line, never the usage block
        raise DoctorArgumentError(f"{message} (see align-kit doctor --help)")


def _positive(kind: type):
    noun = "a whole number" if kind is int else "a number"

    def parse(text: str):
        try:
            value = kind(text)
        except ValueError:
            value = None
        if value is None or not value > 0 or value != value or value == float("inf"):
            raise argparse.ArgumentTypeError(f"{text!r}: expected {noun} > 0")
        return value

    return parse


def _finite(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = float("nan")
    if value != value or value in (float("inf"), float("-inf")):
        raise argparse.ArgumentTypeError(f"{text!r}: expected a finite number")
    return value


def _mapping(text: str) -> tuple[str, str]:
    concept, sep, column = text.partition("=")
    if not sep or not concept.strip() or not column.strip():
        raise argparse.ArgumentTypeError(f"{text!r}: expected CONCEPT=COLUMN, e.g. reward=train/score")
    return concept.strip(), column.strip()


def key_map_of(pairs: Sequence[tuple[str, str]]) -> dict[str, str] | None:
    """The --map pairs as {concept: column}: every concept one the rules read, each concept read from one column and
    each column read as one concept (a second --map for either would silently drop the first)."""
    from align_kit.doctor.keymaps import CONCEPTS, unknown_concepts

    by_concept: dict[str, str] = {}
    by_column: dict[str, str] = {}
    for concept, column in pairs:
        if unknown_concepts({concept: column}):
            close = difflib.get_close_matches(concept, CONCEPTS, n=1)
            hint = f"did you mean {close[0]}? " if close else ""
            raise DoctorArgumentError(
                f"--map {concept}={column}: {concept!r} is no concept a rule reads; {hint}expected one of "
                f"{', '.join(CONCEPTS)}, or rewards/<name> for one reward function"
            )
        if by_concept.get(concept, column) != column:
            raise DoctorArgumentError(
                f"--map {concept}={by_concept[concept]} and --map {concept}={column}: one concept read from two "
                "columns; expected one --map per concept"
            )
        if by_column.get(column, concept) != concept:
            raise DoctorArgumentError(
                f"--map {by_column[column]}={column} and --map {concept}={column}: column {column!r} mapped to two "
                f"concepts ({by_column[column]}, {concept}); expected each column read as one concept"
            )
        by_concept[concept], by_column[column] = column, concept
    return by_concept or None


def check_reward_scale(history, reward_min: float | None, reward_max: float | None) -> None:
    """Refuse a stated reward scale that the logged rewards contradict: a batch's mean reward cannot lie below the
    lowest total reward attainable nor above the highest, so a stated bound past the rewards is a wrong bound (the
    reward rules would judge shares of a range the run never had). A --reward-min alone must also lie below the
    maximum in effect (the log's stated one, else the monitor's default)."""
    from align_kit.doctor.history import DoctorInputError
    from align_kit.doctor.keymaps import finite_number
    from align_kit.monitor.rules import RunContext

    source = history.source  # the file: a folder's runs are each named by theirs
    if reward_min is not None and reward_max is None:
        stated = finite_number(history.context.get("reward_max"))
        ceiling, whose = (stated, "the log states") if stated is not None else (RunContext().reward_max, "default")
        if reward_min >= ceiling:
            raise DoctorInputError(
                f"--reward-min {reward_min:g}: not below the highest total reward of {source}, {ceiling:g} "
                f"({whose}); expected min < max (pass --reward-max too)"
            )
    rewards = [(step, row["reward"]) for step, row in history.rows if math.isfinite(row.get("reward", math.nan))]
    if not rewards or (reward_min is None and reward_max is None):
        return
    (low_step, low), (high_step, high) = min(rewards, key=itemgetter(1)), max(rewards, key=itemgetter(1))
    slack = 1e-9 * max(1.0, abs(low), abs(high))  # rounding in the log's printed digits
    if reward_min is not None and low < reward_min - slack:
        raise DoctorInputError(
            f"--reward-min {reward_min:g}: {source} logs a mean reward of {low:g} at step {low_step}, below the "
            f"stated minimum; expected the lowest total reward attainable (pass --reward-min {low:g} or lower, or "
            "omit it)"
        )
    if reward_max is not None and high > reward_max + slack:
        raise DoctorInputError(
            f"--reward-max {reward_max:g}: {source} logs a mean reward of {high:g} at step {high_step}, above the "
            f"stated maximum; expected the highest total reward attainable (pass --reward-max {high:g} or higher, "
            "or omit it)"
        )


def _wants_json(argv: Sequence[str]) -> bool:
    """Whether --json (or a prefix argparse accepts for it) is asked for, known before the arguments parse."""
    return any(len(arg) >= 3 and "--json".startswith(arg) for arg in argv)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="align-kit doctor",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("paths", nargs="*", metavar="PATH", help="a run's log, folder or wandb:ENTITY/PROJECT/RUN_ID")
    parser.add_argument("--json", action="store_true", help="print one JSON document (runs[]) instead of the text")
    parser.add_argument(
        "--map",
        action="append",
        default=[],
        type=_mapping,
        metavar="CONCEPT=COLUMN",
        help="read COLUMN as the concept CONCEPT (repeatable), e.g. --map reward=train/score --map entropy=ent",
    )
    parser.add_argument(
        "--logging-steps", type=_positive(int), help="steps between logged rows, for logs whose rows carry no step"
    )
    parser.add_argument(
        "--max-completion-length", type=_positive(int), help="the completion length budget, when the log lacks it"
    )
    parser.add_argument(
        "--reward-max", type=_finite, help="the highest total reward attainable (default: from the log)"
    )
    parser.add_argument("--reward-min", type=_finite, help="the lowest total reward attainable (default: from the log)")
    parser.add_argument("--figures", type=Path, metavar="DIR", help="write one PNG sheet per run into DIR")
    parser.add_argument(
        "--sweep",
        type=Path,
        metavar="PATH",
        help="for one align_kit run: write the advice as a sweep file (the run as the baseline arm, the first advised "
        "changes, seeds, the prediction), to run with `align-kit sweep PATH`",
    )
    parser.add_argument(
        "--force", action="store_true", help="overwrite existing files: --figures' sheets, the --sweep file"
    )
    parser.add_argument("--follow", action="store_true", help="watch one growing log and print alerts as they fire")
    parser.add_argument(
        "--idle", type=_positive(float), default=60.0, help="--follow stops after this many s without growth (60)"
    )
    parser.add_argument("--interval", type=_positive(float), default=2.0, help="--follow re-reads every N s (2)")
    return parser


def run(argv: Sequence[str], api=None) -> int:
    """The command without sys.exit: returns the exit code (2 on a bad input, after printing its one line)."""
    from align_kit.doctor.history import DoctorInputError

    try:
        args = build_parser().parse_args(list(argv))
        key_map = key_map_of(args.map)
        if not args.paths:
            raise DoctorArgumentError(
                "name at least one PATH: a run's log file or folder (see align-kit doctor --help)"
            )
        for path in args.paths:
            if not path.strip():  # "" reads as the current folder: an unset shell variable, most likely
                raise DoctorArgumentError(f"PATH {path!r} is empty; expected a run's log file or folder")
            if path.startswith(("http://", "https://")):
                raise DoctorArgumentError(
                    f"{path}: is a URL, not fetched; expected a local file (download it first) or "
                    "wandb:ENTITY/PROJECT/RUN_ID"
                )
        if args.reward_max is not None and args.reward_min is not None and args.reward_min >= args.reward_max:
            raise DoctorArgumentError(
                f"--reward-min {args.reward_min:g} >= --reward-max {args.reward_max:g}: expected min < max"
            )
        if args.sweep is not None:
            from align_kit.doctor.advice_sweep import check_sweep_target

            check_sweep_target(args.sweep, args.paths, args.force, args.follow)
        if args.figures is not None:  # before the logs are read: a --follow may run for hours
            from align_kit.doctor.figures import check_folder

            check_folder(args.figures)
        options = {
            "max_completion_length": args.max_completion_length,
            "reward_max": args.reward_max,
            "reward_min": args.reward_min,
        }
        from align_kit.doctor.readers import read_runs

        def read(path: str):
            try:
                return read_runs(path, key_map=key_map, logging_steps=args.logging_steps, api=api)
            except OSError as error:  # permission, an I/O error, a file gone between listing and reading
                where = error.filename or path
                raise DoctorInputError(
                    f"{where}: cannot be read ({error.strerror or error}); expected a readable run log"
                ) from None
            except RecursionError:
                raise DoctorInputError(
                    f"{path}: JSON nested deeper than the parser can follow; expected a run's log"
                ) from None

        def check(history) -> None:
            check_reward_scale(history, args.reward_min, args.reward_max)

        if args.follow:
            if len(args.paths) != 1:
                raise DoctorArgumentError(f"--follow watches one PATH; got {len(args.paths)}")
            from align_kit.doctor.follow import follow
            from align_kit.doctor.readers.common import check_followable

            check_followable(Path(args.paths[0]))

            from align_kit.doctor.report import printable

            # With --json, stdout holds the one document: the follow's lines go to stderr.
            stream = sys.stderr if args.json else sys.stdout

            def out(line: str) -> None:
                print(printable(line), file=stream, flush=True)

            diagnoses = follow(args.paths[0], read, args.idle, args.interval, options, out=out, check=check)
        else:
            from align_kit.doctor.diagnose import diagnose

            histories = [history for path in args.paths for history in read(path)]
            for history in histories:
                check(history)
            diagnoses = [diagnose(history, **options) for history in histories]
        figures: dict[int, str] = {}
        if args.figures is not None:
            from align_kit.doctor.figures import write_figures

            written = write_figures(diagnoses, args.figures, args.force)
            figures = {index: str(path) for index, path in enumerate(written)}
        from align_kit.doctor.samples import samples_for

        samples = {index: samples_for(d.history.source, d.alerts) for index, d in enumerate(diagnoses)}
        sweep_line = None
        if args.sweep is not None:
            from align_kit.doctor.advice_sweep import write_sweep

            sweep_line = write_sweep(args.sweep, args.paths[0], diagnoses, args.force)
    except (DoctorInputError, DoctorArgumentError) as error:
        from align_kit.doctor.report import printable

        print(f"align-kit: doctor error: {printable(str(error))}", file=sys.stderr)
        if _wants_json(argv):
            from align_kit.doctor.report import error_json

            print(error_json(str(error)))
        return 2
    from align_kit.doctor.diagnose import EXIT_CODES, worst
    from align_kit.doctor.report import render, summary_table, to_json

    if args.json:
        print(to_json(diagnoses, figures, samples))
    else:
        print("\n\n".join(render(d, figures.get(i), samples.get(i)) for i, d in enumerate(diagnoses)))
        if len(diagnoses) > 1:
            print(f"\nsummary of {len(diagnoses)} runs:")
            print(summary_table(diagnoses))
    if sweep_line:
        print(sweep_line, file=sys.stderr if args.json else sys.stdout)
    return EXIT_CODES[worst(d.verdict for d in diagnoses)]


def main(argv: Sequence[str]) -> NoReturn:
    try:
        code = run(argv)
        sys.stdout.flush()
    except BrokenPipeError:
        # The reader of a pipe (`| head`) stopped reading: no traceback, and the exit code a shell gives a process
        # that SIGPIPE ended (128 + 13), since the report was not all delivered. Python flushes stdout again at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        code = PIPE_CLOSED
    except KeyboardInterrupt:  # Ctrl-C while a large log is read (--follow reports what it saw instead)
        print("align-kit: doctor interrupted (Ctrl-C); nothing was reported", file=sys.stderr)
        code = INTERRUPTED
    sys.exit(code)
