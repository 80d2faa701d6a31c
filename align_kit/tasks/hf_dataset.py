"""A user's dataset mapped onto align_kit's columns by name (a local folder, data file, or hub name)."""

from __future__ import annotations

import csv
import io
import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob


@dataclass
class HFDatasetTask(Component):
    # What `dataset` gives the rewards: the user's columns mapped by task.prompt_column / answer_column / domain_column.
    COLUMNS: ClassVar[tuple[str, ...]] = ("prompt", "answer", "domain")
    path: str | None = knob(
        None,
        help="Where the data is: a folder saved with datasets' save_to_disk, a .json / .jsonl / .csv / .parquet "
        "file, or a hub dataset name. Required.",
    )
    name: str | None = knob(None, help="The dataset's configuration name on the hub; null for one without.")
    split: str = knob("train", help="The split trained on; a single data file has only `train`.")
    eval_split: str | None = knob(None, help="The split evaluated on; null: no evaluation set.")
    prompt_column: str = knob(
        "prompt",
        help="The column holding the prompt: text, or a conversation as a list of {role, content} messages.",
    )
    answer_column: str = knob(
        "answer",
        help="The column holding the reference answer (text or a number), given to the rewards as `answer`.",
    )
    domain_column: str | None = knob(
        None,
        help="The column naming each row's domain, for per-domain metrics and KL; null: every row is default_domain.",
    )
    default_domain: str = knob("default", help="The domain of every row when domain_column is null.")
    completion_column: str | None = knob(
        None,
        help="A column of demonstration completions for model=tiny's warm-start SFT; null: no demonstrations.",
    )

    def validate(self) -> None:
        if not self.path:
            raise ConfigError("task=hf_dataset needs task.path=<local folder, data file or hub dataset name>")

    @property
    def source(self) -> str:
        """How errors name this data."""
        return f"task.path={self.path}"

    def _split_key(self, split: str) -> str:
        return "task.eval_split" if split == self.eval_split and split != self.split else "task.split"

    def _load(self, split: str):
        import datasets

        local = Path(self.path).expanduser()
        if local.is_dir():
            try:
                loaded = datasets.load_from_disk(str(local))
            except (FileNotFoundError, ValueError) as error:
                raise ConfigError(f"{self.source} is not a saved dataset ({_first_line(error)})") from None
            if not isinstance(loaded, datasets.DatasetDict):
                return loaded
            if split not in loaded:
                raise ConfigError(
                    f"{self._split_key(split)}={split}: {self.source} has no such split; its splits: {sorted(loaded)}"
                )
            return loaded[split]
        if local.is_file():
            reader = {".json": read_json_rows, ".jsonl": read_json_rows, ".csv": read_csv_rows}.get(local.suffix)
            if reader is None and local.suffix != ".parquet":
                raise ConfigError(f"task.path={self.path}: unsupported file type {local.suffix!r}")
            if split != "train":
                raise ConfigError(
                    f"{self._split_key(split)}={split}: {self.source} is one data file, whose only split is 'train'"
                )
            if reader is not None:
                return reader(local, self.source)  # rows as dicts, checked before they become a table
            try:
                return datasets.load_dataset("parquet", data_files=str(local), split=split)
            except Exception as error:  # a broken parquet file: name it in one line
                raise ConfigError(f"{self.source} cannot be read as parquet ({_first_line(error)})") from None
        try:
            return datasets.load_dataset(self.path, self.name, split=split)
        except ValueError as error:
            if "split" in str(error).lower():
                raise ConfigError(f"{self._split_key(split)}={split}: {_first_line(error)}") from None
            raise ConfigError(f"{self.source} cannot be loaded ({_first_line(error)})") from None
        except Exception as error:  # hub or builder failures: one line naming the dataset
            raise ConfigError(f"{self.source} cannot be loaded ({_first_line(error)})") from None

    def dataset(self, split: str = "train"):
        from datasets import Dataset

        if split != "train" and not self.eval_split:
            return None
        raw = self._load(self.split if split == "train" else self.eval_split)
        columns = _columns(raw)
        wanted = (self.prompt_column, self.answer_column, self.domain_column, self.completion_column)
        missing = [c for c in wanted if c and c not in columns]
        if missing:
            raise ConfigError(
                f"task.path={self.path} has no column(s) {missing}; its columns are {columns}: "
                "set task.prompt_column / task.answer_column / task.domain_column / task.completion_column"
            )
        if len(raw) == 0:
            raise ConfigError(f"{self.source} holds no rows")
        self._check_rows(raw)
        prompts = _values(raw, self.prompt_column)
        answers = [str(answer).strip() for answer in _values(raw, self.answer_column)]
        domains = _values(raw, self.domain_column) if self.domain_column else [self.default_domain] * len(prompts)
        try:
            return Dataset.from_dict({"prompt": prompts, "answer": answers, "domain": [str(d) for d in domains]})
        except (TypeError, ValueError) as error:  # pyarrow: one column holding text and message lists
            problem = f"{self.prompt_column} mixes kinds of values ({_first_line(error)})"
            raise ConfigError(f"{self.source}: {problem}") from None

    def _check_rows(self, raw) -> None:
        """Every row has a usable prompt and answer (rows counted from 1, as in the file)."""
        for column, check in ((self.prompt_column, _prompt_problem), (self.answer_column, _answer_problem)):
            for row, value in enumerate(_values(raw, column), start=1):
                problem = check(value)
                if problem:
                    raise ConfigError(f"{self.source} row {row}: {column} {problem}")
        if self.domain_column:
            for row, value in enumerate(_values(raw, self.domain_column), start=1):
                problem = _domain_problem(value)
                if problem:
                    raise ConfigError(f"{self.source} row {row}: {self.domain_column} {problem}")

    def demonstrations(self) -> list[tuple[str, str]]:
        if not self.completion_column:
            return []
        raw = self._load(self.split)
        return [(row[self.prompt_column], row[self.completion_column]) for row in raw]

    def probe_pairs(self, count: int) -> list[tuple[str, str]]:
        rows = self.dataset("train")
        rows = rows.select(range(min(count, len(rows))))
        return list(zip(rows["prompt"], rows["answer"], strict=True))

    def cache_key(self) -> dict:
        return {
            "kind": "hf_dataset",
            "path": self.path,
            "name": self.name,
            "split": self.split,
            "prompt": self.prompt_column,
            "completion": self.completion_column,
        }


