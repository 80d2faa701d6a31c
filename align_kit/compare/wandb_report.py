"""`align-kit compare ... --wandb-report ENTITY/PROJECT`: the comparison as a W&B Report (wandb-workspaces).

One section per figure `compare` draws (same layouts, same metrics), each a panel grid whose run set is the
sweep's W&B group, grouped by the arm's keys (W&B groups by config, not tags: `choice/<group>` for a node choice,
the dotted key for a value), one line per arm = mean over seeds with a standard-error band; then compare's tables
as markdown. Building the model already asks the server for the project's id, so tests patch that look-up.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from align_kit.compare import CompareError

if TYPE_CHECKING:
    from align_kit.compare.comparison import Comparison

METRIC_PREFIX = "train/"  # HF's W&B callback logs TRL's metrics as train/<metric> against train/global_step
STEP_KEY = "train/global_step"
CHOICE_PREFIX = "choice/"
INSTALL = "pip install 'align_kit[wandb-report]' (wandb-workspaces)"


def parse_project(path: str) -> tuple[str, str]:
    parts = path.split("/")
    if len(parts) != 2 or not all(parts):
        raise CompareError(f"--wandb-report {path}: name the project the runs were logged to, as ENTITY/PROJECT")
    return parts[0], parts[1]


def run_group(folder: Path) -> str | None:
    """The W&B group align_kit gave a run folder's run (align_kit.train.hydra_context), from Hydra's record."""
    import yaml

    from align_kit.experiment.plan import tagged_choices
    from align_kit.tracking.wandb_logger import wandb_group

    path = folder / ".hydra" / "hydra.yaml"
    if not path.is_file():
        return None
    hydra = (yaml.safe_load(path.read_text()) or {}).get("hydra") or {}
    choices = tagged_choices((hydra.get("runtime") or {}).get("choices") or {})
    multirun = str(hydra.get("mode")).endswith("MULTIRUN")
    return wandb_group(choices, multirun, (hydra.get("sweep") or {}).get("dir"))


def groups_of(inputs: list[str], comparison: Comparison) -> list[str]:
    """The W&B groups of the compared runs: named by a wandb: input, or read from each run folder."""
    from align_kit.compare.wandb_source import parse_group_path

    groups = [parse_group_path(spec.removeprefix("wandb:"))[1] for spec in inputs if spec.startswith("wandb:")]
    groups += [run_group(run.folder) for arm in comparison.arms for run in arm.runs if run.folder is not None]
    found = list(dict.fromkeys(group for group in groups if group))
    if not found:
        raise CompareError(
            "the compared runs name no W&B group (they were not launched as a sweep or recipe); "
            "pass it with --wandb-group GROUP"
        )
    return found


def group_filter(groups: list[str]) -> str:
    quoted = ", ".join(repr(group) for group in groups)
    return f"Group = {quoted}" if len(groups) == 1 else f"Group in [{quoted}]"


def groupby_keys(comparison: Comparison) -> list[str]:
    from align_kit.compare.arms import arm_keys

    choice_groups, _, named_keys = arm_keys([run for arm in comparison.arms for run in arm.runs])
    return [f"config.{CHOICE_PREFIX}{group}" for group in choice_groups] + [f"config.{key}" for key in named_keys]


def tables_markdown(comparison: Comparison, last_k: int) -> str:
    from align_kit.compare.report import COLUMNS, _markdown_table, definitions, table_rows

    labels = [arm.name for arm in comparison.arms]
    lines = []
    for metric, summaries in comparison.tables.items():
        lines += [f"**{metric}**", "", *_markdown_table(COLUMNS, table_rows(summaries, labels)), ""]
    lines += definitions(last_k, 0.0)[:-1]  # the figures' definition is compare's PNGs, not these panels
    return "\n".join(lines)


def build_report(entity: str, project: str, groups: list[str], comparison: Comparison, last_k: int = 10) -> Any:
    """The Report model (not saved)."""
    try:
        import wandb_workspaces.reports.v2 as wr
    except ImportError:
        raise CompareError(f"--wandb-report needs wandb-workspaces: {INSTALL}") from None
    from align_kit.compare.plots import planned_figures

    groupby = groupby_keys(comparison)
    blocks: list[Any] = [
        wr.P(
            f"{sum(len(arm.runs) for arm in comparison.arms)} runs in {len(comparison.arms)} arms "
            f"(W&B group {', '.join(groups)}); lines: mean over seeds, band: standard error; "
            f"grouped by {', '.join(key.removeprefix('config.') for key in groupby) or 'nothing (one arm)'}."
        )
    ]
    for _stem, title, panels in planned_figures(list(comparison.tables)):
        runset = wr.Runset(
            entity=entity, project=project, name=", ".join(groups), filters=group_filter(groups), groupby=groupby
        )
        blocks += [
            wr.H2(title),
            wr.PanelGrid(
                runsets=[runset],
                panels=[
                    wr.LinePlot(
                        title=label,
                        x=STEP_KEY,
                        y=[METRIC_PREFIX + metric],
                        groupby_aggfunc="mean",
                        groupby_rangefunc="stderr",
                    )
                    for label, metric in panels
                ],
            ),
        ]
    blocks += [wr.H2("Tables (align-kit compare)"), wr.MarkdownBlock(text=tables_markdown(comparison, last_k))]
    title = f"align_kit {', '.join(groups)}"[:128]
    return wr.Report(entity=entity, project=project, title=title, blocks=blocks, width="fluid")


def publish(target: str, inputs: list[str], comparison: Comparison, group: str | None = None, last_k: int = 10) -> str:
    """Build and save the report; returns its URL."""
    entity, project = parse_project(target)
    groups = [group] if group else groups_of(inputs, comparison)
    report = build_report(entity, project, groups, comparison, last_k)
    try:
        report.save()
        url = report.url
    except Exception as error:  # login, network and permission errors come as the library's own types
        raise CompareError(
            f"cannot save the W&B report to {target} ({type(error).__name__}: {(str(error).splitlines() or [''])[0]}); "
            "run `wandb login` (or set WANDB_API_KEY), check ENTITY/PROJECT, and `wandb sync` offline runs first"
        ) from None
    print(f"align-kit: W&B report: {url}")
    return url
