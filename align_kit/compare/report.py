"""Tables per metric (printed with rich, and in markdown) and the markdown report that links the figures."""

from __future__ import annotations

import math
import os
from pathlib import Path

from align_kit.compare.arms import Arm
from align_kit.compare.plots import FigureFile, describe_smoothing
from align_kit.compare.statistics import ArmSummary, Difference, Spread

COLUMNS = ("arm", "n", "final", "Δ final ± SE", "AUC/span", "Δ AUC/span ± SE", "seeds AUC > base")


def _number(value: float) -> str:
    return "n/a" if math.isnan(value) else f"{value:.3g}"


def _spread(spread: Spread) -> str:
    return f"{_number(spread.mean)} ± {_number(spread.std)}"


def _difference(difference: Difference | None) -> str:
    if difference is None:
        return "baseline"
    return f"{difference.delta:+.3g} ± {_number(difference.stderr)}"


def _count(counts: tuple[int, int] | None) -> str:
    return "baseline" if counts is None else f"{counts[0]}/{counts[1]}"


def table_rows(summaries: list[ArmSummary], arm_labels: list[str]) -> list[list[str]]:
    return [
        [
            label,
            str(row.final.n),
            _spread(row.final),
            _difference(row.final_vs_baseline),
            _spread(row.auc),
            _difference(row.auc_vs_baseline),
            _count(row.auc_above_baseline),
        ]
        for label, row in zip(arm_labels, summaries, strict=True)
    ]


def print_tables(arms: list[Arm], tables: dict[str, list[ArmSummary]], last_k: int) -> None:
    """Arms are listed once and numbered; the metric tables use the numbers, so they fit a terminal."""
    from rich.console import Console
    from rich.table import Table

    console = Console()
    legend = Table(title="arms")
    for column in ("arm", "differs by", "seeds"):
        legend.add_column(column)
    numbers = [str(index) for index in range(1, len(arms) + 1)]
    for number, arm in zip(numbers, arms, strict=True):
        legend.add_row(number, arm.name + (" (baseline)" if arm is arms[0] else ""), ", ".join(map(str, arm.seeds)))
    console.print(legend)
    for metric, summaries in tables.items():
        table = Table(title=metric)
        for column in COLUMNS:
            table.add_column(column, justify="right")
        for row in table_rows(summaries, numbers):
            table.add_row(*row)
        console.print(table)
    console.print(
        f"final = mean of each run's last {last_k} points; AUC/span = mean level; "
        "a ± b = mean ± sample std over seeds; Δ = arm - baseline (arm 1) ± standard error; "
        "seeds AUC > base = seeds whose run beats the baseline's run of the same seed"
    )


def _markdown_table(header: tuple[str, ...] | list[str], rows: list[list[str]]) -> list[str]:
    def line(cells) -> str:
        return "| " + " | ".join(str(cell).replace("|", "\\|") for cell in cells) + " |"

    return [line(header), line(["---"] * len(header)), *(line(row) for row in rows)]


def definitions(last_k: int, smoothing: float) -> list[str]:
    return [
        f"- **final**: mean of each run's last {last_k} logged points.",
        "- **AUC/span**: trapezoid area under the curve over logged steps, divided by the step span "
        "(the curve's mean level).",
        "- **mean ± std**: over the arm's seeds; std is the sample std (n - 1), n/a for one seed.",
        "- **Δ ± SE**: arm mean minus baseline (first arm) mean; SE = sqrt(s_arm²/n_arm + s_base²/n_base) "
        "(standard error of a difference of independent means), n/a when an arm has one seed.",
        "- **seeds AUC > base**: of the seeds an arm shares with the baseline, how many have a higher AUC/span "
        "than the baseline's run of the same seed (paired by seed; k of n).",
        "- **figures**: line = mean over seeds, band = mean ± sample std across seeds; "
        f"smoothing: {describe_smoothing(smoothing)} (figures only; the tables use the raw points).",
    ]


def write_report(
    path: Path,
    inputs: list[str],
    arms: list[Arm],
    tables: dict[str, list[ArmSummary]],
    figures: list[FigureFile],
    notes: list[str],
    last_k: int,
    smoothing: float,
    verdicts: list | None = None,
) -> None:
    run_count = sum(len(arm.runs) for arm in arms)
    lines = [
        f"# Comparison: {run_count} runs in {len(arms)} arms",
        "",
        f"Inputs: {', '.join(inputs)}",
        "",
        "## Arms",
        "",
    ]
    arm_rows = [
        [
            f"{arm.name}{' (baseline)' if index == 0 else ''}",
            ", ".join(map(str, arm.seeds)),
            "<br>".join(run.label for run in arm.runs),
        ]
        for index, arm in enumerate(arms)
    ]
    lines += _markdown_table(("arm", "seeds", "runs"), arm_rows)
    lines += ["", "## Figures", ""]
    for figure in figures:
        lines += [f"![{figure.title}]({os.path.relpath(figure.path, path.parent)})", ""]
    lines += ["## Tables", ""]
    for metric, summaries in tables.items():
        lines += [f"### {metric}", "", *_markdown_table(COLUMNS, table_rows(summaries, [arm.name for arm in arms])), ""]
    if verdicts:
        from align_kit.compare.verdict import RULE

        lines += ["## Verdicts", "", f"Rule: {RULE}.", ""]
        lines += [f"- {verdict.line(arms[0].name)}" for verdict in verdicts] + [""]
    lines += ["## Definitions", "", *definitions(last_k, smoothing), ""]
    if notes:
        lines += ["## Left out, and warnings", "", *(f"- {note}" for note in notes), ""]
    path.write_text("\n".join(lines))
