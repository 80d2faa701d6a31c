"""task=tool_calls: seeded multi-step tool-use episodes (the training-stability chapter, 16.6.2-16.6.3).

An episode is a goal, the tool registry (names and typed parameters) and the ground-truth calls:

    Goal: add 12 7, save as x, check j4
    -> add {"a":12,"b":7}, save {"key":"x","value":19}, check_status {"job":"j4"}

`save` stores the previous result, so the policy must copy the environment's answer into its next
call. An episode calls each tool at most once. The policy writes each step as Thought / Plan / JSON
call (align_kit/markup/tool_format.py) and the environment answers each call (align_kit/tasks/tool_env.py).
Rows carry `prompt`, `calls` (the ground truth as JSON) and `domain` (`calls_<n>`, the episode's length).
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from typing import ClassVar

from align_kit.core.contracts import TaskNode
from align_kit.core.errors import ConfigError
from align_kit.core.fields import SEED, knob
from align_kit.markup.tool_format import call_text, render_observation, render_turn

# The built-in registry: tool name -> {parameter: type}.
TOOLS: dict[str, dict[str, str]] = {
    "add": {"a": "int", "b": "int"},
    "mul": {"a": "int", "b": "int"},
    "save": {"key": "str", "value": "int"},
    "check_status": {"job": "str"},
    "code_exec": {"code": "str"},
}
ARITHMETIC = ("add", "mul")  # `save` stores the result of one of these
KEYS = "xyzuvw"
SLIP_KINDS = ("bad_json", "unknown_tool", "bad_params")  # the bad attempts a demonstration may hold


@dataclass(frozen=True)
class Episode:
    goal: str
    calls: tuple[dict, ...]
    results: tuple[str, ...]  # what the environment answers each ground-truth call

    @property
    def prompt(self) -> str:
        return f"Goal: {self.goal}\n"

    def thought(self, index: int) -> str:
        """A connective and the step's tool: `first`, `then`, ..., `finally` on the last of several."""
        last = index == len(self.calls) - 1 and index > 0
        connective = "first" if index == 0 else "finally" if last else "then"
        return f"{connective} {self.calls[index]['tool']}"

    def demonstration(self, observation_chars: int = 40, slip: tuple[int, str] | None = None) -> list[tuple]:
        """(text, trained, ends_turn) segments: each model turn (EOS-ended), each observation, and with
        `slip` = (step, kind) a bad attempt at that step (masked out, as 16.6.2 asks of SFT data), the
        environment's error and the retry, so the policy learns to recover without learning the error."""
        segments = []
        for index, call in enumerate(self.calls):
            plan = [c["tool"] for c in self.calls[index:]]
            if slip is not None and slip[0] == index:
                segments.append((render_turn(self.thought(index), plan, corrupted(call, slip[1])), False, True))
                segments.append((render_observation(f"error: {slip[1]}", observation_chars), False, False))
            segments.append((render_turn(self.thought(index), plan, call), True, True))
            segments.append((render_observation(self.results[index], observation_chars), False, False))
        segments.append((render_turn("", [], None), True, True))
        return segments


def corrupted(call: dict, kind: str) -> dict | str:
    """A bad version of a call: its JSON cut short (bad_json, as raw text), its tool name cut short
    (unknown_tool) or its first argument of the wrong type (bad_params)."""
    if kind == "bad_json":
        return call_text(call["tool"], call["args"])[:-1]
    if kind == "unknown_tool":
        return {"tool": call["tool"][:-1], "args": call["args"]}
    name, value = next(iter(call["args"].items()))
    return {"tool": call["tool"], "args": {**call["args"], name: str(value) if isinstance(value, int) else 0}}


def _clause(rng: random.Random, tool: str, previous: str | None) -> tuple[str, dict, str]:
    """(goal text, call, result) for one step; `previous` is the last call's result."""
    if tool in ARITHMETIC:
        a, b = rng.randint(2, 99), rng.randint(2, 9 if tool == "mul" else 99)
        return f"{tool} {a} {b}", {"a": a, "b": b}, str(a + b if tool == "add" else a * b)
    if tool == "save":
        key = rng.choice(KEYS)
        return f"save as {key}", {"key": key, "value": int(previous)}, "saved"
    if tool == "check_status":
        job = f"j{rng.randint(1, 9)}"
        return f"check {job}", {"job": job}, "done"
    a, op, b = rng.randint(2, 20), rng.choice("+*"), rng.randint(2, 9)
    code = f"print({a}{op}{b})"
    return f"run {code}", {"code": code}, str(a + b if op == "+" else a * b)


