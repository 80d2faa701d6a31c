"""Intermediate step rewards and targeted penalties for task=tool_calls (the training-stability
chapter, 16.6.3 and table 16-5).

Four dimensions, each the mean over the episode's steps, step i of the model against ground-truth
call i, divided by the longer of the two sequences (a missing or an extra call scores 0 there):

  tool_choice (0.5)  the tool name matches exactly
  parameters  (0.2)  share of argument keys whose values match (type included) over both key sets
  reasoning   (0.2)  the Thought holds a logical connective (a configurable word list)
  plan        (0.1)  the Plan names every ground-truth tool still to come (with repeats)

A perfect episode scores each dimension 1.0 and the weighted total exactly 1.0 (math.fsum). Targeted
penalties (`check_status` called more than N times: -0.3) are values <= 0 added to a bad episode's
total; they fire only beyond what the ground truth itself needs, so the best total stays 1.0.
`reward=[tool_steps]` is one function; `reward=[tool_choice,tool_params,tool_reasoning,tool_plan,tool_penalty]`
makes each dimension its own function, so `advantage=gdpo` normalises them separately.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from dataclasses import dataclass
from typing import Any, Literal, get_args

from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.markup.tool_format import Step, parse_call, parse_turn, split_turns
from align_kit.rewards.base import RewardNode, completion_text

Dimension = Literal["tool_choice", "parameters", "reasoning", "plan"]
DIMENSIONS: tuple[str, ...] = get_args(Dimension)
DEFAULT_WEIGHTS = {"tool_choice": 0.5, "parameters": 0.2, "reasoning": 0.2, "plan": 0.1}
# Table 16-5 names 首先 (first), 然后 (then), 因为 (because); English words match whole words, any case.
CONNECTIVES = [
    "first",
    "then",
    "next",
    "finally",
    "because",
    "since",
    "so",
    "therefore",
    "thus",
    "首先",
    "然后",
    "接着",
    "最后",
    "因为",
    "所以",
    "因此",
]


@dataclass
class Penalty:
    """A targeted penalty: `value` (<= 0) once when `tool` ("*": any) is called more than `max_calls` times
    (and more often than the ground truth calls it)."""

    tool: str = knob(
        "check_status",
        help="The tool whose overuse is penalised, or `*` for any call; check_status is the chapter's example of a "
        "tool a policy calls again and again when unsure.",
        source="16.6.3",
    )
    max_calls: int = knob(
        1,
        help="Calls of `tool` allowed before the penalty fires; it also never fires while the episode calls it no "
        "more often than the ground truth does.",
        source="16.6.3",
    )
    value: float = knob(
        -0.3,
        help="What the penalty adds to a bad episode's reward, once, <= 0; the chapter's -0.3.",
        source="16.6.3",
    )


@dataclass(frozen=True)
class StepScores:
    tool_choice: float
    parameters: float
    reasoning: float
    plan: float

    def total(self, weights: dict[str, float] | None = None) -> float:
        weights = DEFAULT_WEIGHTS if weights is None else weights
        return math.fsum(weights[name] * getattr(self, name) for name in DIMENSIONS)


def call_steps(turns: list[str]) -> list[Step]:
    """The model's turns that make a call (the final `Done` and stray text make none)."""
    return [step for step in map(parse_turn, turns) if step.call_text is not None]


def has_connective(thought: str, connectives: list[str]) -> bool:
    for word in connectives:
        if word.isascii() and re.search(rf"\b{re.escape(word)}\b", thought, re.IGNORECASE):
            return True
        if not word.isascii() and word in thought:
            return True
    return False


def argument_match(args: dict, truth: dict) -> float:
    """Matching key/value pairs (same type and value) over the union of both key sets; 1.0 when both are empty."""
    keys = set(args) | set(truth)
    if not keys:
        return 1.0
    same = sum(1 for k in keys if k in args and k in truth and type(args[k]) is type(truth[k]) and args[k] == truth[k])
    return same / len(keys)


def covers(plan: list[str], remaining: list[str]) -> bool:
    return not Counter(remaining) - Counter(plan)


