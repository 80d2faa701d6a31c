"""task=tool_calls: the step format, the episode generator, the environment and the episode loop, on
hand-made examples."""

from __future__ import annotations

import json
import random
from types import SimpleNamespace

import pytest

from align_kit.core.errors import ConfigError
from align_kit.markup.tool_format import check_call, parse_turn, render_observation, render_turn, split_turns
from align_kit.tasks.tool_calls import TOOLS, Episode, ToolCallsTask, make_episode
from align_kit.tasks.tool_env import ToolEnvironment, run_episodes, trainer_turn_generator

REGISTRY = {"add": {"a": "int", "b": "int"}, "save": {"key": "str", "value": "int"}, "code_exec": {"code": "str"}}


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


def fake_sandbox(statuses: dict):
    """run_python stand-in: the status and output this test names for each code."""

    def run(code, timeout_s, memory_mb):
        status, output = statuses[code]
        return SimpleNamespace(status=status, output=output, isolation="test")

    return run


def test_environment_answers_each_kind():
    env = ToolEnvironment(
        REGISTRY, run_code=fake_sandbox({"print(6)": ("ok", "6\n"), "while 1: pass": ("timeout", "")})
    )
    assert env.answer('{"tool":"add","args":{"a":2,"b":40}}') == ("ok", "42")
    assert env.answer('{"tool":"save","args":{"key":"x","value":1}}') == ("ok", "saved")
    assert env.answer('{"tool":"add","args":{"a":2}}') == ("bad_params", "error: bad_params")
    assert env.answer("{oops") == ("bad_json", "error: bad_json")
    assert env.answer('{"tool":"rm","args":{}}') == ("unknown_tool", "error: unknown_tool")
    assert env.answer('{"tool":"code_exec","args":{"code":"print(6)"}}') == ("ok", "6\n")
    assert env.answer('{"tool":"code_exec","args":{"code":"while 1: pass"}}') == ("exec_failed", "error: timeout")


class CharTokenizer:
    """One id per character, 0 = EOS: enough to follow the loop's positions by hand."""

    eos_token_id = 0

    def __call__(self, text, add_special_tokens=False):
        return {"input_ids": [ord(c) for c in text]}

    def decode(self, ids, skip_special_tokens=True):
        return "".join(chr(i) for i in ids if i != 0)


def scripted(turns_per_row):
    """A generate() that replays each row's scripted turns (text, then EOS unless the text ends with '|')."""
    position = [0] * len(turns_per_row)
    seen = []

    def generate(contexts, max_new_tokens):
        rows = []
        for context in contexts:
            row = next(r for r, prompt in enumerate(PROMPTS) if context[: len(prompt)] == [ord(c) for c in prompt])
            text = turns_per_row[row][position[row]]
            position[row] += 1
            ids = [ord(c) for c in text.rstrip("|")] + ([] if text.endswith("|") else [0])
            rows.append(ids[:max_new_tokens])
            seen.append((row, max_new_tokens))
        return rows, None

    generate.seen = seen
    return generate


PROMPTS = ["Goal: A\n", "Goal: B\n"]


def test_run_episodes_by_hand():
    good = 'Call: {"tool":"add","args":{"a":1,"b":2}}'  # 41 characters
    bad = "Call: {oops"  # 11 characters
    generate = scripted([[good, bad, "Done"], ["Done"]])
    env = ToolEnvironment(REGISTRY)
    tokenizer = CharTokenizer()
    prompts = [tokenizer(p)["input_ids"] for p in PROMPTS]
    rollouts = run_episodes(generate, prompts, tokenizer, env, max_turns=5, turn_tokens=100, budget=200)
    first, second = rollouts
    obs_good, obs_bad = "\nObs: 3\n", "\nObs: error: bad_json\n"
    expected = good + "\0" + obs_good + bad + "\0" + obs_bad + "Done\0"
    assert first.ids == [ord(c) for c in expected]
    model = [1] * 42 + [0] * len(obs_good) + [1] * 12 + [0] * len(obs_bad) + [1] * 5
    assert first.env_mask == model
    start_bad = 42 + len(obs_good)
    assert first.steps == [[0, 42, "ok"], [start_bad, start_bad + 12, "bad_json"]]
    assert first.turns == [good, bad, "Done"]
    assert second.ids == [ord(c) for c in "Done\0"] and second.steps == [] and second.env_mask == [1] * 5
    assert first.logprobs is None  # the generator reported none


def test_run_episodes_stops_at_the_budget_and_checks_a_cut_call():
    generate = scripted([['Call: {"tool":"add","args":{"a":1,"b":2}}|'], ["Done"]])
    tokenizer = CharTokenizer()
    prompts = [tokenizer(p)["input_ids"] for p in PROMPTS]
    rollouts = run_episodes(generate, prompts, tokenizer, ToolEnvironment(REGISTRY), 5, turn_tokens=20, budget=30)
    # 20 tokens, no EOS: the call is checked (bad JSON once cut), never run, and the episode ends.
    assert rollouts[0].ids == [ord(c) for c in 'Call: {"tool":"add",']
    assert rollouts[0].steps == [[0, 20, "bad_json"]]
    assert sorted(generate.seen) == [(0, 20), (1, 20)]


def test_a_turn_without_call_or_done_is_a_bad_step_and_ends_the_episode():
    generate = scripted([["Thought: first add\nPlan: add"], ["Done"]])
    tokenizer = CharTokenizer()
    prompts = [tokenizer(p)["input_ids"] for p in PROMPTS]
    rollouts = run_episodes(generate, prompts, tokenizer, ToolEnvironment(REGISTRY), 5, 100, 200)
    assert rollouts[0].steps == [[0, 29, "bad_json"]]  # 28 characters and EOS
    assert len(rollouts[0].turns) == 1


def test_each_turn_samples_through_the_trainer_with_its_own_cap():
    seen = []

    class Trainer:
        generation_config = SimpleNamespace(max_new_tokens=240)

        def _generate_single_turn(self, prompt_ids, images, multimodal_fields, num_generations):
            seen.append((prompt_ids, self.generation_config.max_new_tokens, num_generations))
            return [[1, 0]], None

    trainer = Trainer()
    assert trainer_turn_generator(trainer)([[5, 6]], 17) == ([[1, 0]], None)
    assert seen == [([[5, 6]], 17, 1)]
    assert trainer.generation_config.max_new_tokens == 240  # restored for TRL's own use
