"""One file, several runs: where a logged history starts again. A console log or notebook often holds more than one
run: a run restarted in the same terminal (its steps, or its epoch when lines carry no step, go back to the start or
before it), or a supervised phase and then RL (the rows change from SFT's loss / grad_norm / learning_rate to RL's
reward, KL, completion lengths, ...). Each becomes its own history, diagnosed and named on its own.

A resume from a checkpoint also goes back, but only to a step after the run's first: it is the same run redoing a few
steps (the later values win when the rows are merged), not a new one.

A notebook that displays a training's progress table more than once (at step 97, then again at step 250 with the
first 97 rows repeated) shows one run twice: a later display that repeats an earlier one's rows (the same steps with
the same values) continues it (`repeats`), and the two are read as one history. A restart logs other values on the
steps it starts over, and an SFT warm-up's table has other columns: those stay runs of their own.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from align_kit.doctor.keymaps import known_concept, to_float

# What a supervised phase logs; a row with any other concept is an RL row.
SFT_CONCEPTS = frozenset({"loss", "grad_norm", "learning_rate", "entropy"})


_PHASES: dict[tuple[str, ...], str | None] = {}


def phase(row: Mapping[str, Any]) -> str | None:
    """ "rl" for a row carrying an RL concept (reward, KL, lengths, ...), "sft" for one carrying only SFT's, None
    for neither (an eval row, bookkeeping). Log rows repeat one key set: cached by it."""
    keys = tuple(row)
    if keys in _PHASES:
        return _PHASES[keys]
    if len(_PHASES) > 10_000:
        _PHASES.clear()
    concepts = {known_concept(key) for key in keys} - {None, "eval_reward"}
    kind = _PHASES[keys] = ("rl" if concepts - SFT_CONCEPTS else "sft") if concepts else None
    return kind


@dataclass
class Part:
    start: int  # index of the first item
    end: int  # index after the last
    phase: str | None
    why: str  # how it began: "" for the first part


# More changes of phase than this are rows of two kinds interleaved (a custom log printing its loss apart from its
# rewards), not phases: then only restarts split the file.
MAX_PHASE_CHANGES = 2


def split(items: list[tuple[int | None, Mapping[str, Any]]]) -> tuple[list[Part], int]:
    """The parts of a file's (stated step or None, row) items in file order, and how many rows a resume redid."""
    parts, redone, phase_changes = _split(items, by_phase=True)
    if phase_changes > MAX_PHASE_CHANGES:
        parts, redone, _ = _split(items, by_phase=False)
    return parts, redone


def _split(items: list[tuple[int | None, Mapping[str, Any]]], by_phase: bool) -> tuple[list[Part], int, int]:
    parts: list[Part] = []
    start, first, last, current, began = 0, None, None, None, ""
    redone = phase_changes = 0
    for index, (step, row) in enumerate(items):
        progress = step if step is not None else to_float(row.get("epoch"))
        kind = phase(row) if by_phase else None
        why = ""
        if progress is not None and last is not None and progress < last:
            if first is not None and progress <= first:
                what = "step" if step is not None else "epoch"
                why = f"the {what} goes back from {last:g} to {progress:g}"
            else:
                redone += 1
        if not why and kind is not None and current is not None and kind != current:
            why = f"the logged metrics change from {current.upper()}'s to {kind.upper()}'s"
            phase_changes += 1
        if why:
            parts.append(Part(start, index, current, began))
            start, first, last, current, began = index, None, None, None, why
        if first is None:
            first = progress
        if current is None:
            current = kind
        if progress is not None:
            last = progress
    parts.append(Part(start, len(items), current, began))
    return parts, redone, phase_changes


def repeats(earlier: list[tuple[int, Mapping[str, Any]]], later: list[tuple[int, Mapping[str, Any]]]) -> bool:
    """Whether `later`, a table displayed after `earlier`, shows the same run again: they share a step, every shared
    step holds the same values in their shared columns, and the later display has every column of the earlier in the
    same phase (SFT or RL)."""
    first, second = dict(earlier), dict(later)
    shared = first.keys() & second.keys()
    if not shared:
        return False
    columns = {key: None for row in first.values() for key in row}
    later_columns = {key: None for row in second.values() for key in row}
    if not columns.keys() <= later_columns.keys() or phase(columns) != phase(later_columns):
        return False
    for step in shared:
        before, after = first[step], second[step]
        if not all(_same(before[key], after[key]) for key in before.keys() & after.keys()):
            return False
    return True


def _same(one: Any, other: Any) -> bool:
    a, b = to_float(one), to_float(other)
    if a is None or b is None:
        return str(one).strip() == str(other).strip()
    return a == b or (a != a and b != b)  # NaN shown twice is the same NaN


def joined(earlier: list[tuple[int, Any]], later: list[tuple[int, Any]]) -> list[tuple[int, Any]]:
    """The rows of two displays of one run, in step order: every step of the later, and the earlier's steps it lacks."""
    steps = {step for step, _ in later}
    return sorted([*later, *(item for item in earlier if item[0] not in steps)], key=lambda item: item[0])