def score_episode(turns: list[str], truth: list[dict], connectives: list[str] | None = None) -> StepScores:
    connectives = CONNECTIVES if connectives is None else connectives
    steps = call_steps(turns)
    count = max(len(steps), len(truth))
    if count == 0:
        return StepScores(1.0, 1.0, 1.0, 1.0)  # nothing to do, nothing done
    sums = dict.fromkeys(DIMENSIONS, 0.0)
    for index, (step, expected) in enumerate(zip(steps, truth, strict=False)):
        call = parse_call(step.call_text)
        if call is not None:
            sums["tool_choice"] += float(call["tool"] == expected["tool"])
            sums["parameters"] += argument_match(call["args"], expected["args"])
        sums["reasoning"] += float(has_connective(step.thought, connectives))
        sums["plan"] += float(covers(step.plan_tools, [c["tool"] for c in truth[index:]]))
    return StepScores(**{name: value / count for name, value in sums.items()})


def called_tools(turns: list[str]) -> list[str | None]:
    """The tool each call step names (None for a call that does not parse)."""
    return [(call or {}).get("tool") for call in (parse_call(step.call_text) for step in call_steps(turns))]


def penalty_total(turns: list[str], truth: list[dict], penalties: list[Penalty]) -> float:
    tools = called_tools(turns)
    expected = [c["tool"] for c in truth]
    total = 0.0
    for penalty in penalties:
        made = len(tools) if penalty.tool == "*" else tools.count(penalty.tool)
        needed = len(expected) if penalty.tool == "*" else expected.count(penalty.tool)
        if made > max(penalty.max_calls, needed):
            total += penalty.value
    return total


def episode_success(turns: list[str], truth: list[dict]) -> bool:
    """Every ground-truth call made, in order, with exactly its arguments, and no other call."""
    calls = [parse_call(step.call_text) for step in call_steps(turns)]
    return len(calls) == len(truth) and all(
        call is not None and call["tool"] == t["tool"] and argument_match(call["args"], t["args"]) == 1.0
        for call, t in zip(calls, truth, strict=True)
    )


def _penalties(items: list) -> list[Penalty]:
    return [item if isinstance(item, Penalty) else Penalty(**item) for item in items]


def _check_penalties(group: str, penalties: list[Penalty]) -> None:
    for index, penalty in enumerate(penalties):
        if penalty.value > 0:
            raise ConfigError(
                f"reward.{group}.penalties[{index}].value={penalty.value} is positive; a penalty lowers the reward, "
                "use a value <= 0 (weights stay >= 0)"
            )


class _EpisodeReward(RewardNode):
    """Scores completions of task=tool_calls from the `calls` column (and the rollout's `tool_turns`)."""

    def needs(self) -> dict[str, str]:
        return {"calls": "it scores task=tool_calls episodes against their ground-truth calls; use task=tool_calls"}

    def episodes(self, completions: list[Any], kwargs: dict) -> list[tuple[list[str], list[dict]]]:
        if "calls" not in kwargs:
            raise KeyError(f"reward.{self.group} needs the `calls` column of task=tool_calls")
        turns = kwargs.get("tool_turns") or [split_turns(completion_text(c)) for c in completions]
        return [(t, json.loads(c)) for t, c in zip(turns, kwargs["calls"], strict=True)]


