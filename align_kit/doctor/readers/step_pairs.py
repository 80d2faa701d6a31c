"""Console lines of metric pairs tagged with a step, as several frameworks print them: `Step 12 | Reward: 0.41 |
KL: 0.002` (prime-rl), `Iter 10: Train loss 0.5, KL 0.001, ...` (mlx-lm's GRPO), `epoch: 0|step: 3|act_loss: 0.2`
(DeepSpeed-Chat step 3), `iteration 7/ 2174 | loss: ... | grad norm: 0.016` (Megatron), `[step 5] reward=0.3
entropy=1.2`. A line is a row only with a step and at least two recognised metric names (`keymaps.PRINTED`), so
prose with a number in it is never one. A line with recognised pairs and no step right after a row (DeepSpeed-Chat's
`average reward score: -7.8` under its step line) belongs to that row.

Keys are normalised (lower case, words joined by `_`, abbreviation dots dropped: `Grad. Norm` -> `grad_norm`)."""

from __future__ import annotations

import re
from typing import Any

from align_kit.doctor.keymaps import is_known_metric, is_printed_metric
from align_kit.doctor.readers.common import RawRows

_NUMBER = r"[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?|[-+]?(?:nan|inf(?:inity)?)"
# The step: `Step 12`, `step: 12`, `[step 5]`, `Iter 10:`, `iteration 7/ 2174`, `global_step=3`, `Episode 50/400`.
_STEP = re.compile(
    r"(?<![\w/.])(?:global[_ ]step|step|iter|iteration|episode)\s*[:=]?\s*(\d+)(\s*/\s*\d+)?\s*[\]:|,]?",
    re.IGNORECASE,
)
# One `key: value`, `key=value` or `key value` piece (a unit may follow the value: `4.29s`, `5.4%`, `17.4 GiB`).
_PAIR = re.compile(
    r"^\s*(?P<key>[A-Za-z][\w./()\- ]*?)\s*(?:[:=]\s*|\s+)(?P<value>" + _NUMBER + r")\s*[A-Za-z%/]*(?:\s*\(.*\))?\s*$",
    re.IGNORECASE,
)
_EQUALS = re.compile(r"(?P<key>[A-Za-z][\w./\-]*)\s*=\s*(?P<value>" + _NUMBER + r")(?![\w.])", re.IGNORECASE)
_DIGIT = re.compile(r"\d")
# Between pairs: `|`, `, `, ` - `, or a run of 2+ spaces after a value and before the next name (`loss: 0   kl: 0.1`).
_SEPARATORS = re.compile(r"\s*\|\s*|,\s+|\s+-\s+|(?<=[\d%])\s{2,}(?=[A-Za-z])")
# At least this many recognised names on a step line: one number beside a step is prose or a progress bar.
MIN_NAMES = 2
# A line without a step joins the row above only this many lines after it.
FOLLOW_LINES = 2


def normalise(key: str) -> str:
    """`Grad. Norm` -> `grad_norm`, `Total rewards mean` -> `total_rewards_mean`."""
    words = key.strip().lower().replace(". ", " ").rstrip(".").split()
    return "_".join(words)


def pairs(text: str) -> dict[str, Any]:
    """The `key: value` pairs of a piece of a line (values as text; to_float reads them)."""
    row: dict[str, Any] = {}
    for piece in _SEPARATORS.split(text):
        if piece.count("=") > 1:
            for match in _EQUALS.finditer(piece):
                row[normalise(match.group("key"))] = match.group("value")
            continue
        match = _PAIR.match(piece)
        if match:
            row[normalise(match.group("key"))] = match.group("value")
    return row


def _names(row: dict[str, Any], columns: frozenset[str] = frozenset()) -> int:
    """How many of a row's keys are metric names: built-in, or a column the user's --map names."""
    return sum(1 for key in row if is_known_metric(key) or is_printed_metric(key) or key in columns)


class StepPairs:
    """Rows of step-tagged pair lines, in file order; and, apart (`records`), lines of pairs with no step: each a row,
    except that a line right after one whose names it does not repeat continues it (a summary printed over two
    lines)."""

    def __init__(self, columns: frozenset[str] = frozenset()) -> None:
        self.columns = columns  # the columns a --map names: metric names too
        self.rows: RawRows = []
        self.records: list[dict[str, Any]] = []
        self.unnamed: dict[str, None] = {}  # keys of pair lines that name no known metric, in order (for --map advice)
        self._since = FOLLOW_LINES + 1  # lines since the last row
        self._since_record = 2  # lines since the last record line

    def line(self, line: str) -> bool:
        """Read one line (prefixes already stripped); whether it added to a row."""
        self._since += 1
        self._since_record += 1
        if " " not in line and "|" not in line or _DIGIT.search(line) is None:
            return False
        match = _STEP.search(line)
        if match is None:
            if self.rows and self._since <= FOLLOW_LINES and ("=" in line or ":" in line):
                extra = pairs(line)
                if extra and _names(extra, self.columns):
                    self.rows[-1][1].update({key: value for key, value in extra.items() if key not in self.rows[-1][1]})
                    self._since = 0
                    return True
            return self._record(line)
        return self._stepped(line, match)

    def _record(self, line: str) -> bool:
        """A line of `key: value` (or `key value`) pairs with no step, at least MIN_NAMES of them recognised (a line
        right after a record, naming none of its keys, joins it with at least one)."""
        row = pairs(line)
        joins = self.records and self._since_record == 1 and not (row.keys() & self.records[-1].keys())
        if _names(row, self.columns) < (1 if joins else MIN_NAMES):
            if len(row) >= MIN_NAMES and not _names(row, self.columns):  # a metric line, perhaps, in names no map knows
                self.unnamed.update(dict.fromkeys(row))
            return False
        if joins:
            self.records[-1].update(row)
        else:
            self.records.append(row)
        self._since_record = 0
        return True

    def _stepped(self, line: str, match: re.Match[str]) -> bool:
        rest = line[: match.start()] + " | " + line[match.end() :]
        row = pairs(rest)
        # A progress counter (`Episode 50/400`) marks a training line: one recognised name beside it is a row.
        if _names(row, self.columns) < (1 if match.group(2) else MIN_NAMES):
            return False
        self.rows.append((int(match.group(1)), row))
        self._since = 0
        return True
