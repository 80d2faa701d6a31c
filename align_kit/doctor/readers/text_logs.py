"""Metric rows printed into text: TRL's log dicts (`{'loss': 0.01, 'reward': 0.5, ...}`, Python repr, `nan` and
`inf` bare) and verl's console lines (`step:12 - actor/entropy:0.41 - critic/score/mean:0.5 - ...`, behind Ray's
`(TaskRunner pid=...)` prefix and colour codes), anywhere in a console log, a SLURM .out, a markdown excerpt or the
text a notebook's cells printed (`notebooks`). A dict a terminal or a paste wrapped over several lines is joined;
a printed config dict is counted and left out.

One pass over the lines; each line is tested with `in` before any regex, the regexes are compiled once and anchored
on literal text, so the cost is linear in the file. Dicts are parsed as JSON after quoting (a C parser); only a line
JSON refuses (a quote inside a value, True/None) goes through `ast.literal_eval`, never eval.
"""

from __future__ import annotations

import ast
import json
import re
from typing import Any

from align_kit.doctor.readers.common import RawRows, as_step, is_summary
from align_kit.doctor.readers.evidence import is_config
from align_kit.doctor.readers.prefixes import strip_prefix
from align_kit.doctor.readers.step_pairs import StepPairs

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
# verl: `step:N - ` after the start of the line or a non-key character (Ray's prefix ends with ') ').
VERL_STEP = re.compile(r"(?:^|[\s)\]|>])step:\s*(\d+)\s+-\s+")
# A bare nan / inf value in a printed dict (after ': ', before ',' or '}').
# Any spelling: `nan`, `NaN` (ms-swift's `'kl': NaN`), `inf`, `Infinity`, `-inf`.
_BARE = re.compile(r"(:\s*)([-+]?)(nan|inf(?:inity)?)(?=\s*[,}])", re.IGNORECASE)
# numpy / torch scalars as newer libraries print them: np.float64(0.5), tensor(0.5, device='cuda:0').
_SCALAR = re.compile(r"(?:np|numpy)\.(?:float|int)\d*\(\s*([^()]*?)\s*\)|tensor\(\s*([^,()]+?)\s*(?:,[^()]*)?\)")
_JSON_SPELLING = {"nan": "NaN", "inf": "Infinity"}
STEP_KEYS = ("step", "global_step", "global_step/max_steps")


def _json_non_finite(match: re.Match) -> str:
    sign = "-" if match.group(2) == "-" else ""
    return f"{match.group(1)}{sign}{_JSON_SPELLING[match.group(3).lower()[:3]]}"


def _quoted_non_finite(match: re.Match) -> str:
    return f"{match.group(1)}'{match.group(2)}{match.group(3).lower()[:3]}'"


def _scalar(match: re.Match) -> str:
    return match.group(1) if match.group(1) is not None else match.group(2)


def _parsed(text: str) -> Any:
    if "(" in text:
        text = _SCALAR.sub(_scalar, text)
    try:
        return json.loads(_BARE.sub(_json_non_finite, text).replace("'", '"'))
    except ValueError:
        try:
            return ast.literal_eval(_BARE.sub(_quoted_non_finite, text))
        except (ValueError, SyntaxError, TypeError, MemoryError, RecursionError):
            return None


def parse_log_dicts(text: str) -> list[dict[str, Any]] | None:
    """The dicts of a printed dict, or of several on one line (`trainer.state.log_history` printed as a list:
    `{...}, {...}`); None when it is neither."""
    parsed = _parsed(text)
    if isinstance(parsed, dict):
        return [parsed]
    if ("}, {" in text or "},{" in text) and isinstance(parsed := _parsed(f"[{text}]"), list):
        dicts = [item for item in parsed if isinstance(item, dict)]
        return dicts if len(dicts) == len(parsed) else None
    return None


def _verl_items(rest: str) -> dict[str, Any]:
    row: dict[str, Any] = {}
    for item in rest.split(" - "):
        key, colon, value = item.rpartition(":")
        if not colon:
            continue
        value = value.strip()
        if value.endswith(")") and "(" in value:
            value = value[value.find("(") + 1 : -1].split(",")[0]
        row[key.strip()] = value
    return row


def _continues_verl(line: str) -> bool:
    """A piece of a wrapped verl step line: `key:value` items joined by ' - ' and nothing else (no prefix, no
    spaces inside an item), e.g. `ritic/returns/min:0.000 - response_length/me`."""
    text = line.strip()
    if not text or text.startswith(("(", "[", "{")) or ":" not in text:
        return False
    return all(part and " " not in part for part in text.split(" - "))


_KEY_OPENS = re.compile(r"""^(['"])[^'"]+\1:\s""")
# The text before a dict that makes it a value inside another: a quoted key and its colon (`'optim': {`).
_NESTED = re.compile(r"""['"]\s*:$""")


