"""Step rewards (16.6.3, table 16-5) and targeted penalties, on hand-made episodes."""

from __future__ import annotations

import json

import pytest

from align_kit.core.errors import ConfigError
from align_kit.rewards.tool_steps import (
    Penalty,
    ToolPenalty,
    ToolStepDimension,
    ToolSteps,
    episode_success,
    has_connective,
    penalty_total,
    score_episode,
)

TRUTH = [
    {"tool": "add", "args": {"a": 12, "b": 7}},
    {"tool": "save", "args": {"key": "x", "value": 19}},
    {"tool": "check_status", "args": {"job": "j4"}},
]


def turn(thought, plan, call):
    return f"Thought: {thought}\nPlan: {plan}\nCall: {call}"


ADD = '{"tool":"add","args":{"a":12,"b":7}}'
SAVE = '{"tool":"save","args":{"key":"x","value":19}}'
CHECK = '{"tool":"check_status","args":{"job":"j4"}}'
PERFECT = [
    turn("first add", "add,save,check_status", ADD),
    turn("then save", "save,check_status", SAVE),
    turn("finally check", "check_status", CHECK),
    "Done",
]


def completion(turns):
    return "\nObs: x\n".join(turns)


def test_a_perfect_episode_scores_exactly_one():
    scores = score_episode(PERFECT, TRUTH)
    assert (scores.tool_choice, scores.parameters, scores.reasoning, scores.plan) == (1.0, 1.0, 1.0, 1.0)
    assert scores.total() == 1.0  # exactly: 0.5 + 0.2 + 0.2 + 0.1 summed without rounding drift
    assert episode_success(PERFECT, TRUTH)
    node = ToolSteps(penalties=[Penalty()])
    node.group = "tool_steps"
    node.validate()
    assert node([completion(PERFECT)], calls=[json.dumps(TRUTH)]) == [1.0]


def test_each_dimension_by_hand():
    turns = [
        turn("add them", "add,save", ADD),  # no connective; plan misses check_status
        turn("then save because asked", "save,check_status", '{"tool":"save","args":{"key":"x","value":"19"}}'),
        turn("so", "check_status", '{"tool":"check","args":{"job":"j4"}}'),  # wrong tool name
        "Done",
    ]
    scores = score_episode(turns, TRUTH)
    assert scores.tool_choice == pytest.approx(2 / 3)
    # step 1: 2 of 2 pairs; step 2: key matches, "19" is a string (1 of 2); step 3: job matches (1 of 1).
    assert scores.parameters == pytest.approx((1 + 0.5 + 1) / 3)
    assert scores.reasoning == pytest.approx(2 / 3)
    assert scores.plan == pytest.approx(2 / 3)
    expected = 0.5 * 2 / 3 + 0.2 * 2.5 / 3 + 0.2 * 2 / 3 + 0.1 * 2 / 3
    assert scores.total() == pytest.approx(expected)
    assert not episode_success(turns, TRUTH)


def test_missing_and_extra_calls_count_as_zero_steps():
    short = score_episode(PERFECT[:1] + ["Done"], TRUTH)  # one of three calls
    assert (short.tool_choice, short.parameters, short.reasoning) == pytest.approx((1 / 3, 1 / 3, 1 / 3))
    assert short.plan == pytest.approx(1 / 3)
    extra = score_episode(PERFECT[:3] + [turn("then check again", "check_status", CHECK), "Done"], TRUTH)
    assert extra.tool_choice == pytest.approx(3 / 4)  # divided by the longer sequence
    bad_json = score_episode([turn("first add", "add,save,check_status", "{oops")], TRUTH)
    assert (bad_json.tool_choice, bad_json.parameters, bad_json.reasoning) == pytest.approx((0.0, 0.0, 1 / 3))


def test_connectives_in_english_and_chinese():
    assert has_connective("First, add", ["first"])
    assert not has_connective("firstly add", ["first"])  # whole words only
    assert has_connective("首先调用加法", ["首先"])
    assert not has_connective("add", ["首先", "then"])


