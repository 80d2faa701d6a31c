"""A Jupyter notebook's record of a run: everything its cells printed, of every output kind. `stream` text (the
printed log dicts, verl's step lines, tqdm bars), `text/plain` results, markdown cells (pasted excerpts), and the
Trainer's progress table, which HF's NotebookProgressCallback renders as HTML in a `text/html` output (`<table>` with
a `Step | Training Loss | reward | ...` header), read with the standard library's html.parser.

The progress table is redrawn in place as training runs, so a saved notebook holds its last state; when an output
holds several tables (one per redraw), each is offered and the one with the most metric rows wins.
"""

from __future__ import annotations

from collections.abc import Mapping
from html.parser import HTMLParser
from typing import Any

from align_kit.doctor.readers.tables import Table, table_of


def _joined(value: Any) -> str:
    if isinstance(value, list):
        return "".join(str(part) for part in value)
    return value if isinstance(value, str) else ""


class _Tables(HTMLParser):
    """The tables of an HTML text as lists of rows of cell texts (th and td alike)."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tables: list[list[list[str]]] = []
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._depth = 0

    def handle_starttag(self, tag: str, attrs) -> None:
        if tag == "table":
            self._depth += 1
            if self._depth == 1:
                self.tables.append([])
        elif tag == "tr" and self._depth == 1:
            self._row = []
        elif tag in ("td", "th") and self._row is not None:
            self._cell = []

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None and self._row is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            if self._row and self.tables:
                self.tables[-1].append(self._row)
            self._row = None
        elif tag == "table" and self._depth:
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data)


def html_tables(html: str, key_map: Mapping[str, str] | None = None) -> list[Table]:
    """The tables of an HTML text whose first row is a header of a step or metric columns."""
    parser = _Tables()
    parser.feed(html)
    parser.close()
    found = []
    for rows in parser.tables:
        if len(rows) >= 2 and (table := table_of(rows[0], rows[1:], key_map)) is not None:
            found.append(table)
    return found


def notebook_contents(notebook: Mapping[str, Any], key_map: Mapping[str, str] | None = None) -> tuple[str, list[Table]]:
    """(the text the notebook's cells printed and its markdown cells, the HTML tables of its outputs)."""
    parts: list[str] = []
    tables: list[Table] = []
    for cell in notebook.get("cells") or []:
        if not isinstance(cell, dict):
            continue
        if cell.get("cell_type") == "markdown":
            parts.append(_joined(cell.get("source")))
        for output in cell.get("outputs") or []:
            if not isinstance(output, dict):
                continue
            if "text" in output:  # stream output
                parts.append(_joined(output["text"]))
            if "traceback" in output:
                parts.append("\n".join(map(str, output.get("traceback") or [])))
            data = output.get("data") or {}
            if not isinstance(data, dict):
                continue
            html = _joined(data.get("text/html"))
            if "<table" in html:
                tables += html_tables(html, key_map)
            if "text/plain" in data:
                parts.append(_joined(data["text/plain"]))
    return "\n".join(parts), tables


def code_sources(notebook: Mapping[str, Any]) -> list[str]:
    """The code cells' sources in order: what they set is read apart from what the cells printed (readers/
    code_budget.py), never as log lines."""
    cells = [cell for cell in notebook.get("cells") or [] if isinstance(cell, dict)]
    return [_joined(cell.get("source")) for cell in cells if cell.get("cell_type") == "code"]
