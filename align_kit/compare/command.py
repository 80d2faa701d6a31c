"""`align-kit compare`: load runs -> group into arms -> statistics per metric -> tables, figures, report.md.

Only the standard library is imported at module level, so `align-kit compare --help` answers at once.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from align_kit.compare import CompareError
from align_kit.compare.comparison import Comparison
from align_kit.core.disk_space import DISK_FULL_EXIT_CODE, DiskFull, writing

if TYPE_CHECKING:
    from align_kit.compare.run_record import Run

DESCRIPTION = """Compare runs: group them into arms by the config keys that differ (the seed aggregated over),
print a table per metric, and write PNG figures and report.md.

inputs: run folders, a multirun sweep folder (its job folders 0/, 1/, ... are the runs), or
wandb:ENTITY/PROJECT/GROUP (the runs of a W&B group, through the W&B API; needs `wandb login`).
The first run's arm is the baseline each other arm is compared with."""

EPILOG = """definitions:
  final       mean of each run's last K logged points (--last-k, default 10)
  AUC/span    trapezoid area under the curve over logged steps / step span (the mean level)
  mean ± std  over an arm's seeds (sample std, n - 1)
  Δ ± SE      arm mean - baseline mean, SE = sqrt(s1²/n1 + s2²/n2)
  figures     one line per arm (mean over seeds), band = mean ± std across seeds"""


def smoothing_value(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 <= value < 1 or (value.is_integer() and value >= 1)):
        raise argparse.ArgumentTypeError(f"{text!r}: use a window of N >= 1 points, or an EMA factor in (0, 1)")
    return value


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="align-kit compare",
        description=DESCRIPTION,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "inputs", nargs="*", metavar="INPUT", help="run folder, sweep folder or wandb:ENTITY/PROJECT/GROUP"
    )
    parser.add_argument(
        "--metrics", help="comma-separated metrics (default: reward, accuracy, entropy, clip ratio, length, flip rate)"
    )
    parser.add_argument(
        "--smooth",
        type=smoothing_value,
        default=0.0,
        help="figures only: an integer N >= 2 is a trailing moving average over N points, "
        "a value in (0, 1) an EMA factor (weight of the previous smoothed value); default 0 (off)",
    )
    parser.add_argument("--last-k", type=int, default=10, help="points averaged for the final value (default 10)")
    parser.add_argument("--out", type=Path, help="output folder (default: <first input>/compare)")
    parser.add_argument(
        "--wandb-report",
        metavar="ENTITY/PROJECT",
        help="also build a W&B Report of the runs' group there (one section per figure, arms grouped by config, "
        "mean and standard-error band, these tables); prints its URL; needs wandb-workspaces and `wandb login`",
    )
    parser.add_argument("--wandb-group", help="the W&B group of the runs (default: read from the run folders)")
    parser.add_argument(
        "--predict",
        action="append",
        default=[],
        metavar="METRIC:higher|lower",
        help="a pre-stated prediction (repeatable): each arm moves METRIC this way relative to the baseline; "
        "report.md and the console then give each arm a verdict (reproduced, weak, not reproduced; rule stated)",
    )
    parser.add_argument(
        "--power",
        metavar="EFFECT:SD[:SD_ARM] | METRIC",
        help="print the paired seeds needed for 80%% power to be called reproduced, for a mean paired difference "
        "EFFECT with sd SD over seeds (SD_ARM: each arm's own sd), or for METRIC's AUC/span in the INPUT runs "
        "(each arm vs the baseline); nothing else runs",
    )
    return parser


def default_out(first_input: str) -> Path:
    from align_kit.compare.runs import WANDB_PREFIX

    if first_input.startswith(WANDB_PREFIX):
        return Path("compare") / first_input.rsplit("/", 1)[-1]
    return Path(first_input) / "compare"


def common_metrics(runs: list[Run]) -> set[str]:
    return set.intersection(*(set(run.logged) for run in runs))


def choose_metrics(runs: list[Run], requested: list[str] | None, notes: list[str]) -> list[str]:
    from align_kit.compare.plots import LAYOUT_METRICS

    common = common_metrics(runs)
    if not common:
        example = f"{runs[0].label} logs {', '.join(sorted(runs[0].logged)[:5])}"
        raise CompareError(
            f"the {len(runs)} runs share no metric (e.g. {example}); compare runs that log the same metrics"
        )
    if requested:
        text = {metric for run in runs for metric in run.text_valued}  # noted once already, by load_inputs
        missing = [metric for metric in requested if metric not in common and metric not in text]
        if missing:
            notes.append(f"not in every run, so left out: {', '.join(missing)}")
        chosen = [metric for metric in requested if metric in common]
        if not chosen:
            raise CompareError(
                f"none of --metrics {','.join(requested)} is logged by every run; "
                f"metrics common to all runs: {', '.join(sorted(common))}"
            )
        return chosen
    for metric in LAYOUT_METRICS:
        lacking = [run.label for run in runs if metric not in run.series]
        if metric not in common and len(lacking) < len(runs):
            notes.append(
                f"{metric}: left out, not logged with a finite value by {len(lacking)} run(s): {', '.join(lacking)}"
            )
    return [metric for metric in LAYOUT_METRICS if metric in common] or sorted(common)


