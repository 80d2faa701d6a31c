"""A user's dataset mapped onto align_kit's columns by name (a local folder, data file, or hub name)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from align_kit.components.base import Component
from align_kit.errors import ConfigError


@dataclass
class HFDatasetTask(Component):
    path: str | None = None
    name: str | None = None  # the dataset's configuration name on the hub
    split: str = "train"
    eval_split: str | None = None
    prompt_column: str = "prompt"
    answer_column: str = "answer"
    domain_column: str | None = None
    default_domain: str = "default"
    completion_column: str | None = None  # demonstrations for the warm-start SFT of model=tiny

    def validate(self) -> None:
        if not self.path:
            raise ConfigError("task=hf_dataset needs task.path=<local folder, data file or hub dataset name>")

    def _load(self, split: str):
        import datasets

        local = Path(self.path).expanduser()
        if local.is_dir():
            loaded = datasets.load_from_disk(str(local))
            return loaded[split] if isinstance(loaded, datasets.DatasetDict) else loaded
        if local.is_file():
            builder = {".json": "json", ".jsonl": "json", ".csv": "csv", ".parquet": "parquet"}.get(local.suffix)
            if builder is None:
                raise ConfigError(f"task.path={self.path}: unsupported file type {local.suffix!r}")
            return datasets.load_dataset(builder, data_files=str(local), split=split)
        return datasets.load_dataset(self.path, self.name, split=split)

    def dataset(self, split: str = "train"):
        if split != "train" and not self.eval_split:
            return None
        raw = self._load(self.split if split == "train" else self.eval_split)
        wanted = (self.prompt_column, self.answer_column, self.domain_column)
        missing = [c for c in wanted if c and c not in raw.column_names]
        if missing:
            raise ConfigError(
                f"task.path={self.path} has no column(s) {missing}; its columns are {raw.column_names}: "
                "set task.prompt_column / task.answer_column / task.domain_column"
            )

        def to_row(example: dict) -> dict:
            domain = example[self.domain_column] if self.domain_column else self.default_domain
            answer = str(example[self.answer_column])
            return {"prompt": example[self.prompt_column], "answer": answer, "domain": domain}

        return raw.map(to_row, remove_columns=raw.column_names)

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