def _columns(raw) -> list[str]:
    if isinstance(raw, list):
        return list(dict.fromkeys(key for row in raw for key in row))
    return raw.column_names


def _values(raw, column: str) -> list:
    return [row.get(column) for row in raw] if isinstance(raw, list) else raw[column]


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def _prompt_problem(value: Any) -> str | None:
    """Why a prompt cannot be used: text, or a conversation as a list of {role, content} messages."""
    if value is None:
        return "is null"
    if isinstance(value, str):
        return None if value.strip() else "is empty"
    if isinstance(value, list):
        messages = value and all(
            isinstance(m, dict) and isinstance(m.get("role"), str) and isinstance(m.get("content"), str) for m in value
        )
        return None if messages else "is a list but not of {role, content} messages; expected a string"
    return f"is {type(value).__name__} {value!r}; expected a string"


def _answer_problem(value: Any) -> str | None:
    if value is None:
        return "is null"
    if isinstance(value, bool) or not isinstance(value, str | int | float):
        return f"is {type(value).__name__} {value!r}; expected a string or a number"
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE.format(value=value)
    return None if str(value).strip() else "is empty"


def _domain_problem(value: Any) -> str | None:
    if value is None or (isinstance(value, str) and not value.strip()):
        return "is empty"
    if isinstance(value, float) and not math.isfinite(value):
        return _NON_FINITE.format(value=value)
    return None


