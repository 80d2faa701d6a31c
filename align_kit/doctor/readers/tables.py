"""Tables of logged points: the Trainer's notebook progress table as people copy it (`Step | Training Loss | reward |
completions / mean_length | ...`) as CSV, TSV, a markdown pipe table or whitespace-aligned text; a CSV exported from
the W&B UI (`Step`, `<run> - train/reward`, with `__MIN`/`__MAX` columns, one run per column prefix); and any CSV with
a step column (`step`, `global_step`, `iteration`, `update`, ... see `step_columns`) or none (row order, noted), one
run per value of a run column (`run_id`, `seed`, ...) when it has one.

The header is the first line that names a step column, a mapped column or a known metric; its delimiter (`|`, tab,
comma, else runs of spaces) splits the rows after it until a line that does not fit and after which the table does
not go on. A row that does not fit inside the table (another number of cells, a comment) is skipped and noted, never
an end of the reading without a word; a column whose name repeats an earlier one is left out and noted.
"""

from __future__ import annotations

import csv
import re
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

from align_kit.doctor.keymaps import abbreviated_name, is_known_metric, to_float
from align_kit.doctor.readers.common import RawRows, as_step
from align_kit.doctor.readers.step_columns import (
    STEP_LIST,
    epoch_column,
    epochs_step,
    fill_steps,
    row_order_note,
    run_columns,
    split_runs,
    step_column,
)

STEP_COLUMNS = ("step", "global_step", "_step", "Step", "iteration", "train/global_step", "trainer/global_step")
# How HF's notebook table titles what the Trainer logs.
HF_TITLES = {"Training Loss": "loss", "Validation Loss": "eval_loss", "Epoch": "epoch"}
# W&B's UI export: its time columns are no metrics.
WANDB_TIME_COLUMNS = frozenset({"Wall Time", "Relative Time (Process)", "Relative Time (Wall)"})
_SLASH = re.compile(r"\s*/\s*")
# A markdown header rule: `|---|---|`, `| :-: | --- |`, `:--|--:` (one dash is enough with its alignment colons).
_SEPARATOR = re.compile(r"^\|?\s*(?::?-{2,}|:-+:?|-+:)\s*(?:\||$)")
# Markup around a number in a table cell as authors write it: `**0.80**`, `` `0.5` ``, `~0.001`, `≈0.3`, `~0.5+`.
_MARKUP = re.compile(r"^(?:\*\*|__|\*|_|`)(.*?)(?:\*\*|__|\*|_|`)$")
_APPROXIMATE = re.compile(
    r"^(?:~|≈|about\s+|approx\.?\s*)?(?P<number>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\+?$"
)
# A cell naming a step in words: `step 20`, `Step 4340 (51%)`, `step 8550 (end)`.
# `step 20`, `Step: 20`, or a phase of steps (`Steps 1–20 (early)`: a summary row, read at the phase's last step).
_STEP_CELL = re.compile(
    r"^(?:global[_ ]step|steps?|iter(?:ation)?s?)\s*[:=#]?\s*(\d+)(?:\s*(?:-|–|—|to)\s*(\d+))?\b", re.IGNORECASE
)
# A summary column's qualifier before a metric's name (`Typical gen_kl_error`, `Mean reward`): the metric's value.
_SUMMARY_QUALIFIER = re.compile(r"^(?:typical|mean|avg|average|median)\s+", re.IGNORECASE)
_MULTIWORD = re.compile(r"Training Loss|Validation Loss")
_ELISION = frozenset(".…⋮|, \t")


def column_key(name: str, key_map_columns: frozenset[str]) -> str:
    """A column title as the logged key: `completions / mean_length` -> completions/mean_length, `Training Loss` ->
    loss, a title-cased `Reward Std` -> reward_std when that is a known name; a column a --map names stays."""
    name = name.strip().strip('"')
    if name in key_map_columns:
        return name
    name = name.replace("`", "")  # a name set as code in a markdown header
    if (bare := _SUMMARY_QUALIFIER.sub("", name)) != name and is_known_metric(bare):
        return bare
    key = _SLASH.sub("/", name)
    key = HF_TITLES.get(key, key)
    if key in STEP_COLUMNS:
        return key
    lowered = key.lower().replace(" ", "_")
    if lowered != key and is_known_metric(lowered):
        return lowered
    if not is_known_metric(key):
        return abbreviated_name(lowered) or key
    return key


