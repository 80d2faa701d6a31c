"""The tiny policy's build and cache, loading a saved model with model=hf, and task=hf_dataset."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from align_kit.experiment.compose import compose
from align_kit.experiment.plan import build_plan
from align_kit.models.char_tokenizer import build_char_tokenizer
from align_kit.models.hf import HFModel
from align_kit.models.tiny import WARM_START_FILE, TinyModel
from align_kit.rewards.correctness import Correctness
from align_kit.tasks.arithmetic import ArithmeticTask
from align_kit.tasks.hf_dataset import HFDatasetTask
from align_kit.train import component_choices

FAST = {"steps": 100, "eval_prompts": 32}


def test_char_tokenizer_round_trips_and_keeps_the_tags(tmp_path):
    from transformers import AutoTokenizer

    build_char_tokenizer().save_pretrained(tmp_path)
    tokenizer = AutoTokenizer.from_pretrained(tmp_path)
    text = "37+45=<think>37+40=77,77+5=82</think>82"
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    assert len(ids) == len("37+45=") + 1 + len("37+40=77,77+5=82") + 1 + 2  # one id per char, one per tag
    assert tokenizer.decode(ids + [tokenizer.eos_token_id], skip_special_tokens=True) == text
    assert tokenizer.padding_side == "left"


@pytest.fixture(scope="module")
def tiny_policy(tmp_path_factory):
    cache = tmp_path_factory.mktemp("cache")
    node = TinyModel(warm_start=FAST)
    return node, cache, node.load(ArithmeticTask(), cache, reward=Correctness(), max_new_tokens=32)


def test_tiny_model_is_a_saved_qwen3_with_head_dim_32(tiny_policy):
    _, _, policy = tiny_policy
    config = policy.model.config
    assert config.model_type == "qwen3" and config.head_dim == 32
    assert config.vocab_size == len(policy.tokenizer)
    info = json.loads((Path(policy.path) / WARM_START_FILE).read_text())
    assert info["steps"] == 100 and 0.0 <= info["start_success_rate"] <= 1.0


def test_cache_is_reused_for_the_same_config_and_rebuilt_for_another(tiny_policy):
    node, cache, policy = tiny_policy
    marker = node.cache_path(ArithmeticTask(), cache) / WARM_START_FILE
    stamp = marker.stat().st_mtime_ns
    again = TinyModel(warm_start=FAST).load(ArithmeticTask(), cache)
    assert again.path == policy.path and marker.stat().st_mtime_ns == stamp
    other = TinyModel(warm_start={**FAST, "steps": 101})
    assert other.cache_path(ArithmeticTask(), cache) != node.cache_path(ArithmeticTask(), cache)
    assert TinyModel(warm_start=FAST).cache_path(ArithmeticTask(max_operand=50), cache) != marker.parent
    # Settings the task's own cache key leaves out still reach the warm start through its demonstrations.
    assert TinyModel(warm_start=FAST).cache_path(ArithmeticTask(num_train=500), cache) != marker.parent
    assert TinyModel(warm_start=FAST).cache_path(ArithmeticTask(seed=7), cache) != marker.parent


def test_a_build_that_loses_the_race_keeps_the_first_complete_build(tiny_policy):
    # Two sweep jobs may build the same model at once: the second to finish must not replace or break the first.
    node, cache, policy = tiny_policy
    marker = node.cache_path(ArithmeticTask(), cache) / WARM_START_FILE
    stamp = marker.stat().st_mtime_ns
    TinyModel(warm_start={**FAST, "steps": 1, "eval_prompts": 0})._build(marker.parent, ArithmeticTask(), None, 8)
    assert marker.stat().st_mtime_ns == stamp
    assert sorted(p.name for p in Path(cache).iterdir() if ".partial" in p.name) == []


def test_hf_node_loads_a_locally_saved_model(tiny_policy, tmp_path):
    import torch

    _, _, policy = tiny_policy
    policy.model.save_pretrained(tmp_path)
    policy.tokenizer.save_pretrained(tmp_path)
    node = HFModel(name_or_path=str(tmp_path))
    node.validate()
    loaded = node.load(task=None, cache_dir=None)
    ids = torch.tensor([[5, 6, 7]])
    assert torch.equal(loaded.model(ids).logits, policy.model(ids).logits)
    assert loaded.tokenizer.padding_side == "left"


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


@pytest.mark.parametrize("text", ["37+45=", "a\nb", "<think>1+1=2</think>2", "¿3+1?", "4\t+1=", "数", "x🙂", "\u2028"])
def test_the_tokenizer_check_agrees_with_the_real_character_tokenizer(text):
    from align_kit.models.char_tokenizer import token_count, unencodable

    tokenizer = build_char_tokenizer()
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    first_unknown = next((ch for ch in text if tokenizer.convert_tokens_to_ids(ch) == tokenizer.unk_token_id), None)
    assert unencodable(text) == first_unknown
    if first_unknown is None:
        assert token_count(text) == len(ids)  # a think tag is one token
    else:
        assert tokenizer.unk_token_id in ids


def test_tiny_prompt_problem_names_the_character_and_the_positions():
    model = TinyModel(max_position_embeddings=64)
    assert model.prompt_problem("1+1=", 32) is None
    assert model.prompt_problem("é", 32).startswith("holds 'é' (U+00E9), which model=tiny's character tokenizer")
    # 64 positions - 32 for the completion leave 32 for the prompt: 33 characters are one too many.
    assert model.prompt_problem("x" * 32, 32) is None
    assert model.prompt_problem("x" * 33, 32).startswith("is 33 tokens, more than the 32 positions")
    assert model.prompt_problem("<think>" + "x" * 31, 32) is None  # the tag is one token: 32 in all


def test_hf_node_accepts_a_saved_folder_and_refuses_one_from_pretrained_cannot_read(tiny_policy, tmp_path):
    from align_kit.core.errors import ConfigError

    saved = Path(tiny_policy[2].path)
    HFModel(name_or_path=str(saved)).validate()
    broken = tmp_path / "broken"
    broken.mkdir()
    for name in ("config.json", "model.safetensors"):  # a copy without its tokenizer files
        (broken / name).write_bytes((saved / name).read_bytes())
    with pytest.raises(ConfigError, match="holds no tokenizer"):
        HFModel(name_or_path=str(broken)).validate()


def test_hf_node_checks_prompts_with_the_saved_tokenizer_and_positions(tiny_policy):
    # The saved tiny model: a character tokenizer with <unk>, and 256 positions in its config.json.
    model = HFModel(name_or_path=tiny_policy[2].path)
    assert model.prompt_problem("12+7=", 32) is None
    assert model.prompt_problem("12+7=é", 32).startswith("holds 'é', which the tokenizer of model.name_or_path=")
    assert model.prompt_problem("x" * 224, 32) is None  # 256 - 32 = 224 positions for the prompt
    assert model.prompt_problem("x" * 225, 32).startswith("is 225 tokens, more than the 224 positions")
    assert HFModel(name_or_path="Qwen/Qwen3-0.6B").prompt_problem("é" * 10**5, 32) is None  # a hub name: not fetched


def test_a_saved_dataset_with_a_nan_answer_is_refused_not_turned_into_text(tmp_path):
    from datasets import Dataset

    from align_kit.core.errors import ConfigError

    Dataset.from_dict({"prompt": ["1+1=", "2+2="], "answer": [2.0, float("nan")]}).save_to_disk(str(tmp_path / "ds"))
    with pytest.raises(ConfigError, match=r"row 2: answer is nan \(NaN/Infinity\)"):
        HFDatasetTask(path=str(tmp_path / "ds")).dataset()