# NaN / Infinity (JSON allows them, a float column holds them) would become the text "nan" / "inf": an answer
# no completion is meant to match.
_NON_FINITE = "is {value} (NaN/Infinity), not text; write the value as a string or fix the row"


def _text(path: Path, source: str) -> str:
    """The file as text, checked to be UTF-8 line by line (so an error names the line)."""
    data = path.read_bytes()
    if not data.strip():
        raise ConfigError(f"{source} is empty")
    for number, raw in enumerate(data.split(b"\n"), start=1):
        try:
            raw.decode("utf-8-sig" if number == 1 else "utf-8")
        except UnicodeDecodeError as error:
            raise ConfigError(
                f"{source} line {number}: not UTF-8 text (byte 0x{raw[error.start]:02x} at column {error.start + 1}); "
                "save the file as UTF-8"
            ) from None
    return data.decode("utf-8-sig")


class _DuplicateKeys(dict):
    """A JSON object that named a key twice (json keeps the last value silently)."""

    duplicate = ""


def _json_object(pairs: list[tuple[str, Any]]) -> dict:
    keys = [key for key, _ in pairs]
    if len(set(keys)) == len(keys):
        return dict(pairs)
    flagged = _DuplicateKeys(pairs)
    flagged.duplicate = next(key for index, key in enumerate(keys) if key in keys[:index])
    return flagged


def _duplicate_key(value: Any) -> str | None:
    """The first key some object in `value` (nested objects included) names twice."""
    if isinstance(value, _DuplicateKeys):
        return value.duplicate
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    return next((key for key in map(_duplicate_key, children) if key), None)


def _parse_json(text: str):
    return json.loads(text, object_pairs_hook=_json_object)


def read_json_rows(path: Path, source: str) -> list[dict]:
    """A JSON array of objects, or JSON lines (one object a line; blank lines skipped). Lines end at
    "\n" only: U+2028 or U+0085 inside a string is text, not a line break."""
    text = _text(path, source)
    if text.strip().startswith("["):
        try:
            rows = _parse_json(text)
        except json.JSONDecodeError as error:
            raise ConfigError(f"{source} line {error.lineno}: not valid JSON ({error.msg})") from None
        numbered = list(enumerate(rows, start=1))
        where = "row"
    else:
        numbered = []
        for number, line in enumerate(text.split("\n"), start=1):
            if not line.strip():
                continue
            try:
                numbered.append((number, _parse_json(line)))
            except json.JSONDecodeError as error:
                problem = f"not valid JSON ({error.msg} at column {error.colno})"
                raise ConfigError(f"{source} line {number}: {problem}") from None
        where = "line"
    for number, row in numbered:
        if not isinstance(row, dict):
            raise ConfigError(f"{source} {where} {number}: expected a JSON object, got {type(row).__name__}")
        duplicate = _duplicate_key(row)
        if duplicate is not None:
            raise ConfigError(
                f"{source} {where} {number}: key {duplicate!r} appears twice in one object (JSON would keep the "
                "last silently); keep one"
            )
    return [row for _, row in numbered]


def read_csv_rows(path: Path, source: str) -> list[dict]:
    """CSV with a header line; every value stays text (an answer "007" is not the number 7)."""
    reader = csv.reader(io.StringIO(_text(path, source), newline=""))
    try:
        header = next(reader)
        repeated = next((name for index, name in enumerate(header) if name in header[:index]), None)
        if repeated is not None:
            raise ConfigError(
                f"{source} line {reader.line_num}: the header names column {repeated!r} twice (the last would win "
                "silently); rename one"
            )
        rows = []
        for values in reader:
            if not any(value.strip() for value in values):
                continue
            if len(values) != len(header):
                raise ConfigError(
                    f"{source} line {reader.line_num}: {len(values)} values for the header's {len(header)} columns"
                )
            rows.append(dict(zip(header, values, strict=True)))
    except csv.Error as error:
        raise ConfigError(f"{source} line {reader.line_num}: not valid CSV ({error})") from None
    if not rows:
        raise ConfigError(f"{source} has a header but no rows")
    return rows