def _elided(line: str) -> bool:
    """A line an author put in place of rows left out (`...`, `…`, `| ... | ... |`): the table goes on after it."""
    text = line.strip()
    return bool(text) and set(text) <= _ELISION and ("..." in text or "…" in text or "⋮" in text)


def _delimiter(line: str) -> str:
    if line.count("|") >= 2:
        return "|"
    if "\t" in line:
        return "\t"
    if "," in line:
        return ","
    return " "


def _cells(line: str, delimiter: str) -> list[str]:
    if delimiter == "|":
        return [cell.strip() for cell in line.strip().strip("|").split("|")]
    if delimiter == ",":
        return [cell.strip() for cell in next(csv.reader([line]))]
    if delimiter == "\t":
        return [cell.strip() for cell in line.split("\t")]
    return line.split()


def _header_cells(line: str, delimiter: str) -> list[str]:
    if delimiter != " ":
        return _cells(line, delimiter)
    # Aligned text: keep the two-word titles and `a / b` whole before splitting on whitespace.
    joined = _SLASH.sub("/", _MULTIWORD.sub(lambda match: match.group(0).replace(" ", "\0"), line))
    return [cell.replace("\0", " ") for cell in joined.split()]


def _is_header(cells: list[str], key_map_columns: frozenset[str]) -> bool:
    if len(cells) < 2:
        return False
    keys = [column_key(cell, key_map_columns) for cell in cells]
    if any(key in STEP_COLUMNS for key in keys) or any(cell in key_map_columns for cell in cells):
        return True
    known = sum(1 for key in keys if _known(key))
    return known >= 1 and all(cell and not _looks_numeric(cell) for cell in cells)


def _known(key: str) -> bool:
    return is_known_metric(key.rpartition(" - ")[2])


def _looks_numeric(cell: str) -> bool:
    return cell_number(cell) is not None


def cell_number(cell: str) -> str | None:
    """A table cell's number as text, the markup authors put around it removed (`**0.59**` -> 0.59, `~0.5+` ->
    0.5, about that much); None when the cell holds no number. NaN and inf stay as written."""
    text = cell.strip()
    while (match := _MARKUP.match(text)) and match.group(1).strip():
        text = match.group(1).strip()
    try:
        float(text)
    except ValueError:
        match = _APPROXIMATE.match(text)
        return match.group("number") if match else None
    return text


def _step_column(table_rows: list[list[str]], width: int) -> int | None:
    """The column whose every cell names a step in words (`step 20`), when the header titles none."""
    for index in range(width):
        if table_rows and all(_STEP_CELL.match(cell_text(row[index])) for row in table_rows):
            return index
    return None


def cell_text(cell: str) -> str:
    text = cell.strip()
    while (match := _MARKUP.match(text)) and match.group(1).strip():
        text = match.group(1).strip()
    return text


class Table:
    """A table found in a text: its header keys and rows of cells; `lines` the text's line number of each row (None
    for an HTML table), `ragged` the (line, cells) of rows skipped for holding another number of cells."""

    def __init__(
        self,
        keys: list[str],
        titles: list[str],
        rows: list[list[str]],
        delimiter: str,
        lines: list[int] | None = None,
        ragged: list[tuple[int, int]] | None = None,
    ):
        self.keys, self.titles, self.rows, self.delimiter = keys, titles, rows, delimiter
        self.lines, self.ragged = lines, ragged or []

    @property
    def is_progress_table(self) -> bool:
        return "Training Loss" in self.titles or any(" / " in title for title in self.titles)

    @property
    def is_wandb_export(self) -> bool:
        return any(" - " in key for key in self.keys) or any(key.endswith(("__MIN", "__MAX")) for key in self.keys)


def find_table(text: str, key_map: Mapping[str, str] | None = None) -> Table | None:
    """The first table in a text, or None."""
    return next(find_tables(text, key_map), None)


