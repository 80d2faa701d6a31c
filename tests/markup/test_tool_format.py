"""The tool-call text format: parsing a turn, splitting at observations, checking a call (the first failure named),
rendering turns and observations."""

from __future__ import annotations

import pytest

from align_kit.markup.tool_format import check_call, parse_turn, render_observation, render_turn, split_turns
from tests.tool_registry import REGISTRY


def test_parse_turn_reads_the_three_lines():
    step = parse_turn('Thought: first add\nPlan: add, save\nCall: {"tool":"add","args":{"a":1,"b":2}}')
    assert step.thought == "first add"
    assert step.plan_tools == ["add", "save"]
    assert step.call_text == '{"tool":"add","args":{"a":1,"b":2}}'
    assert parse_turn("Done").call_text is None
    assert parse_turn("Thought: x\nCal: {}").call_text is None  # a misspelt label is no call


def test_split_turns_cuts_at_the_observation_lines():
    text = "Thought: a\nCall: {}\nObs: 19\nThought: b\nCall: []\nObs: error: bad_json\nDone"
    assert split_turns(text) == ["Thought: a\nCall: {}", "Thought: b\nCall: []", "Done"]
    assert split_turns("Thought: Obs: inside a line") == ["Thought: Obs: inside a line"]


@pytest.mark.parametrize(
    ("text", "kind"),
    [
        ('{"tool":"add","args":{"a":1,"b":2}}', "ok"),
        ('{"tool":"add","args":{"a":1,"b":2}', "bad_json"),  # unbalanced
        ('["add", 1, 2]', "bad_json"),  # JSON, but not a call object
        ('{"tool":"add"}', "bad_json"),  # no args object
        ('{"tool":"sub","args":{"a":1,"b":2}}', "unknown_tool"),
        ('{"tool":"add","args":{"a":"1","b":2}}', "bad_params"),  # a string for an int
        ('{"tool":"add","args":{"a":true,"b":2}}', "bad_params"),  # a bool is not an int
        ('{"tool":"add","args":{"a":1}}', "bad_params"),  # missing b
        ('{"tool":"add","args":{"a":1,"b":2,"c":3}}', "bad_params"),  # extra c
        ('{"tool":"code_exec","args":{"code":"print(1)"}}', "ok"),
    ],
)
def test_check_call_names_the_first_failure(text, kind):
    assert check_call(text, REGISTRY)[0] == kind


def test_render_turn_and_observation():
    call = {"tool": "add", "args": {"a": 3, "b": 4}}
    assert render_turn("first add", ["add", "save"], call) == (
        'Thought: first add\nPlan: add,save\nCall: {"tool":"add","args":{"a":3,"b":4}}'
    )
    assert render_turn("", [], None) == "Done"
    assert render_observation("  7\n\n", 40) == "\nObs: 7\n"
    assert render_observation("a\nb " * 30, 5) == "\nObs: a b a\n"