@dataclass
class ToolSteps(_EpisodeReward):
    """The four dimensions as one reward: weighted total plus penalties. Its best value is the sum of
    `weights` (derived; the max-attainable rule checks it)."""

    max_value: float = knob(
        1.0,
        help="Derived: set to the sum of `weights` when the reward is built, so any value given here is replaced.",
    )
    weights: dict[str, float] = knob(
        default_factory=lambda: dict(DEFAULT_WEIGHTS),
        help="The weight of each dimension (tool_choice, parameters, reasoning, plan; all four, each >= 0); table "
        "16-5's 0.5 / 0.2 / 0.2 / 0.1, which sum to 1.0 so a perfect episode scores exactly 1.0.",
        source="16.6.3, table 16-5",
    )
    connectives: list[str] = knob(
        default_factory=lambda: list(CONNECTIVES),
        help="The words whose presence in a Thought scores the reasoning dimension (English whole words in any case, "
        "Chinese as substrings); the default extends table 16-5's 首先 / 然后 / 因为.",
        source="table 16-5",
    )
    penalties: list[Penalty] = knob(
        default_factory=list,
        help="Targeted penalties ({tool, max_calls, value}, values <= 0) added to the weighted total, e.g. "
        "check_status called more than once: -0.3. The YAML node sets that one.",
        source="16.6.3",
    )

    def validate(self) -> None:
        super().validate()
        if set(self.weights) != set(DIMENSIONS):
            raise ConfigError(
                f"reward.{self.group}.weights has keys {sorted(self.weights)}; give exactly {list(DIMENSIONS)}"
            )
        for name, weight in self.weights.items():
            if weight < 0:
                raise ConfigError(
                    f"reward.{self.group}.weights.{name}={weight} is negative; keep weights >= 0 and put "
                    f"targeted penalties under reward.{self.group}.penalties"
                )
        self.penalties = _penalties(self.penalties)
        _check_penalties(self.group, self.penalties)

    def spec(self):
        self.max_value = math.fsum(self.weights.values())
        return super().spec()

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        penalties = _penalties(self.penalties)
        rewards, successes = [], []
        for turns, truth in self.episodes(completions, kwargs):
            score = score_episode(turns, truth, self.connectives).total(self.weights)
            rewards.append(score + penalty_total(turns, truth, penalties))
            successes.append(float(episode_success(turns, truth)))
        if kwargs.get("log_metric") is not None:
            kwargs["log_metric"]("tools/success_rate", sum(successes) / len(successes))
        return rewards


@dataclass
class ToolStepDimension(_EpisodeReward):
    """One dimension as its own reward function (its weight is the node's weight)."""

    dimension: Dimension = knob(
        "tool_choice",
        help="Which dimension this reward scores: tool_choice, parameters, reasoning or plan; its table 16-5 weight "
        "(0.5 / 0.2 / 0.2 / 0.1) is this node's weight.",
        source="table 16-5",
    )
    connectives: list[str] = knob(
        default_factory=lambda: list(CONNECTIVES),
        help="The words whose presence in a Thought scores the reasoning dimension (English whole words in any case, "
        "Chinese as substrings); used by dimension=reasoning only.",
        source="table 16-5",
    )

    def validate(self) -> None:
        super().validate()

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        episodes = self.episodes(completions, kwargs)
        if self.dimension == "tool_choice" and kwargs.get("log_metric") is not None:
            rate = sum(episode_success(t, truth) for t, truth in episodes) / len(episodes)
            kwargs["log_metric"]("tools/success_rate", rate)
        return [getattr(score_episode(t, truth, self.connectives), self.dimension) for t, truth in episodes]


@dataclass
class ToolPenalty(_EpisodeReward):
    """The targeted penalties as their own reward function: values <= 0, best value 0."""

    max_value: float = knob(
        0.0,
        help="A penalty's best value: 0.0, the only value accepted, so the run's maximum stays at its other rewards'.",
        source="16.6.3",
    )
    penalties: list[Penalty] = knob(
        default_factory=lambda: [Penalty()],
        help="The targeted penalties ({tool, max_calls, value}, values <= 0); the chapter's check_status called more "
        "than once: -0.3.",
        source="16.6.3",
    )

    def validate(self) -> None:
        super().validate()
        self.penalties = _penalties(self.penalties)
        _check_penalties(self.group, self.penalties)
        if self.max_value != 0.0:
            raise ConfigError(f"reward.{self.group}.max_value={self.max_value}: a penalty's best value is 0.0")

    def __call__(self, completions: list[Any], **kwargs: Any) -> list[float | None]:
        penalties = _penalties(self.penalties)
        return [penalty_total(t, truth, penalties) for t, truth in self.episodes(completions, kwargs)]