def _dict_start(line: str) -> int:
    """Where a printed dict starts on a line, or -1: a dict that is a value inside another (`'optim': {'lr': ...`,
    a line of a pretty-printed config) is no log line; an item of a printed list of log dicts is."""
    for opener in ("{'", '{"'):
        start = line.find(opener)
        while start >= 0:
            if not _NESTED.search(line[:start].rstrip()):
                return start
            start = line.find(opener, start + 1)
    return -1


# A dict wrapped over more lines than this is no log line (an unclosed brace in prose): given up.
WRAP_LIMIT = 400


class LogLines:
    """Rows found in a text: TRL dicts (with the step each line states, if any) and verl step lines; printed
    config dicts (`evidence.is_config`) are counted and left out."""

    def __init__(self, columns: frozenset[str] = frozenset()) -> None:
        self.trl: list[tuple[int | None, dict[str, Any]]] = []
        self.verl: RawRows = []
        self.summaries = 0
        self.unparsed = 0
        self.configs = 0
        self.joined = 0  # dicts a paste or a terminal wrapped over several lines, joined
        self.pairs = StepPairs(columns)  # `key: value` lines, step-tagged or not (`columns`: names a --map gives)

    def _take(self, text: str) -> bool:
        """Parse one printed dict (or a list of them on one line); whether it held a metric row."""
        rows = parse_log_dicts(text)
        if rows is None:
            self.unparsed += 1
            return False
        taken = False
        for row in rows:
            if is_summary(row):
                self.summaries += 1
            elif is_config(row):
                self.configs += 1
            elif any(isinstance(value, int | float | str) for value in row.values()):
                step = next((as_step(row[key]) for key in STEP_KEYS if key in row), None)
                self.trl.append((step, row))
                taken = True
        return taken

    def scan(self, text: str) -> LogLines:
        verl_rest = None  # the key:value text of the verl line just read, while continuation lines may follow
        wrapped: list[str] | None = None  # the pieces of a dict still open at the end of its line
        for line in text.splitlines():
            line = strip_prefix(line)
            if wrapped is not None:
                if _dict_start(line) >= 0 or "step:" in line or len(wrapped) >= WRAP_LIMIT:
                    self.unparsed += 1  # a new dict or step line before this one closed: it was cut
                    wrapped = None
                else:
                    # A terminal or a paste cut the line at some width: the pieces join without a separator.
                    wrapped.append(line.strip())
                    joined = "".join(wrapped)
                    if joined.count("{") <= joined.count("}"):
                        self.joined += self._take(joined[: joined.rfind("}") + 1])
                        wrapped = None
                    continue
            if "step:" in line:
                if "\x1b" in line:
                    line = ANSI.sub("", line)
                match = VERL_STEP.search(line)
                if match:
                    verl_rest = line[match.end() :]
                    self.verl.append((int(match.group(1)), _verl_items(verl_rest)))
                    continue
            if verl_rest is not None and _continues_verl(line):
                # A long step line pasted with hard wraps: the wrap may cut a key or a value, so the pieces join
                # without a separator.
                verl_rest += line.strip()
                self.verl[-1] = (self.verl[-1][0], _verl_items(verl_rest))
                continue
            verl_rest = None
            if (
                line.startswith(("'", '"'))
                and "{" not in line
                and line.rstrip().endswith("}")
                and _KEY_OPENS.match(line)
            ):
                line = "{" + line  # a dict whose opening brace a paste or a wrap left on the line before
            if "{" in line and ("':" in line or '":' in line or line.rstrip().endswith(("{'", '{"'))):
                if "\x1b" in line:
                    line = ANSI.sub("", line)
                start = _dict_start(line)
                if start < 0:
                    continue
                piece = line[start:]
                if piece.count("{") > piece.count("}"):
                    wrapped = [piece.rstrip()]
                    continue
                if self._take(piece[: piece.rfind("}") + 1]):
                    continue
            self.pairs.line(line)
        if wrapped is not None:
            self.unparsed += 1
        return self


def _is_eval_only(row: dict[str, Any]) -> bool:
    return all(key.startswith("eval_") or key in ("epoch", "step") for key in row)


def trl_rows(found: list[tuple[int | None, dict[str, Any]]], logging_steps: int | None) -> tuple[RawRows, list[str]]:
    """Steps for TRL's printed dicts: the line's own step where it states one; else i * logging_steps; else the
    logged-point index. An eval dict (eval_* keys only) belongs to the training point before it."""
    notes: list[str] = []
    stated = any(step is not None for step, _ in found)
    raw: RawRows = []
    index = 0
    for step, row in found:
        if _is_eval_only(row) and raw and step is None:
            raw.append((raw[-1][0], row))
            continue
        index += 1
        if step is None:
            step = index * logging_steps if logging_steps else index
        raw.append((step, row))
    if not stated:
        if logging_steps:
            notes.append(f"steps from --logging-steps {logging_steps}: step = logged point x {logging_steps}")
        else:
            notes.append(
                "the log lines carry no step: steps are logged-point indices (1, 2, 3, ...); "
                "pass --logging-steps N for the trainer's steps"
            )
    return raw, notes
