"""Which of a command's overrides the user typed, for the checks that honour a setting only from the command line.

Those checks (align_kit.experiment.opt_ins, write_folders, environment_reads, train.allowed_targets, the launcher's
shell settings) read Hydra's record of the command line. `align-kit sweep --resume` relaunches a sweep from its
manifest's overrides, passed as command-line ones; a manifest handed over by someone else is a file like any other,
so while its pre-flight runs the keys its lines set are set aside here (`handed_over`) and those checks count every
line setting them as a file's. By key, not by text: Hydra's sweeper rewrites each job's lines (`seed=1,2` becomes
`seed=1`, `true` becomes `True`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator

_handed_over: frozenset[str] = frozenset()


def override_key(line: str) -> str:
    """The key (or config group) an override line sets, without its `+`/`++`/`~`."""
    return str(line).split("=", 1)[0].lstrip("+~")


@contextlib.contextmanager
def handed_over(keys: Iterable[str]) -> Iterator[None]:
    """Within the block, lines that set one of `keys` count as a file's, not as typed."""
    global _handed_over
    before = _handed_over
    _handed_over = frozenset(keys)
    try:
        yield
    finally:
        _handed_over = before


def handing_over() -> bool:
    """Whether a handed-over manifest's lines are set aside now: then no site file (a --config-dir file the user
    keeps for a cluster's shell settings) counts as the user's either, since the manifest named the folder."""
    return bool(_handed_over)


def typed(lines: Iterable) -> list[str]:
    """The override lines of `lines` (Hydra's record of the command line) that the user typed."""
    return [str(line) for line in lines if override_key(line) not in _handed_over]