def prepare_out(out_dir: Path) -> None:
    try:
        out_dir.mkdir(parents=True, exist_ok=True)
    except FileExistsError:
        raise CompareError(f"--out {out_dir} is a file; pass a folder (created if missing)") from None
    except OSError as error:
        raise CompareError(f"--out {out_dir} cannot be created ({error.strerror}); pass a writable folder") from None
    if not os.access(out_dir, os.W_OK):
        raise CompareError(f"--out {out_dir} is not writable; pass a writable folder")


def compare(
    inputs: list[str],
    metrics: list[str] | None = None,
    smoothing: float = 0.0,
    last_k: int = 10,
    out: Path | None = None,
    predictions: list[str] | None = None,
) -> Comparison:
    from align_kit.compare.arms import drop_duplicate_seeds, group_into_arms
    from align_kit.compare.plots import LAYOUT_METRICS, write_figures
    from align_kit.compare.report import print_tables, write_report
    from align_kit.compare.runs import load_inputs
    from align_kit.compare.statistics import summarise_metric
    from align_kit.compare.verdict import Prediction, verdicts

    if last_k < 1:
        raise CompareError(f"--last-k {last_k}: average at least one point (--last-k 10 is the default)")
    stated = [Prediction.parse(text) for text in predictions or []]  # a bad one fails before any run loads
    # Only the series of the metrics that can be compared are kept, so memory follows what is compared, not how
    # much each run logged. When none of the asked-for (or default) metrics is in every run, the choice (every
    # common metric) or the error (naming them) needs all of them: read again, keeping everything.
    asked = metrics or list(LAYOUT_METRICS)
    runs, notes = load_inputs(inputs, list(dict.fromkeys([*asked, *(p.metric for p in stated)])))
    if not set(asked) & common_metrics(runs):
        runs, notes = load_inputs(inputs)
    chosen = choose_metrics(runs, metrics, notes)
    # A predicted metric is compared even outside --metrics or the default set, if every run logs it.
    common = common_metrics(runs)
    chosen += list(dict.fromkeys(p.metric for p in stated if p.metric not in chosen and p.metric in common))
    arms = group_into_arms(runs)
    notes += drop_duplicate_seeds(arms)
    tables = {metric: summarise_metric(arms, metric, last_k) for metric in chosen}
    judged = verdicts(arms, tables, stated)
    out_dir = out or default_out(inputs[0])
    prepare_out(out_dir)
    report = out_dir / "report.md"
    with writing(
        out_dir, "the figures and report.md", then="run compare again"
    ):  # a full disk: the same line as a run's
        figures = write_figures(arms, chosen, out_dir, smoothing)
        write_report(report, inputs, arms, tables, figures, notes, last_k, smoothing, judged)
    print_tables(arms, tables, last_k)
    for verdict in judged:
        print(f"verdict: {verdict.line(arms[0].name)}".replace("**", ""))
    for note in notes:
        print(f"align-kit: {note if note.startswith('warning: ') else 'note: ' + note}", file=sys.stderr)
    print(f"align-kit: {len(runs)} runs in {len(arms)} arms; report in {report}")
    return Comparison(arms, tables, figures, report, notes, judged)


def main(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    metrics = [metric.strip() for metric in args.metrics.split(",") if metric.strip()] if args.metrics else None
    try:
        if args.power is not None:
            from align_kit.compare.power import report_power

            report_power(args.power, args.inputs)
            return
        if not args.inputs:
            raise CompareError("name at least one INPUT: a run folder, a sweep folder or wandb:ENTITY/PROJECT/GROUP")
        comparison = compare(args.inputs, metrics, args.smooth, args.last_k, args.out, args.predict)
        if args.wandb_report:
            from align_kit.compare.wandb_report import publish

            publish(args.wandb_report, args.inputs, comparison, args.wandb_group, args.last_k)
    except CompareError as error:
        print(f"align-kit: compare error: {error}", file=sys.stderr)
        sys.exit(2)
    except DiskFull as full:
        print(f"align-kit: disk full: {full.strerror}", file=sys.stderr)
        sys.exit(DISK_FULL_EXIT_CODE)
