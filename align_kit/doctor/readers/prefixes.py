"""What launchers and loggers print before a log line, taken off before any reader parses it: ANSI colour codes,
torchrun's `[default0]:`, Ray's `(TaskRunner pid=123)`, `rank0:`, and timestamps with a log level (`[2025-11-25
07:19:22]`, `15:41:26 SUCCESS`, `2025-01-02 10:00:00,123 - INFO -`). A printed dict or JSON row behind a prefix is
then a dict, not a corrupt JSON line."""

from __future__ import annotations

import re

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")
_LEVEL = r"(?:TRACE|DEBUG|INFO|SUCCESS|WARNING|WARN|ERROR|CRITICAL)"
# One prefix at the start of the line; they are taken off in a loop, so any order and number of them goes.
_PREFIX = re.compile(
    r"^\s*(?:"
    r"\[(?:default|rank|worker|node)?\d+\]\s*:?"  # torchrun / deepspeed: [default0]:, [rank3]:, [0]:
    r"|\((?:[A-Za-z_][\w.]*\s+)?pid=\d+(?:,\s*ip=[\d.]+)?\)"  # Ray: (TaskRunner pid=123), (pid=9, ip=10.0.0.1)
    r"|rank\s?\d+\s*:"  # rank0:
    r"|\[?\d{4}-\d{2}-\d{2}[ T]\d{2}:\d{2}:\d{2}(?:[.,]\d+)?(?:Z|[+-]\d{2}:?\d{2})?\]?"  # [2025-11-25 07:19:22]
    r"|\[?\d{2}:\d{2}:\d{2}(?:[.,]\d+)?\]?"  # 15:41:26
    r"|\[?" + _LEVEL + r"\]?\s*(?:-|:|\|)?"  # INFO, [INFO], INFO -
    r"|-\s"  # the ' - ' between a timestamp and a level
    r")\s*"
)


# The first characters a prefix can start with (a timestamp's digits are checked for their `:` or `-`).
_STARTS = frozenset("[( \trTDISWEC-")


def _may_have_prefix(line: str) -> bool:
    head = line[:1]
    if head.isdigit():
        return line[2:3] == ":" or line[4:5] == "-"
    return head in _STARTS


def strip_prefix(line: str) -> str:
    """The line without the launcher's and logger's prefixes (unchanged when it has none)."""
    if "\x1b" in line:
        line = ANSI.sub("", line)
    if not _may_have_prefix(line):
        return line
    while True:
        match = _PREFIX.match(line)
        if match is None or not match.end():
            return line
        rest = line[match.end() :]
        if rest == line:
            return line
        line = rest
