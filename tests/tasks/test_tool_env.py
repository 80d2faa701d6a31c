"""The tool environment and the episode loop: each kind of answer, episodes run by hand on a scripted generator (the
budget, a cut call, a turn without a call) and each turn sampled through the trainer."""

from __future__ import annotations

from types import SimpleNamespace

from align_kit.tasks.tool_env import ToolEnvironment, run_episodes, trainer_turn_generator
from tests.tool_registry import REGISTRY


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
