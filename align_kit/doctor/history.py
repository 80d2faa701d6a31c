"""What a reader hands the doctor: one run's logged history, keyed by the monitor's metric names (the concepts),
with what was found and how each name was mapped."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


class DoctorInputError(Exception):
    """A bad input, as one line naming the file and what was expected (the command prints it and exits 2)."""


class UnreadInput(DoctorInputError):
    """A file the doctor could not read at all (not a regular file, no permission, past a cap): in a folder of logs
    it ends the reading, as what it holds is unknown, where a file read and found to hold no run is left out.
    `lasting` is False for a file gone while read (a log rotated under --follow, read again next time)."""

    def __init__(self, message: str, lasting: bool = True):
        super().__init__(message)
        self.lasting = lasting


@dataclass
class RunHistory:
    source: str  # the path or wandb: address as given, then the file actually read when that differs
    format: str  # the reader: align_kit, trl_state, trl_log_lines, trl_table, verl_console, verl_jsonl, ...
    framework: str  # whose terms the advice uses: align_kit | trl | verl | openrlhf | generic
    rows: list[tuple[int, dict[str, float]]]  # (step, {concept: value}) in step order, finite or not
    mapping: dict[str, str] = field(default_factory=dict)  # source key -> concept, for every mapped key
    unmapped: list[str] = field(default_factory=list)  # source keys found but not mapped to a concept
    notes: list[str] = field(default_factory=list)  # how it was read: "newest of 3 checkpoints: checkpoint-300"
    context: dict[str, Any] = field(default_factory=dict)  # what the log says of the setup, when it says it
    name: str = ""  # a short label for tables and figures (the run folder's or job's name)
    roles: dict[str, str] = field(default_factory=dict)  # accuracy / format -> the reward component read as it


def part_name(name: str, number: int, total: int, first: int, last: int, phase: str | None = None) -> str:
    """The name of one of several runs in one file: `train.log [run 2 of 3: steps 1-240]` (an SFT phase says so)."""
    kind = "SFT phase, " if phase == "sft" else ""
    return f"{name} [run {number} of {total}: {kind}steps {first}-{last}]"