def find_tables(text: str, key_map: Mapping[str, str] | None = None) -> Iterator[Table]:
    """Every table in a text, in order: each header line and the rows that fit under it."""
    columns = frozenset((key_map or {}).values())
    lines = text.splitlines()
    number = 0
    while number < len(lines):
        line = lines[number]
        number += 1
        if not line.strip() or _SEPARATOR.match(line.strip()) or "{" in line or "step:" in line:
            continue  # a printed dict or a verl step line is no table header
        delimiter = _delimiter(line)
        try:
            titles = _header_cells(line, delimiter)
        except csv.Error:
            continue
        if not _is_header(titles, columns):
            continue
        rows = _Rows(number + 1, len(titles))
        used = _table_rows(lines, number, delimiter, rows, columns)
        if rows.cells:
            number += used
            keys = [column_key(title, columns) for title in titles]
            yield Table(keys, titles, rows.cells, delimiter, rows.lines, rows.ragged)


def table_of(titles: list[str], rows: list[list[str]], key_map: Mapping[str, str] | None = None) -> Table | None:
    """A table read elsewhere (a notebook's HTML), when its header is one: its titles and rows of cells."""
    columns = frozenset((key_map or {}).values())
    if not _is_header(titles, columns):
        return None
    kept = [row for row in rows if len(row) == len(titles) and any(map(_looks_numeric, row))]
    if not kept:
        return None
    # A row of numbers in another number of cells: skipped and counted, by its row in the table (the header is row 1).
    ragged = [
        (number, len(row))
        for number, row in enumerate(rows, start=2)
        if len(row) != len(titles) and any(map(_looks_numeric, row))
    ]
    return Table([column_key(title, columns) for title in titles], titles, kept, "html", ragged=ragged)


class _Rows:
    """The rows read under a header: cells, the line number of each, the ragged rows skipped."""

    def __init__(self, first_line: int, width: int) -> None:
        self.first_line, self.width = first_line, width
        self.cells: list[list[str]] = []
        self.lines: list[int] = []
        self.ragged: list[tuple[int, int]] = []

    def add(self, cells: list[str], used: int) -> None:
        self.cells.append(cells)
        self.lines.append(self.first_line + used - 1)


def _row_cells(line: str, delimiter: str, width: int) -> list[str]:
    """A line's cells under a table of `width` columns."""
    if delimiter == ",":
        try:
            return [cell.strip() for cell in next(csv.reader([line]))]
        except (csv.Error, StopIteration):
            return []
    cells = _cells(line, delimiter)
    if delimiter == " " and len(cells) == width + 1 and cells[0].isdigit():
        cells = cells[1:]  # a pandas DataFrame printed with its index (`pd.DataFrame(log_history)`)
    return cells


def _fits(cells: list[str], width: int) -> bool:
    return len(cells) == width and any(map(_looks_numeric, cells))


def _resumes(lines: list[str], after: int, delimiter: str, width: int) -> bool:
    """Whether the table goes on after a line that does not fit it: the next line that is not blank (within three)
    fits it again. `after` is the index of the line after the one that did not fit."""
    following = next((line for line in islice(lines, after, after + 3) if line.strip()), None)
    return following is not None and _fits(_row_cells(following, delimiter, width), width)


def _table_rows(lines: list[str], start: int, delimiter: str, rows: _Rows, columns: frozenset[str]) -> int:
    """The rows under a header from `lines[start]` on, into `rows`; the lines used. A line that does not fit (another
    number of cells, or no number) is a ragged row, skipped and counted in `rows.ragged`, when the table goes on after
    it, or, with a delimiter marking the cells, when it holds a number; a blank line inside a table is passed over
    when the table goes on after it. Otherwise the line ends the table, and a header line always does (it may start
    the next)."""
    used = 0
    for line in islice(lines, start, None):
        used += 1
        stripped = line.strip()
        if not stripped or _SEPARATOR.match(stripped) or _elided(stripped):
            if rows.cells and not stripped and not _resumes(lines, start + used, delimiter, rows.width):
                break
            continue
        cells = _row_cells(line, delimiter, rows.width)
        if _fits(cells, rows.width):
            rows.add(cells, used)
            continue
        numeric = any(map(_looks_numeric, cells))
        header = not numeric and _is_header(cells, columns)
        if (
            rows.cells
            and not header
            and ((numeric and delimiter != " ") or _resumes(lines, start + used, delimiter, rows.width))
        ):
            rows.ragged.append((rows.first_line + used - 1, len(cells)))
            continue
        used -= 1  # a row holds numbers: a line of words ends the table, and may start the next
        break
    return used


