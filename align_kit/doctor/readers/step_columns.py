"""Where a CSV's or JSONL's rows get their steps, and which column tells several runs in one file apart.

The step is the first of STEP_NAMES a file has (`step`, `global_step`, `train/global_step`, ..., `iteration`, `iter`,
`update`, W&B's `_step` last, as it counts log calls rather than optimizer steps); the case of a title and its spaces
aside (`Update`, `Global Step`). A file with none of them is stepped by its `epoch` column when every epoch is a whole
number and no two rows in a row share one (an epoch-per-row log); otherwise by row order, 1, 2, ..., and its notes
say so.

A file holding several runs, told apart by a column (RUN_COLUMNS: `run_id`, `run_name`, `experiment`, `trial`,
`seed`, ...), gives one run per value, each with its own steps and named by that value (`seed=42` for a bare number).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from align_kit.doctor.keymaps import to_float

STEP_NAMES = (
    "step",
    "global_step",
    "train/global_step",
    "trainer/global_step",
    "training/global_step",
    "iteration",
    "training_iteration",  # Ray Tune's result rows
    "iter",
    "update",
    "_step",
)
EPOCH = "epoch"
ROW_ORDER = "row order"
# The columns whose values tell runs apart, in the order their values name a run: the most specific first.
RUN_COLUMNS = (
    "run_name",
    "run_id",
    "run",
    "experiment_name",
    "experiment",
    "exp_name",
    "exp",
    "trial_id",
    "trial",
    "seed",
)
STEP_LIST = ", ".join(STEP_NAMES)


def _plain(key: str) -> str:
    return key.strip().lower().replace(" ", "_")


_RANK = {name: rank for rank, name in enumerate(STEP_NAMES)}
_RUN = frozenset(RUN_COLUMNS)


def step_column(keys: Iterable[str]) -> str | None:
    """The key among `keys` that is the step (the first of STEP_NAMES that is there), or None."""
    ranked = [(_RANK[_plain(key)], key) for key in keys if _plain(key) in _RANK]
    return min(ranked)[1] if ranked else None


def epoch_column(keys: Iterable[str]) -> str | None:
    return next((key for key in keys if _plain(key) == EPOCH), None)


def epochs_step(values: list[Any]) -> bool:
    """Whether an epoch column can be the step: every value a whole number, none repeating the one before (a log of
    several rows per epoch, or HF's fractional epochs, would merge rows that are different steps)."""
    numbers = [to_float(value) for value in values]
    if not numbers or any(number is None or number != number or not number.is_integer() for number in numbers):
        return False
    return all(after != before for before, after in zip(numbers, numbers[1:], strict=False))


def row_order_note(rows: int, runs: int, unit: str = "row") -> str:
    """The note of rows read in row order; `unit` is what a row is in the file (a JSONL's "line")."""
    where = f"each run's {unit} numbers" if runs > 1 else f"the {unit} numbers"
    return (
        f"{rows} row(s) without a step column ({STEP_LIST}, or whole-number epochs): read in row order, "
        f"steps are {where} 1, 2, ..."
    )


def run_columns(keys: Iterable[str]) -> list[str]:
    """The keys among `keys` that can tell runs apart, in RUN_COLUMNS' order."""
    found = {_plain(key): key for key in keys if _plain(key) in _RUN}
    return [found[name] for name in RUN_COLUMNS if name in found]


def split_runs(
    rows: list[tuple[int | None, dict[str, Any]]], columns: list[str]
) -> tuple[dict[str, list[tuple[int | None, dict[str, Any]]]], list[str]]:
    """{run name: its rows} for the rows of a file whose run `columns` (from run_columns) vary, the run columns taken
    out of the rows, and a note; ({"": rows}, []) when none varies (a constant one taken out) or a split would leave a
    run of one row (a seed per sample, not per run)."""
    varying = [column for column in columns if len({_cell(row, column) for _, row in rows}) > 1]
    if not varying:
        # One run: a run column in every row names it and is no metric (a constant `seed` would read as a config).
        every = [column for column in columns if all(column in row for _, row in rows)]
        return {"": [(step, {k: v for k, v in row.items() if k not in every}) for step, row in rows]}, []
    groups: dict[tuple[str, ...], list[tuple[int | None, dict[str, Any]]]] = {}
    for step, row in rows:
        key = tuple(_cell(row, column) for column in varying)
        groups.setdefault(key, []).append((step, {k: v for k, v in row.items() if k not in columns}))
    if min(len(group) for group in groups.values()) < 2:
        return {"": rows}, []
    names = _names(list(groups), varying)
    told = " and ".join(varying)
    note = f"{len(groups)} runs in this file, told apart by the {told} column{'s' if len(varying) > 1 else ''}"
    return dict(zip(names, groups.values(), strict=True)), [note]


def _cell(row: Mapping[str, Any], column: str) -> str:
    value = row.get(column)
    return "" if value is None else str(value).strip()


def _names(keys: list[tuple[str, ...]], columns: list[str]) -> list[str]:
    """Each run's name: the value of the first column whose values alone tell the runs apart (`column=value` for a
    bare number), else every column's `column=value`."""
    for index, column in enumerate(columns):
        values = [key[index] for key in keys]
        if len(set(values)) == len(keys):
            return [_named(column, value) for value in values]
    return [" ".join(_named(column, value) for column, value in zip(columns, key, strict=True)) for key in keys]


def _named(column: str, value: str) -> str:
    return f"{column}={value}" if to_float(value) is not None or not value else value


def fill_steps(rows: list[tuple[int | None, dict[str, Any]]]) -> list[tuple[int, dict[str, Any]]]:
    """The rows with a step each: a row without one takes its position in the run, 1, 2, ..."""
    return [(position if step is None else step, row) for position, (step, row) in enumerate(rows, start=1)]
