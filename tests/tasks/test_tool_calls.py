"""task=tool_calls: the seeded episode generator, one episode and its demonstration segments by hand, the slip
share, the task's validation."""

from __future__ import annotations

import json
import random

import pytest

from align_kit.core.errors import ConfigError
from align_kit.markup.tool_format import check_call, parse_turn
from align_kit.tasks.tool_calls import TOOLS, Episode, ToolCallsTask, make_episode


def test_episode_generator_is_seeded_and_follows_its_rules():
    task = ToolCallsTask(num_train=300)
    first, again = task.episodes("train"), task.episodes("train")
    assert first == again
    assert task.episodes("eval", 5) != first[:5]  # another split, another stream
    for episode in first:
        tools = [c["tool"] for c in episode.calls]
        assert 1 <= len(tools) <= 3 and len(set(tools)) == len(tools)
        for index, call in enumerate(episode.calls):
            assert check_call(json.dumps(call), TOOLS)[0] == "ok"
            if call["tool"] == "save":  # stores the previous (arithmetic) result
                assert tools[index - 1] in ("add", "mul")
                assert str(call["args"]["value"]) == episode.results[index - 1]
    row = task.dataset("train")[0]
    assert row["prompt"] == first[0].prompt and json.loads(row["calls"]) == list(first[0].calls)
    assert row["domain"] == f"calls_{len(first[0].calls)}"


def test_one_episode_by_hand():
    # make_episode draws: tool choice, then its arguments; replay the draws with the same seed.
    episode = make_episode(random.Random(7), ["add", "save"], 2)
    rng = random.Random(7)
    assert rng.choice(["add"]) == "add"  # save cannot come first
    a, b = rng.randint(2, 99), rng.randint(2, 99)
    key = (rng.choice(["save"]), rng.choice("xyzuvw"))[1]
    assert episode.goal == f"add {a} {b}, save as {key}"
    assert episode.calls == (
        {"tool": "add", "args": {"a": a, "b": b}},
        {"tool": "save", "args": {"key": key, "value": a + b}},
    )
    assert episode.results == (str(a + b), "saved")


def test_demonstration_segments():
    add, save = {"tool": "add", "args": {"a": 2, "b": 3}}, {"tool": "save", "args": {"key": "x", "value": 5}}
    episode = Episode("add 2 3, save as x", (add, save), ("5", "saved"))
    first = 'Thought: first add\nPlan: add,save\nCall: {"tool":"add","args":{"a":2,"b":3}}'
    second = 'Thought: finally save\nPlan: save\nCall: {"tool":"save","args":{"key":"x","value":5}}'
    assert episode.demonstration() == [
        (first, True, True),
        ("\nObs: 5\n", False, False),
        (second, True, True),
        ("\nObs: saved\n", False, False),
        ("Done", True, True),
    ]
    # A slip at step 2: the bad attempt and its error are masked, the retry trains.
    slipped = episode.demonstration(slip=(1, "bad_params"))
    bad = 'Thought: finally save\nPlan: save\nCall: {"tool":"save","args":{"key":0,"value":5}}'
    assert slipped[2:5] == [(bad, False, True), ("\nObs: error: bad_params\n", False, False), (second, True, True)]
    assert check_call(parse_turn(bad).call_text, TOOLS)[0] == "bad_params"
    cut = episode.demonstration(slip=(0, "bad_json"))[0][0]
    assert cut == first[:-1] and check_call(parse_turn(cut).call_text, TOOLS)[0] == "bad_json"
    renamed = episode.demonstration(slip=(0, "unknown_tool"))[0][0]
    assert '"tool":"ad"' in renamed and check_call(parse_turn(renamed).call_text, TOOLS)[0] == "unknown_tool"


def test_slip_share_decides_how_many_demonstrations_hold_a_bad_attempt():
    none = ToolCallsTask(num_train=200, slip_share=0.0).demonstrations()
    every = ToolCallsTask(num_train=200, slip_share=1.0).demonstrations()
    assert all(trained for _, segments in none for _, trained, ends in segments if ends)
    assert all(sum(1 for _, trained, ends in segments if ends and not trained) == 1 for _, segments in every)


def test_task_validation():
    with pytest.raises(ConfigError, match="task.max_turns=3 leaves no turn"):
        ToolCallsTask(max_calls=3, max_turns=3).validate()
    with pytest.raises(ConfigError, match=r"task.tools=\['add', 'sub'\] must name built-in tools"):
        ToolCallsTask(tools=["add", "sub"]).validate()
    with pytest.raises(ConfigError, match="at least one besides save"):
        ToolCallsTask(tools=["save"]).validate()