def _ragged_note(table: Table) -> list[str]:
    if not table.ragged:
        return []
    (line, cells), count = table.ragged[0], len(table.ragged)
    where = f"line {line}" if table.lines is not None else f"row {line} of the HTML table"
    return [
        f"skipped {count} row(s) whose number of cells differs from the header's {len(table.titles)} (first: "
        f"{where}, {cells} cells); the rows around them are read"
    ]


def _repeated_columns(table: Table) -> tuple[set[int], list[str]]:
    """The columns that repeat an earlier column's key (`reward` twice, or `loss` beside `Training Loss`), left out:
    the first of a key is read, and a note says which and whether the two ever differ."""
    first: dict[str, int] = {}
    dropped: set[int] = set()
    notes: list[str] = []
    for index, key in enumerate(table.keys):
        if key == "":
            continue
        if key not in first:
            first[key] = index
            continue
        kept = first[key]
        dropped.add(index)
        differ = [
            number
            for number, cells in enumerate(table.rows)
            if cells[kept] != "" and cells[index] != "" and _cell_value(cells[kept]) != _cell_value(cells[index])
        ]
        if differ:
            where = table.lines[differ[0]] if table.lines else differ[0] + 1
            unit = "line" if table.lines else "row"
            agree = f"they differ on {len(differ)} row(s), the first on {unit} {where}"
        else:
            agree = "they agree on every row"
        notes.append(
            f"column {index + 1} ({table.titles[index]!r}) repeats column {kept + 1} ({table.titles[kept]!r}), both "
            f"read as {key!r}: column {kept + 1} is read, column {index + 1} left out; {agree}"
        )
    return dropped, notes


def _cell_value(cell: str) -> str:
    number = cell_number(cell)
    if number is None:
        return cell.strip()
    value = to_float(number)
    return repr(value) if value is not None else number


def table_rows(table: Table) -> tuple[dict[str, RawRows], list[str]]:
    """{run name: raw rows} ("" for a single run) and notes. A W&B export gives one run per column prefix; a table
    with a run column (`run_id`, `seed`, ...) one run per value (see `step_columns`)."""
    notes: list[str] = []
    step_key = step_column(table.keys)
    if step_key is None and (epoch := epoch_column(table.keys)) is not None:
        index = table.keys.index(epoch)
        if epochs_step([cells[index] for cells in table.rows if cells[index] != ""]):
            step_key = epoch
            notes.append(f"no step column ({STEP_LIST}): the whole-number {epoch} column is the step")
    step_index = table.keys.index(step_key) if step_key is not None else None
    worded = None
    if step_index is None:
        worded = step_index = _step_column(table.rows, len(table.keys))
        if worded is not None:
            title = table.titles[worded]
            notes.append(f"steps read from the column {title!r}, whose cells name them (`step N`; `Steps A-B` at B)")
    by_run = run_columns(table.keys) if not table.is_wandb_export else []
    dropped, repeat_notes = _repeated_columns(table)
    notes += _ragged_note(table) + repeat_notes
    runs: dict[str, list[tuple[int, str]]] = {}  # run -> [(column index, metric key)]
    for index, key in enumerate(table.keys):
        skip = index == step_index or index in dropped or key == ""
        if skip or key in WANDB_TIME_COLUMNS or key.endswith(("__MIN", "__MAX")):
            continue
        run, sep, metric = key.rpartition(" - ") if table.is_wandb_export else ("", "", key)
        runs.setdefault(run.strip(), []).append((index, metric.strip() if sep else key))
    result: dict[str, RawRows] = {}
    for run, columns in runs.items():
        stepped: list[tuple[int | None, dict[str, Any]]] = []
        for cells in table.rows:
            if step_index is None:
                step = None
            elif step_index == worded:
                first, last = _STEP_CELL.match(cell_text(cells[step_index])).groups()
                step = int(last or first)
            else:
                step = as_step(cells[step_index])
            if step is None and step_index is not None:
                continue
            row: dict[str, Any] = {
                metric: cell_number(cells[index]) or cells[index] for index, metric in columns if cells[index] != ""
            }
            if row.keys() - set(by_run):
                stepped.append((step, row))
        split, split_notes = split_runs(stepped, by_run) if by_run else ({run: stepped}, [])
        notes += split_notes
        for name, part in split.items():
            result[name or run] = fill_steps(part)
    if step_index is None:
        notes.append(row_order_note(sum(map(len, result.values())), len(result)))
    return result, notes
