"""What one comparison produced: its arms, a table per metric, the figures, the report file, the notes and the
verdicts. `align-kit compare` returns it; the W&B report publishes it. Only the standard library is imported at
module level (the command imports this for `--help`)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from align_kit.compare.arms import Arm
    from align_kit.compare.plots import FigureFile
    from align_kit.compare.statistics import ArmSummary


@dataclass
class Comparison:
    arms: list[Arm]
    tables: dict[str, list[ArmSummary]]
    figures: list[FigureFile]
    report: Path
    notes: list[str]
    verdicts: list = field(default_factory=list)  # compare.verdict.Verdict, one per (prediction, arm)
