"""The tool environment and the multi-turn episode loop of task=tool_calls.

Each turn the policy writes one step and stops at its end-of-sequence token; the environment checks
the call against the registry, runs it (`code_exec` through `align_kit.sandbox.run_python`) and
appends its answer as an `Obs:` line, which is never trained on (env mask 0). The loop runs inside
TRL as its `rollout_func` (TRL's `tools` / `environment_factory` loop needs a chat template and a
tool-call parser the character tokenizer does not have; see docs/tool-use.md), and outside it for the
warm start's success rate, with plain `generate`.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from align_kit.markup.tool_format import DONE, OK, check_call, parse_turn, render_observation

CODE_TOOL = "code_exec"
# What the built-in tools answer (a registry tool without an entry here answers "ok").
ANSWERS: dict[str, Callable[..., str]] = {
    "add": lambda a, b: str(a + b),
    "mul": lambda a, b: str(a * b),
    "save": lambda key, value: "saved",
    "check_status": lambda job: "done",
}


@dataclass
class ToolEnvironment:
    """Answers one call: (kind, result text); kind is `ok` or a failure kind of tool_format."""

    registry: dict[str, dict[str, str]]
    code_timeout_s: float = 2.0
    code_memory_mb: int = 256
    run_code: Callable | None = None  # run_python(code, timeout_s=, memory_mb=) -> SandboxResult; lazily imported

    def answer(self, call_text: str) -> tuple[str, str]:
        kind, call = check_call(call_text, self.registry)
        if kind != OK:
            return kind, f"error: {kind}"
        tool, args = call["tool"], call["args"]
        if tool == CODE_TOOL:
            result = self._runner()(args["code"], timeout_s=self.code_timeout_s, memory_mb=self.code_memory_mb)
            if result.status != OK:  # crash, timeout, oom: the step is masked (16.6.2)
                return "exec_failed", f"error: {result.status}"
            return OK, result.output
        implementation = ANSWERS.get(tool)
        return OK, implementation(**args) if implementation else "ok"

    def _runner(self):
        if self.run_code is None:
            from align_kit.sandbox import run_python  # lazily: only episodes that call code_exec need it

            self.run_code = run_python
        return self.run_code


@dataclass
class Episode:
    """One episode as generated: completion ids (model turns and observations), the env mask (1 on the
    model's tokens), the sampler's log-probs if it returned them, each call's step [start, end, kind]
    in completion positions, and the model's turns as text."""

    ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    logprobs: list[float] | None = field(default_factory=list)
    steps: list[list] = field(default_factory=list)
    turns: list[str] = field(default_factory=list)

    def extend(self, ids: list[int], model: bool, logprobs: list[float] | None = None) -> None:
        self.ids += ids
        self.env_mask += [int(model)] * len(ids)
        if self.logprobs is not None:
            if model and logprobs is None:
                self.logprobs = None  # the sampler did not report them: none for the episode
            else:
                self.logprobs += list(logprobs[: len(ids)]) if model else [0.0] * len(ids)


def run_episodes(
    generate: Callable,
    prompt_ids: list[list[int]],
    tokenizer,
    environment: ToolEnvironment,
    max_turns: int,
    turn_tokens: int,
    budget: int,
    observation_chars: int = 40,
) -> list[Episode]:
    """Roll out every prompt: `generate(contexts, max_new_tokens) -> (ids per row, logprobs per row or None)`
    samples one turn for a batch of token contexts; at most `budget` completion tokens per episode."""
    eos = tokenizer.eos_token_id
    episodes = [Episode() for _ in prompt_ids]
    active = list(range(len(prompt_ids)))
    with ThreadPoolExecutor(max_workers=4) as pool:  # code_exec calls are subprocesses: run a turn's together
        for _ in range(max_turns):
            if not active:
                break
            room = {i: min(turn_tokens, budget - len(episodes[i].ids)) for i in active}
            contexts = [prompt_ids[i] + episodes[i].ids for i in active]
            new_ids, new_logprobs = generate(contexts, max(room.values()))
            calls = []
            for row, i in enumerate(active):
                ids = list(new_ids[row])[: room[i]]
                episode, start = episodes[i], len(episodes[i].ids)
                episode.extend(ids, model=True, logprobs=None if new_logprobs is None else new_logprobs[row])
                text = tokenizer.decode(ids, skip_special_tokens=True)
                episode.turns.append(text)
                step, finished = parse_turn(text), bool(ids) and ids[-1] == eos
                if step.call_text is None:
                    if text.strip() != DONE:  # neither a call nor the end: the step does not parse
                        episode.steps.append([start, len(episode.ids), "bad_json"])
                    continue
                if not finished:  # cut by the budget: checked, not run, and the episode ends
                    episode.steps.append([start, len(episode.ids), check_call(step.call_text, environment.registry)[0]])
                    continue
                calls.append((i, start, step.call_text))
            answers = list(pool.map(environment.answer, [text for _, _, text in calls]))
            active = []
            for (i, start, _), (kind, result) in zip(calls, answers, strict=True):
                episode = episodes[i]
                episode.steps.append([start, len(episode.ids), kind])
                observation = tokenizer(render_observation(result, observation_chars), add_special_tokens=False)
                episode.extend(observation["input_ids"][: budget - len(episode.ids)], model=False)
                if len(episode.ids) < budget:
                    active.append(i)
    return episodes


def trl_rollout_func(task) -> Callable:
    """TRL's `rollout_func(prompts, trainer)`: the episode loop over the trainer's own sampling
    (`_generate_single_turn`, so the generation hooks apply each turn). Besides ids and log-probs it
    returns `env_mask` (TRL's tool mask: observations are not trained on) and, per completion, the
    step spans `tool_steps` and the model's turns `tool_turns` (reward functions receive both)."""

    def rollout(prompts: list[str], trainer) -> dict:
        prompt_ids = trainer.encode_prompts(prompts)
        episodes = run_episodes(
            trainer_turn_generator(trainer),
            prompt_ids,
            trainer.processing_class,
            task.environment(),
            task.max_turns,
            task.turn_tokens,
            trainer.args.max_completion_length,
            task.observation_chars,
        )
        logprobs = [r.logprobs for r in episodes]
        return {
            "prompt_ids": prompt_ids,
            "completion_ids": [r.ids for r in episodes],
            "logprobs": None if any(lp is None for lp in logprobs) else logprobs,
            "env_mask": [r.env_mask for r in episodes],
            "tool_steps": [r.steps for r in episodes],
            "tool_turns": [r.turns for r in episodes],
        }

    return rollout


def trainer_turn_generator(trainer) -> Callable:
    """One turn through the trainer's sampling path, capped at `max_new_tokens`."""

    def generate(contexts, max_new_tokens):
        with _max_new_tokens(trainer.generation_config, max_new_tokens):
            return trainer._generate_single_turn(contexts, None, {}, 1)

    return generate


@contextlib.contextmanager
def _max_new_tokens(config, value: int):
    saved, config.max_new_tokens = config.max_new_tokens, value
    try:
        yield
    finally:
        config.max_new_tokens = saved


def sampling_turn_generator(model, tokenizer, temperature: float = 1.0) -> Callable:
    """One turn with plain `generate` (the warm start's probe): ids up to and including the first EOS."""

    def generate(contexts, max_new_tokens):
        import torch

        width = max(len(ids) for ids in contexts)
        pad = tokenizer.pad_token_id
        input_ids = torch.tensor([[pad] * (width - len(ids)) + ids for ids in contexts])
        attention = torch.tensor([[0] * (width - len(ids)) + [1] * len(ids) for ids in contexts])
        with torch.no_grad():
            output = model.generate(
                input_ids=input_ids,
                attention_mask=attention,
                do_sample=True,
                temperature=temperature,
                top_k=0,
                top_p=1.0,
                max_new_tokens=max_new_tokens,
                pad_token_id=pad,
                eos_token_id=tokenizer.eos_token_id,
            )
        rows = []
        for ids in output[:, width:].tolist():
            end = ids.index(tokenizer.eos_token_id) + 1 if tokenizer.eos_token_id in ids else len(ids)
            rows.append(ids[:end])
        return rows, None

    return generate
