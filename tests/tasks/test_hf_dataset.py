"""task=hf_dataset: columns mapped from a saved dataset or a local file, the JSON and CSV readers, and what the task
refuses rather than coerce (duplicate keys, NaN or infinite values)."""

from __future__ import annotations

import json
import re

import pytest

from align_kit.core.errors import ConfigError
from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.tasks.hf_dataset import HFDatasetTask, read_csv_rows, read_json_rows
from align_kit.train import component_choices


def test_hf_dataset_maps_columns_from_a_saved_dataset(tmp_path):
    from datasets import Dataset

    Dataset.from_dict(
        {"question": ["1+1=", "2+2="], "solution": [2, 4], "topic": ["math", "chat"], "demo": ["2", "4"]}
    ).save_to_disk(str(tmp_path / "ds"))
    task = HFDatasetTask(
        path=str(tmp_path / "ds"),
        prompt_column="question",
        answer_column="solution",
        domain_column="topic",
        completion_column="demo",
    )
    rows = task.dataset()
    assert rows.column_names == ["prompt", "answer", "domain"]
    assert rows["answer"] == ["2", "4"] and rows["domain"] == ["math", "chat"]
    assert task.demonstrations() == [("1+1=", "2"), ("2+2=", "4")]
    assert task.dataset("eval") is None


def test_hf_dataset_names_missing_columns(tmp_path):
    from align_kit.core.errors import ConfigError

    path = tmp_path / "rows.jsonl"
    path.write_text('{"q": "1+1=", "a": "2"}\n')
    with pytest.raises(ConfigError, match=r"has no column\(s\) \['prompt', 'answer'\]; its columns are \['q', 'a'\]"):
        HFDatasetTask(path=str(path)).dataset()


def test_hf_dataset_task_composes_with_a_local_file(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_text('{"prompt": "1+1=", "answer": "2"}\n')
    plan = build_plan(compose(["task=hf_dataset", f"task.path={path}"]), component_choices(), str(tmp_path))
    assert plan.task.dataset()["domain"] == ["default"]


def test_jsonl_strings_holding_unicode_line_separators_load_exactly(tmp_path):
    # U+2028, U+2029 and U+0085 are line breaks to str.splitlines but plain characters inside a JSON string.
    prompts = ["a\u2028b=", "c\x85d=", "e\u2029f="]
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps({"prompt": p, "answer": "1"}, ensure_ascii=False) + "\n" for p in prompts))
    assert HFDatasetTask(path=str(path)).dataset()["prompt"] == prompts


def test_csv_quoted_values_keep_their_line_breaks(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_bytes('prompt,answer\r\n"two\nlines=",2\r\n"sep\u2028=",3\r\n'.encode())
    rows = HFDatasetTask(path=str(path)).dataset()
    assert rows["prompt"] == ["two\nlines=", "sep\u2028="] and rows["answer"] == ["2", "3"]


@pytest.mark.parametrize(
    ("name", "text", "message"),
    [
        (
            "twice.jsonl",
            '{"prompt": "1+1=", "answer": "2"}\n{"prompt": "2+2=", "answer": "4", "answer": "9"}\n',
            "twice.jsonl line 2: key 'answer' appears twice",
        ),
        (
            "nested.json",
            '[{"prompt": [{"role": "user", "content": "a", "role": "system"}], "answer": "1"}]',
            "nested.json row 1: key 'role' appears twice",
        ),
        ("header.csv", "prompt,answer,prompt\n1+1=,2,x\n", "header.csv line 1: the header names column 'prompt' twice"),
        ("nan.jsonl", '{"prompt": "1+1=", "answer": NaN}\n', "nan.jsonl row 1: answer is nan (NaN/Infinity)"),
        ("inf.json", '[{"prompt": "1+1=", "answer": -Infinity}]', "inf.json row 1: answer is -inf"),
    ],
)
def test_hf_dataset_refuses_what_it_would_coerce(tmp_path, name, text, message):
    from align_kit.core.errors import ConfigError

    path = tmp_path / name
    path.write_text(text)
    with pytest.raises(ConfigError, match=re.escape(message)):
        HFDatasetTask(path=str(path)).dataset()


def test_hf_dataset_refuses_a_non_finite_domain(tmp_path):
    from align_kit.core.errors import ConfigError

    path = tmp_path / "rows.jsonl"
    path.write_text(
        '{"prompt": "1+1=", "answer": "2", "topic": "math"}\n{"prompt": "2+2=", "answer": "4", "topic": Infinity}\n'
    )
    with pytest.raises(ConfigError, match=r"row 2: topic is inf \(NaN/Infinity\)"):
        HFDatasetTask(path=str(path), domain_column="topic").dataset()


def test_a_saved_dataset_with_a_nan_answer_is_refused_not_turned_into_text(tmp_path):
    from datasets import Dataset

    from align_kit.core.errors import ConfigError

    Dataset.from_dict({"prompt": ["1+1=", "2+2="], "answer": [2.0, float("nan")]}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(ConfigError, match=r"row 2: answer is nan \(NaN/Infinity\)"):
        HFDatasetTask(path=str(tmp_path / "ds")).dataset()


def test_csv_values_stay_text(tmp_path):
    path = tmp_path / "rows.csv"
    path.write_text('prompt,answer\n"1,2",007\n\nx,3\n')
    assert read_csv_rows(path, "F") == [{"prompt": "1,2", "answer": "007"}, {"prompt": "x", "answer": "3"}]


def test_json_reads_an_array_or_lines(tmp_path):
    array, lines = tmp_path / "a.json", tmp_path / "l.jsonl"
    array.write_text('[{"prompt": "p", "answer": 1}]')
    lines.write_text('\ufeff{"prompt": "p", "answer": 1}\n\n{"prompt": "q", "answer": "2"}\n')
    assert read_json_rows(array, "F") == [{"prompt": "p", "answer": 1}]
    assert read_json_rows(lines, "F") == [{"prompt": "p", "answer": 1}, {"prompt": "q", "answer": "2"}]
    lines.write_text('{"prompt": "p", "answer": 1}\n{"prompt": "q" "answer": 2}\n')
    with pytest.raises(ConfigError) as refused:
        read_json_rows(lines, "F")
    assert str(refused.value) == "F line 2: not valid JSON (Expecting ',' delimiter at column 16)"
