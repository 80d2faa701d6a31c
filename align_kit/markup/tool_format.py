"""The step format of the tool-use task and its parser (the training-stability chapter, 16.6.2-16.6.3).

A model turn is one step, three lines, ended by the end-of-sequence token:

    Thought: first add
    Plan: add,save
    Call: {"tool":"add","args":{"a":12,"b":7}}

The environment answers a call with one line `Obs: <result>` (never trained on), and the episode
ends with a turn that makes no call (`Done`). A call is checked against the tool registry: JSON that
does not parse as {"tool": str, "args": object} is `bad_json`, a name outside the registry is
`unknown_tool`, missing, extra or wrongly typed arguments are `bad_params`; `exec_failed` (a
`code_exec` call that crashed, timed out or ran out of memory) is known only once it ran.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

THOUGHT, PLAN, CALL, OBSERVATION = "Thought:", "Plan:", "Call:", "Obs:"
DONE = "Done"
FAILURE_KINDS = ("bad_json", "unknown_tool", "bad_params", "exec_failed")
OK = "ok"
# The parameter types a registry may name, and the JSON values each accepts (bool is not an int here).
PARAMETER_TYPES = {
    "int": lambda v: isinstance(v, int) and not isinstance(v, bool),
    "float": lambda v: isinstance(v, int | float) and not isinstance(v, bool),
    "str": lambda v: isinstance(v, str),
    "bool": lambda v: isinstance(v, bool),
}
# The environment's answers start a line of their own; the model's turn before it has no final newline.
_OBSERVATION_LINE = re.compile(r"(?:^|\n)Obs: [^\n]*(?:\n|$)")


@dataclass(frozen=True)
class Step:
    """One parsed model turn. `call_text` is None when the turn makes no call (it ends the episode)."""

    thought: str = ""
    plan: str = ""
    call_text: str | None = None

    @property
    def plan_tools(self) -> list[str]:
        return [name for name in re.split(r"[,\s]+", self.plan) if name]


def parse_turn(text: str) -> Step:
    """The first Thought, Plan and Call lines of one turn (missing lines are empty / None)."""
    found: dict[str, str] = {}
    for line in text.split("\n"):
        for label in (THOUGHT, PLAN, CALL):
            if line.startswith(label) and label not in found:
                found[label] = line[len(label) :].strip()
    return Step(found.get(THOUGHT, ""), found.get(PLAN, ""), found.get(CALL))


def split_turns(completion: str) -> list[str]:
    """A decoded completion cut at the environment's `Obs:` lines: the model's turns, in order."""
    return [turn for turn in _OBSERVATION_LINE.split(completion) if turn.strip()]


def parse_call(call_text: str) -> dict | None:
    """{"tool": name, "args": {...}} when the text is such a JSON object, else None (bad JSON)."""
    try:
        call = json.loads(call_text)
    except (json.JSONDecodeError, RecursionError):
        return None
    if not isinstance(call, dict) or not isinstance(call.get("tool"), str) or not isinstance(call.get("args"), dict):
        return None
    return call


def check_call(call_text: str, registry: dict[str, dict[str, str]]) -> tuple[str, dict | None]:
    """(kind, parsed call): kind is `ok` or the first failure of bad_json, unknown_tool, bad_params."""
    call = parse_call(call_text)
    if call is None:
        return "bad_json", None
    parameters = registry.get(call["tool"])
    if parameters is None:
        return "unknown_tool", call
    args = call["args"]
    if set(args) != set(parameters) or not all(PARAMETER_TYPES[kind](args[name]) for name, kind in parameters.items()):
        return "bad_params", call
    return OK, call


def call_text(tool: str, args: dict[str, Any]) -> str:
    """The compact JSON of a call, as the demonstrations write it."""
    return json.dumps({"tool": tool, "args": args}, separators=(",", ":"))


def render_turn(thought: str, plan: list[str], call: dict | str | None) -> str:
    """A model turn in the step format (without its end-of-sequence token); `call=None` is the final `Done`,
    a string is written as it is (a malformed call)."""
    if call is None:
        return DONE
    text = call if isinstance(call, str) else call_text(call["tool"], call["args"])
    return f"{THOUGHT} {thought}\n{PLAN} {','.join(plan)}\n{CALL} {text}"


def render_observation(result: str, limit: int = 40) -> str:
    """The environment's answer as inserted after a turn: one line, at most `limit` characters of result."""
    line = " ".join(str(result).split())[:limit]
    return f"\n{OBSERVATION} {line}\n"