def test_plan_counts_repeats():
    truth = [{"tool": "add", "args": {}}, {"tool": "add", "args": {}}]
    once = [turn("first", "add", '{"tool":"add","args":{}}'), turn("then", "add", '{"tool":"add","args":{}}')]
    assert score_episode(once, truth).plan == pytest.approx(1 / 2)  # the first plan names one add of two


def test_the_penalty_fires_beyond_the_limit_and_the_truth():
    checks = [turn("then", "check_status", CHECK)] * 3
    penalty = [Penalty(tool="check_status", max_calls=1, value=-0.3)]
    assert penalty_total(PERFECT, TRUTH, penalty) == 0.0
    assert penalty_total(PERFECT[:2] + checks, TRUTH, penalty) == pytest.approx(-0.3)
    # The ground truth needs two checks: two is no abuse, three is.
    truth = [TRUTH[2], TRUTH[2]]
    assert penalty_total(checks[:2], truth, penalty) == 0.0
    assert penalty_total(checks, truth, penalty) == pytest.approx(-0.3)
    assert penalty_total(checks, [TRUTH[2]], [Penalty(tool="*", max_calls=2, value=-0.5)]) == pytest.approx(-0.5)


def test_penalty_lowers_the_combined_reward_but_not_its_best():
    node = ToolSteps(penalties=[{"tool": "check_status", "max_calls": 1, "value": -0.3}])
    node.group = "tool_steps"
    node.validate()
    abusive = PERFECT[:3] + [turn("then", "check_status", CHECK), "Done"]
    scores = score_episode(abusive, TRUTH)
    rewards = node([completion(PERFECT), completion(abusive)], calls=[json.dumps(TRUTH)] * 2)
    assert rewards[0] == 1.0
    assert rewards[1] == pytest.approx(scores.total() - 0.3)
    assert node.spec().max_value == 1.0


def test_nodes_refuse_negative_weights_and_positive_penalties():
    node = ToolSteps(weights={"tool_choice": 0.5, "parameters": 0.2, "reasoning": 0.4, "plan": -0.1})
    node.group = "tool_steps"
    with pytest.raises(ConfigError, match="weights.plan=-0.1 is negative"):
        node.validate()
    node = ToolPenalty(penalties=[{"tool": "check_status", "max_calls": 1, "value": 0.3}])
    node.group = "tool_penalty"
    with pytest.raises(ConfigError, match=r"penalties\[0\].value=0.3 is positive"):
        node.validate()
    node = ToolSteps(weights={"tool_choice": 1.0})
    node.group = "tool_steps"
    with pytest.raises(ConfigError, match="give exactly"):
        node.validate()


def test_split_dimensions_and_penalty_sum_to_the_combined_reward():
    completions = [completion(PERFECT), completion([turn("add", "add", ADD), "Done"])]
    calls = [json.dumps(TRUTH)] * 2
    weights = {"tool_choice": 0.5, "parameters": 0.2, "reasoning": 0.2, "plan": 0.1}
    total = [0.0, 0.0]
    for dimension, weight in weights.items():
        values = ToolStepDimension(dimension=dimension)(completions, calls=calls)
        total = [t + weight * v for t, v in zip(total, values, strict=True)]
    # Second episode: tool 1/3, params 1/3, no connective 0, plan "add" misses save and check_status 0.
    assert total == pytest.approx([1.0, 0.5 / 3 + 0.2 / 3])
    assert ToolPenalty()(completions, calls=calls) == [0.0, 0.0]


def test_rollout_turns_are_preferred_to_the_decoded_text():
    node = ToolStepDimension(dimension="tool_choice")
    values = node(["garbage"], calls=[json.dumps(TRUTH[:1])], tool_turns=[[turn("first", "add", ADD), "Done"]])
    assert values == [1.0]


def test_success_rate_is_logged():
    logged = {}
    node = ToolSteps()
    node.group = "tool_steps"
    node.validate()
    node([completion(PERFECT), "Done"], calls=[json.dumps(TRUTH)] * 2, log_metric=logged.__setitem__)
    assert logged == {"tools/success_rate": 0.5}
