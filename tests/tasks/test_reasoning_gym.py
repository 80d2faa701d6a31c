"""task=reasoning_gym: datasets and their options pass through to reasoning-gym, several datasets alternate as domains,
rows are conversations whose entries the reward can rebuild, and bad names get one line."""

from __future__ import annotations

import json

import pytest

pytest.importorskip("reasoning_gym")

from align_kit.core.errors import ConfigError  # noqa: E402
from align_kit.tasks.reasoning_gym import ReasoningGymTask, build_dataset  # noqa: E402


def test_rows_are_conversations_with_the_datasets_own_question_and_answer():
    task = ReasoningGymTask(
        datasets=["chain_sum"], options={"chain_sum": {"min_terms": 2, "max_terms": 2, "max_digits": 1}}, num_train=4
    )
    task.validate()
    rows = task.rows("train")
    assert len(rows) == 4
    system, user = rows[0]["prompt"]
    assert system["role"] == "system" and "<answer>" in system["content"]
    assert user["role"] == "user" and user["content"].startswith("State the final answer")
    for row in rows:  # two one-digit terms: the answer is the expression's value, worked out here
        expression = row["prompt"][1]["content"].split(":")[-1].rstrip("= ").strip()
        left, op, right = expression.split()
        assert int(row["answer"]) == (int(left) + int(right) if op == "+" else int(left) - int(right))
        assert row["domain"] == "chain_sum"


def test_the_encoded_config_rebuilds_the_same_entry():
    task = ReasoningGymTask(
        datasets=["basic_arithmetic"], options={"basic_arithmetic": {"max_terms": 3}}, num_train=3, seed=7
    )
    row = task.rows("train")[2]
    entry = build_dataset(json.loads(row["gym_config"]))[row["gym_index"]]
    assert entry["question"] == row["prompt"][1]["content"] and str(entry["answer"]) == row["answer"]
    config = json.loads(row["gym_config"])
    assert config["seed"] == 7 and config["max_terms"] == 3 and config["size"] == 3


def test_several_datasets_alternate_as_domains_and_splits_draw_other_items():
    task = ReasoningGymTask(datasets=["chain_sum", "basic_arithmetic"], num_train=5, num_eval=4)
    train = task.dataset("train")
    assert train["domain"] == ["chain_sum", "basic_arithmetic", "chain_sum", "basic_arithmetic", "chain_sum"]
    held_out = task.rows("eval")
    assert len(held_out) == 4
    questions = {row["prompt"][1]["content"] for row in task.rows("train")}
    assert not questions & {row["prompt"][1]["content"] for row in held_out}


def test_a_datasets_own_size_and_seed_override_the_tasks():
    task = ReasoningGymTask(datasets=["chain_sum"], options={"chain_sum": {"size": 3, "seed": 99}}, num_train=10)
    assert len(task.rows("train")) == 3
    assert json.loads(task.rows("train")[0]["gym_config"])["seed"] == 99


def test_unknown_dataset_option_and_bad_range_each_get_one_line():
    with pytest.raises(
        ConfigError, match=r"^task\.datasets: chain_summ is not a reasoning-gym dataset; known: .*chain_sum"
    ):
        ReasoningGymTask(datasets=["chain_summ"]).validate()
    with pytest.raises(
        ConfigError, match=r"^task\.options\.chain_sum\.terms: not an option of chain_sum; its options: "
    ):
        ReasoningGymTask(options={"chain_sum": {"terms": 3}}).validate()
    with pytest.raises(ConfigError, match=r"^task\.options\.gcd: gcd is not in task\.datasets=\['chain_sum'\]"):
        ReasoningGymTask(options={"gcd": {}}).validate()
    with pytest.raises(ConfigError, match=r"^task\.options\.chain_sum: "):
        ReasoningGymTask(options={"chain_sum": {"min_terms": 5, "max_terms": 2}}).validate()
    with pytest.raises(ConfigError, match="at least one reasoning-gym dataset"):
        ReasoningGymTask(datasets=[]).validate()
    with pytest.raises(ConfigError, match="names a dataset twice"):
        ReasoningGymTask(datasets=["gcd", "gcd"]).validate()


def test_missing_package_names_the_install_command(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "reasoning_gym" else real(name, *a)
    )
    with pytest.raises(ConfigError, match="make install-real-model"):
        ReasoningGymTask().validate()


def test_a_generator_failing_on_its_options_is_one_line_naming_them(monkeypatch):
    def failing(config):
        raise ValueError("non-integer stop for randrange()")

    monkeypatch.setattr("align_kit.tasks.reasoning_gym.build_dataset", failing)
    task = ReasoningGymTask(datasets=["chain_sum"], num_train=4)
    with pytest.raises(ConfigError) as refused:
        task.rows("train")
    assert str(refused.value) == (
        "task.options.chain_sum: reasoning-gym cannot generate chain_sum with these options "
        "(ValueError: non-integer stop for randrange()); change them"
    )


def test_a_null_seed_option_is_the_tasks_seed():
    task = ReasoningGymTask(datasets=["chain_sum"], options={"chain_sum": {"seed": None}}, seed=77)
    task.validate()
    assert task.config("chain_sum", "train")["seed"] == 77