def make_episode(rng: random.Random, tools: list[str], length: int) -> Episode:
    clauses, calls, results = [], [], []
    for _ in range(length):
        used = {call["tool"] for call in calls}  # each tool at most once: a repeated call is the model's error
        choices = [t for t in tools if t not in used and (t != "save" or (calls and calls[-1]["tool"] in ARITHMETIC))]
        tool = rng.choice(choices)
        text, args, result = _clause(rng, tool, results[-1] if results else None)
        clauses.append(text)
        calls.append({"tool": tool, "args": args})
        results.append(result)
    return Episode(", ".join(clauses), tuple(calls), tuple(results))


@dataclass
class ToolCallsTask(TaskNode):
    COLUMNS: ClassVar[tuple[str, ...]] = ("prompt", "calls", "domain")  # what `dataset` gives the rewards
    num_train: int = knob(
        2000,
        ge=1,
        help="Episodes in the training set (>= 1), drawn from the seeded stream; 2000 covers the default "
        "200 steps (800 prompts) without repeats.",
    )
    num_eval: int = knob(
        0,
        help="Episodes in the evaluation set, drawn from a stream of their own; 0: no evaluation set.",
    )
    min_calls: int = knob(1, help="The fewest tool calls an episode needs (>= 1).")
    max_calls: int = knob(
        2,
        help="The most tool calls an episode needs (>= min_calls). 2: 3-call episodes take up to ~340 tokens "
        "(budget 352, model.max_position_embeddings=512), costly on the 2-core default.",
    )
    tools: list[str] = knob(
        default_factory=lambda: list(TOOLS),
        help="The built-in tools episodes draw from (add, mul, save, check_status, code_exec), at least one besides "
        "save; all of them by default.",
    )
    max_turns: int = knob(
        5,
        help="Model turns per episode (>= max_calls + 1): the calls, the final `Done`, and a spare turn for a retry.",
    )
    turn_tokens: int = knob(
        128,
        ge=1,
        help="The most tokens one model turn may take (>= 1); 128 fits a Thought, a Plan and a JSON call.",
    )
    observation_chars: int = knob(
        40,
        help="Characters of the tool's answer an observation line keeps; longer answers are cut. 40 keeps the "
        "built-in tools' answers (numbers, short words, errors) whole.",
    )
    slip_share: float = knob(
        0.1,
        ge=0,
        le=1,
        help="The share of warm-start demonstrations holding one bad attempt (bad JSON, an unknown tool, wrong "
        "argument types) before the retry, in [0, 1]; the attempt is masked out, so the policy learns to recover "
        "without learning the error.",
        source="16.6.2",
    )
    code_timeout_s: float = knob(
        2.0,
        gt=0,
        help="Seconds a code_exec call may run in the sandbox (> 0, at most the sandbox's limit); a call past it "
        "fails its step, as a crash does, and the step mask can mask it.",
        source="16.6.2",
    )
    code_memory_mb: int = knob(
        256,
        ge=1,
        help="Memory in MB a code_exec call may use in the sandbox (>= 1, at most the sandbox's limit).",
        source="16.6.2",
    )
    seed: int = knob(
        1234,
        within=SEED,
        help="Seeds the episode streams (one per split) and the warm start's slips; the same seed gives the same "
        "data in every run.",
    )

    def validate(self) -> None:
        unknown = sorted(set(self.tools) - set(TOOLS))
        if unknown or not set(self.tools) - {"save"}:
            raise ConfigError(
                f"task.tools={self.tools} must name built-in tools, at least one besides save; known: {sorted(TOOLS)}"
            )
        if not 1 <= self.min_calls <= self.max_calls:
            raise ConfigError(
                f"task.min_calls={self.min_calls} and task.max_calls={self.max_calls} must satisfy 1 <= min <= max"
            )
        if self.max_turns < self.max_calls + 1:
            raise ConfigError(
                f"task.max_turns={self.max_turns} leaves no turn to finish a {self.max_calls}-call episode; "
                f"set task.max_turns >= task.max_calls + 1 = {self.max_calls + 1}"
            )
        # slip_share, code_timeout_s, code_memory_mb, turn_tokens, num_train: their ranges are their fields' (knob)
        from align_kit.sandbox import MAX_MEMORY_MB, MAX_TIMEOUT_S  # run_python's own bounds, checked before step 0

        if self.code_timeout_s > MAX_TIMEOUT_S:
            raise ConfigError(f"task.code_timeout_s={self.code_timeout_s}: the sandbox takes at most {MAX_TIMEOUT_S}")
        if self.code_memory_mb > MAX_MEMORY_MB:
            raise ConfigError(f"task.code_memory_mb={self.code_memory_mb}: the sandbox takes at most {MAX_MEMORY_MB}")

    @property
    def source(self) -> str:
        return f"task.num_train={self.num_train}"

    def registry(self) -> dict[str, dict[str, str]]:
        return {name: TOOLS[name] for name in self.tools}

    def episodes(self, split: str, count: int | None = None) -> list[Episode]:
        rng = random.Random(f"{self.seed}/{split}")  # a stream per split, as the arithmetic task
        if count is None:
            count = self.num_eval if split == "eval" else self.num_train
        return [make_episode(rng, self.tools, rng.randint(self.min_calls, self.max_calls)) for _ in range(count)]

    def dataset(self, split: str = "train"):
        from datasets import Dataset

        rows = self.episodes(split)
        return Dataset.from_dict(
            {
                "prompt": [e.prompt for e in rows],
                "calls": [json.dumps(list(e.calls)) for e in rows],
                "domain": [f"calls_{len(e.calls)}" for e in rows],
            }
        )

    def demonstrations(self) -> list[tuple[str, list[tuple]]]:
        """(prompt, segments) for the warm start's masked SFT: observations and bad attempts are masked out."""
        rng = random.Random(f"{self.seed}/slips")
        pairs = []
        for episode in self.episodes("sft"):
            slip = None
            if rng.random() < self.slip_share:
                slip = (rng.randrange(len(episode.calls)), rng.choice(SLIP_KINDS))
            pairs.append((episode.prompt, episode.demonstration(self.observation_chars, slip)))
        return pairs

    def probe_pairs(self, count: int) -> list[tuple[str, str]]:
        """(prompt, ground-truth calls as JSON) held out from training, to measure the warm start."""
        return [(e.prompt, json.dumps(list(e.calls))) for e in self.episodes("warm_start_probe", count)]

    def cache_key(self) -> dict:
        return {
            "kind": "tool_calls",
            "calls": [self.min_calls, self.max_calls],
            "tools": self.tools,
            "observation_chars": self.observation_chars,
            "slip_share": self.slip_share,
        }

    def environment(self, run_code=None):
        from align_kit.tasks.tool_env import ToolEnvironment

        return ToolEnvironment(self.registry(), self.code_timeout_s, self.code_memory_mb, run_code)

    def rollout_func(self):
        """TRL's rollout_func for GRPOTrainer: the multi-turn episode loop (align_kit/tasks/tool_env.py)."""
        from align_kit.tasks.tool_env import trl_rollout_func

        return trl_rollout_func(self)

    def warm_start_success_rate(self, model, tokenizer, count: int, max_new_tokens: int) -> dict:
        """Episodes sampled at temperature 1.0 on held-out goals: the share whose calls equal the ground truth
        (`start_success_rate`), the mean step reward at the default weights (`start_step_reward`) and the
        share of call steps that failed (`start_failed_step_share`: what the step mask would mask)."""
        from align_kit.rewards.tool_steps import episode_success, score_episode
        from align_kit.tasks.tool_env import run_episodes, sampling_turn_generator

        prompts, calls = zip(*self.probe_pairs(count), strict=True)
        prompt_ids = [tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        rollouts = run_episodes(
            sampling_turn_generator(model, tokenizer),
            prompt_ids,
            tokenizer,
            self.environment(),
            self.max_turns,
            self.turn_tokens,
            max_new_tokens,
            self.observation_chars,
        )
        truths = [json.loads(c) for c in calls]
        successes = [episode_success(r.turns, truth) for r, truth in zip(rollouts, truths, strict=True)]
        scores = [score_episode(r.turns, truth).total() for r, truth in zip(rollouts, truths, strict=True)]
        steps = [kind for r in rollouts for _, _, kind in r.steps]
        failed = sum(kind != "ok" for kind in steps) / len(steps) if steps else 0.0
        return {"start_success_rate": sum(successes) / count, "start_step_reward": sum(scores) / count,
                "start_failed_step_share": failed}  # fmt: skip
