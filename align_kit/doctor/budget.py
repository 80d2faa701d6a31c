"""The completion length budget from the evidence a file holds, when no option gives it.

Stated (`stated_budget`): a notebook's code cell or a printed config that sets it, `max_completion_length = 200`,
`'max_completion_length': 200`, or Unsloth's `max_completion_length = max_seq_length - max_prompt_length` with both
set to numbers in the same file. Inferred (`inferred_budget`): the logged longest completion (else the mean length)
sitting exactly at one repeated maximum on many rows: completions cut at a hard cap all end at it. The note says
which, so the report never passes an inference off as a fact."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from typing import Any

_NUMBER = r"(\d+)(?![\w.])"
# `name = 200` in code (the word boundary before the name is checked on the match), `'name': 200` printed.
_SET = {
    name: [re.compile(name + r"[ \t]*=[ \t]*" + _NUMBER), re.compile(name + r"""['"][ \t]*:[ \t]*""" + _NUMBER)]
    for name in ("max_completion_length", "max_seq_length", "max_prompt_length")
}
_DIFFERENCE = re.compile(r"max_completion_length[ \t]*=[ \t]*max_seq_length[ \t]*-[ \t]*max_prompt_length(?![\w.+*])")
_NAME_CHAR = re.compile(r"\w")

# Rows that must sit at the maximum to call it the budget: 5 at least, and a tenth of the rows logging it.
FEWEST_AT_CAP, SHARE_AT_CAP = 5, 0.1


def _first(text: str, name: str) -> re.Match | None:
    found = None
    for pattern in _SET[name]:
        for match in pattern.finditer(text):
            if _inside_a_name(text, match.start()):
                continue  # `my_max_seq_length = ...`: another name
            if found is None or match.start() < found.start():
                found = match
            break
    return found


def _inside_a_name(text: str, start: int) -> bool:
    """Whether the character before `start` continues a name; a notebook's JSON escape `\\n` or `\\t` ends a line."""
    if start == 0 or not _NAME_CHAR.match(text, start - 1):
        return False
    return not (start >= 2 and text[start - 2] == "\\" and text[start - 1] in "nt")


def stated_budget(text: str) -> tuple[int, str] | None:
    """(budget, what stated it), the first statement in the file winning; None when none is there."""
    direct = _first(text, "max_completion_length")
    difference = _DIFFERENCE.search(text)
    if difference is not None and (direct is None or difference.start() < direct.start()):
        seq, prompt = _first(text, "max_seq_length"), _first(text, "max_prompt_length")
        if seq is not None and prompt is not None and int(seq.group(1)) > int(prompt.group(1)):
            budget = int(seq.group(1)) - int(prompt.group(1))
            return budget, f"{difference.group(0)} with {seq.group(0)}, {prompt.group(0)}"
        return None  # the difference of values the file does not give (computed from the data): unknown
    if direct is not None and int(direct.group(1)) > 0:
        return int(direct.group(1)), direct.group(0)
    return None


def inferred_budget(rows: Sequence[tuple[int, dict[str, Any]]]) -> tuple[int, str] | None:
    """(budget, how it was inferred) from the rows' completions/max_length, else completions/mean_length: their
    largest value, whole, on at least FEWEST_AT_CAP rows and SHARE_AT_CAP of the rows logging it."""
    for concept in ("completions/max_length", "completions/mean_length"):
        values = [value for _, row in rows if _length(value := row.get(concept))]
        if not values:
            continue
        top = max(values)
        at_top = sum(value == top for value in values)
        if top == int(top) and at_top >= max(FEWEST_AT_CAP, SHARE_AT_CAP * len(values)):
            return int(top), f"{concept} sits exactly at {int(top)} on {at_top} of its {len(values)} rows"
        return None  # the longest completion is logged and does not sit at a cap: the mean cannot say more
    return None


def _length(value: Any) -> bool:
    return isinstance(value, int | float) and math.isfinite(value) and value > 0
