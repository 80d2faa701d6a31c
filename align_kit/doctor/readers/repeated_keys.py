"""JSON objects that name one key twice (`{"reward": 0.1, "reward": 0.9}`): JSON parsers keep the later value and
say nothing. The doctor keeps the later value too, as every JSON reader would, and says so: which keys, how often,
and where the first was."""

from __future__ import annotations

import json
from typing import Any


class RepeatedKeys:
    """An `object_pairs_hook` that builds each object as json does (the later of two equal keys wins) and records
    the keys named more than once; `line` is set by a caller reading JSON lines, for the note."""

    def __init__(self) -> None:
        self.keys: dict[str, int] = {}  # key -> objects in which it repeats
        self.first_line: int | None = None
        self.line: int | None = None
        self.decoder = json.JSONDecoder(object_pairs_hook=self)

    def __call__(self, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        row = dict(pairs)
        if len(row) != len(pairs):
            seen: set[str] = set()
            for key, _ in pairs:
                if key in seen:
                    self.keys[key] = self.keys.get(key, 0) + 1
                seen.add(key)
            if self.first_line is None:
                self.first_line = self.line
        return row

    def loads(self, text: str) -> Any:
        return self.decoder.decode(text)

    def note(self) -> str:
        """The report's note, "" when no key repeated."""
        if not self.keys:
            return ""
        named = ", ".join(f"{key!r} ({count}x)" for key, count in list(self.keys.items())[:8])
        more = f", ... ({len(self.keys)} keys)" if len(self.keys) > 8 else ""
        where = f", the first on line {self.first_line}" if self.first_line is not None else ""
        return (
            f"key(s) named twice in one JSON object{where}: {named}{more}; the later value of each is read, "
            "as JSON parsers do"
        )
