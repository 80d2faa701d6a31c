"""Judges for the Group Arena Reward (arena.py): `judge(prompt, a, b)` -> the win probability of `a`.

Any Python callable with that signature is a judge. Built in (conf/reward/judge/*.yaml, selected with
`reward/judge=<name>`):
- `ArithmeticJudge` (`arithmetic`): the embedded task's local judge; the answer closer to the sum wins.
- `HFJudge` (`hf`): a local Hugging Face causal LM asked which response is better; the win probability
  is its next-token probability of "A" against "B".
- `HttpJudge` (`http`): an OpenAI-compatible server (a vLLM server, say), chat or completions
  endpoint, with a timeout, retries and a limit on requests in flight.
- `CallableJudge` (`callable`): your own function, named by a string (`function: my_judges.prefer_shorter`)
  and imported only from a package listed in `train.allowed_targets` (align_kit.experiment.schema checks it first).

`Referee` wraps any of them for training: a failure, a timeout or an answer that is not a
probability skips the match and is counted, never raised; results are cached within a step; with
`both_orders` each pair is judged as (a, b) and (b, a) and averaged against position bias.
"""

from __future__ import annotations

import importlib
import json
import logging
import math
import numbers
import os
import re
import string
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Literal

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.rewards.format import THINK_CLOSE

log = logging.getLogger(__name__)

DEFAULT_TEMPLATE = (
    "Two responses to the same prompt follow. Which one is better?\n\n"
    "Prompt:\n{prompt}\n\nResponse A:\n{a}\n\nResponse B:\n{b}\n\n"
    "Answer with one letter, A or B.\nAnswer:"
)
TEMPLATE_FIELDS = {"prompt", "a", "b"}


def win_probability(value: Any) -> float:
    """A judge's answer as a float in [0, 1]; anything else is a bad answer."""
    # numbers.Real takes numpy's scalars too (a float32 from a judge's own model is a fine answer).
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0.0 <= value <= 1.0:
        raise ValueError(f"judge returned {value!r}; expected a win probability in [0, 1]")
    return float(value)


def check_template(key: str, template: str) -> None:
    """`template` is a str.format pattern using exactly {prompt}, {a} and {b}."""
    try:
        fields = {name for _, name, _, _ in string.Formatter().parse(template) if name is not None}
    except ValueError as error:
        raise ConfigError(f"{key}: not a format string ({error}); write braces as {{{{ and }}}}") from None
    if fields != TEMPLATE_FIELDS:
        raise ConfigError(
            f"{key} uses {sorted(fields)}; it must use exactly {{prompt}}, {{a}} and {{b}} (literal braces: {{{{ }}}})"
        )


def check_choices(key: str, choices: Sequence[str]) -> None:
    if len(choices) != 2 or len({str(c).strip() for c in choices}) != 2 or not all(str(c).strip() for c in choices):
        raise ConfigError(f"{key}={list(choices)}: expected two different non-empty labels, e.g. [A, B]")


def parse_verdict(text: str, choices: Sequence[str] = ("A", "B")) -> float:
    """A judge's text answer: a number in [0, 1], the first label (1.0), the second (0.0) or "tie" (0.5)."""
    answer = text.strip()
    try:
        return win_probability(float(answer))
    except ValueError:
        pass
    head = answer.split()[0].strip(".:,;!()[]*\"'").lower() if answer else ""
    first, second = (str(choice).strip().lower() for choice in choices)
    verdicts = {first: 1.0, second: 0.0, "tie": 0.5}
    if head in verdicts:
        return verdicts[head]
    raise ValueError(f"cannot read a verdict from {text[:80]!r}; expected {choices[0]}, {choices[1]}, tie or a number")


def probability_from_logprobs(logprobs: dict[str, float], choices: Sequence[str]) -> float | None:
    """P(first label) / (P(first) + P(second)) from a next-token log-prob table (tokens compared
    without surrounding spaces); a label outside the table counts as probability 0. None when
    neither label is in it."""
    mass = [0.0, 0.0]
    for token, logprob in logprobs.items():
        for index, choice in enumerate(choices):
            if token.strip() == str(choice).strip():
                mass[index] += math.exp(logprob)
    if mass[0] + mass[1] == 0.0:
        return None
    return mass[0] / (mass[0] + mass[1])


# --------------------------------------------------------------------------------------- judges


_ARITHMETIC = re.compile(r"^\s*(-?\d+)\s*([+-])\s*(-?\d+)\s*=\s*$")


def _number(text: str) -> int | None:
    match = re.fullmatch(r"\s*(-?\d+)\s*", text)
    return int(match.group(1)) if match else None


@dataclass
class ArithmeticJudge(Component):
    """The embedded task's judge (prompts like "37+45="): the completion whose final answer (after
    `</think>`) is closer to the true result wins (1.0 / 0.0); equal distance is a tie (0.5); an
    answer that is not a number is infinitely far. A prompt of another task is a failure."""

    def __call__(self, prompt: str, a: str, b: str) -> float:
        match = _ARITHMETIC.match(prompt)
        if match is None:
            raise ValueError(
                f"prompt {prompt[:40]!r} is not 'x+y=' or 'x-y=' (the arithmetic judge fits task=arithmetic)"
            )
        left, op, right = int(match.group(1)), match.group(2), int(match.group(3))
        truth = left + right if op == "+" else left - right
        distances = []
        for completion in (a, b):
            answer = _number(completion.rsplit(THINK_CLOSE, 1)[-1])
            distances.append(math.inf if answer is None else abs(answer - truth))
        if distances[0] == distances[1]:
            return 0.5
        return 1.0 if distances[0] < distances[1] else 0.0


@dataclass
class CallableJudge(Component):
    """A user's judge function `judge(prompt, a, b)` -> the win probability of `a`, named by its dotted path.
    A config never builds the function itself (a `_target_` names classes only): the schema checks that
    `function` is a plain function defined in a package of `train.allowed_targets` before this node is built."""

    function: str = knob(
        "???",
        help="The dotted path of your judge function judge(prompt, a, b) -> the win probability of a (0.5 = tie), "
        "e.g. my_judges.prefer_shorter; its package must be listed in train.allowed_targets.",
        metadata={"function": True},
    )

    def __call__(self, prompt: str, a: str, b: str) -> float:
        if getattr(self, "_function", None) is None:
            module, _, name = self.function.rpartition(".")
            self._function = getattr(importlib.import_module(module), name)
        return self._function(prompt, a, b)


def label_token_ids(tokenizer, label: str) -> list[int]:
    """The single-token encodings of a label, as written and with a leading space ("A" and " A" are
    different tokens to a BPE tokenizer; after "Answer:" a model usually writes the spaced one)."""
    found = []
    for variant in dict.fromkeys([label, label.strip(), " " + label.strip()]):
        token_ids = tokenizer.encode(variant, add_special_tokens=False)
        if len(token_ids) == 1 and token_ids[0] not in found:
            found.append(token_ids[0])
    return found


@dataclass
class HFJudge(Component):
    """A local causal LM as judge: `template` filled with the prompt and both responses; the win
    probability of A is the model's next-token probability of the first label over that of both
    labels (each label one token, with or without a leading space; both variants count). Loaded on
    the first call, never at validation."""

    name_or_path: str | None = knob(
        None,
        help="The judge model: a folder holding a saved causal LM, or a hub name. Required; loaded on the first "
        "judge call, never at validation.",
    )
    template: str = knob(
        DEFAULT_TEMPLATE,
        help="The judge's prompt, a str.format pattern using exactly {prompt}, {a} and {b} (literal braces doubled); "
        "the default asks which response is better and ends in `Answer:`.",
    )
    choices: list[str] = knob(
        default_factory=lambda: ["A", "B"],
        help="The two labels the template asks for, first for response a; each must be one token of the judge's "
        "tokenizer (with or without a leading space). Keep [A, B] with the default template.",
    )
    dtype: Literal["float32", "bfloat16", "float16"] = knob(
        "float32",
        help="The dtype the judge model is loaded in: float32 on CPU, bfloat16 on a GPU.",
    )
    device: str = knob("cpu", help="Where the judge model runs: `cpu`, or a torch device such as `cuda:0`.")
    batch_size: int = knob(
        8,
        help="Matches per forward pass of the judge model (an integer >= 1); raise it on a GPU for throughput.",
    )
    max_length: int | None = knob(
        None,
        help="Prompt tokens kept, cut from the start so the question at the end survives; null: the model's "
        "max_position_embeddings.",
    )
    use_chat_template: bool = knob(
        False,
        help="Wrap the filled template as one user message with the tokenizer's chat template: true for an "
        "instruction-tuned chat model, false for a base model.",
    )

    def validate(self) -> None:
        from pathlib import Path

        key = self.group or "judge"
        if not self.name_or_path:
            raise ConfigError(f"{key}.name_or_path is not set; point it at a saved causal LM (folder or hub name)")
        path = Path(self.name_or_path).expanduser()
        if self.name_or_path.startswith((".", "/", "~")) and not path.is_dir():
            raise ConfigError(f"{key}.name_or_path={self.name_or_path} is not a folder holding a saved model")
        check_template(f"{key}.template", self.template)
        check_choices(f"{key}.choices", self.choices)
        if self.batch_size < 1:
            raise ConfigError(f"{key}.batch_size={self.batch_size}: expected an integer >= 1")
        if self.max_length is not None and self.max_length < 1:
            raise ConfigError(f"{key}.max_length={self.max_length}: expected an integer >= 1, or null")

    def _load(self):
        if getattr(self, "_model", None) is None:
            import torch
            from transformers import AutoModelForCausalLM, AutoTokenizer

            path = os.path.expanduser(self.name_or_path)
            tokenizer = AutoTokenizer.from_pretrained(path, padding_side="left", truncation_side="left")
            model = AutoModelForCausalLM.from_pretrained(path, dtype=getattr(torch, self.dtype)).to(self.device)
            model.eval()
            ids = [label_token_ids(tokenizer, str(choice)) for choice in self.choices]
            if not all(ids):
                raise ConfigError(
                    f"{self.group or 'judge'}.choices={self.choices}: each label must be one token of "
                    f"{self.name_or_path}'s tokenizer, with or without a leading space; choose single-token labels"
                )
            if tokenizer.pad_token_id is None:
                tokenizer.pad_token = tokenizer.eos_token
            self._model, self._tokenizer, self._choice_ids = model, tokenizer, ids
        return self._model, self._tokenizer, self._choice_ids

    def render(self, prompt: str, a: str, b: str) -> str:
        text = self.template.format(prompt=prompt, a=a, b=b)
        if self.use_chat_template:
            _, tokenizer, _ = self._load()
            text = tokenizer.apply_chat_template(
                [{"role": "user", "content": text}], add_generation_prompt=True, tokenize=False
            )
        return text

    def judge_batch(self, matches: Sequence[tuple[str, str, str]]) -> list[float]:
        """Win probabilities of (prompt, a, b) matches, `batch_size` forwards at a time."""
        import torch

        model, tokenizer, choice_ids = self._load()
        limit = self.max_length or getattr(model.config, "max_position_embeddings", None)
        results: list[float] = []
        for start in range(0, len(matches), self.batch_size):
            texts = [self.render(*match) for match in matches[start : start + self.batch_size]]
            encoded = tokenizer(
                texts,
                return_tensors="pt",
                padding=True,
                truncation=limit is not None,
                max_length=limit,
                add_special_tokens=not self.use_chat_template,  # a chat template writes its own
            ).to(self.device)
            mask = encoded["attention_mask"]
            # Left padding: positions count real tokens only, so a padded row scores as it would alone.
            positions = (mask.cumsum(dim=1) - 1).clamp(min=0)
            with torch.inference_mode():
                logits = model(input_ids=encoded["input_ids"], attention_mask=mask, position_ids=positions).logits
            probabilities = logits[:, -1].float().softmax(dim=-1)
            first, second = (probabilities[:, ids].sum(dim=-1) for ids in choice_ids)
            results += (first / (first + second)).tolist()
        return results

    def __call__(self, prompt: str, a: str, b: str) -> float:
        return self.judge_batch([(prompt, a, b)])[0]


class BadAnswer(ValueError):
    """The server answered, but not with a verdict (not retried)."""


@dataclass
class HttpJudge(Component):
    """An OpenAI-compatible server as judge (vLLM: `vllm serve <model>`; base_url ends in /v1).

    `endpoint=chat` posts one user message to /chat/completions, `completions` posts the filled
    template to /completions. The win probability comes from the first token's top log-probs of
    the two labels when the server returns them, else from the text (A, B, tie or a number).
    Network errors, timeouts, HTTP 429 and 5xx are retried `retries` times with exponential backoff
    (counted in `retries_made`); other HTTP errors and unreadable answers fail at once. At most
    `max_concurrency` requests are in flight (also how many matches the Referee judges at once)."""

    base_url: str = knob(
        "http://127.0.0.1:8000/v1",
        help="The server's OpenAI-compatible API root, http:// or https:// and ending in /v1 (vllm serve listens on "
        "port 8000).",
    )
    model: str = knob("judge", help="The model name sent with each request: the name the server serves the judge as.")
    endpoint: Literal["chat", "completions"] = knob(
        "chat",
        help="`chat` posts the filled template as one user message to /chat/completions (a chat model); "
        "`completions` posts it as raw text to /completions (a base model).",
    )
    template: str = knob(
        DEFAULT_TEMPLATE,
        help="The judge's prompt, a str.format pattern using exactly {prompt}, {a} and {b} (literal braces doubled); "
        "the default asks which response is better and ends in `Answer:`.",
    )
    choices: list[str] = knob(
        default_factory=lambda: ["A", "B"],
        help="The two labels the template asks for, first for response a, read from the top log-probs or the text. "
        "Keep [A, B] with the default template.",
    )
    max_tokens: int = knob(
        1,
        help="Tokens the judge may generate per answer; 1 is enough for a one-letter verdict, more for a judge "
        "that writes before its verdict.",
    )
    top_logprobs: int = knob(
        5,
        help="How many top log-probs of the first token to ask for; the labels' share of them is the win "
        "probability. 5; 0 reads the verdict from the text only.",
    )
    temperature: float = knob(
        0.0,
        help="Sampling temperature of the judge (>= 0); 0 for a deterministic verdict.",
    )
    timeout_s: float = knob(
        30.0,
        help="Seconds one request may take before it is abandoned and retried (> 0); reward.arena.timeout_s "
        "bounds the whole call, retries included.",
    )
    retries: int = knob(
        2,
        help="Retries after a network error, a timeout, HTTP 429 or a 5xx answer (>= 0); other errors and "
        "unreadable answers fail at once.",
    )
    backoff_s: float = knob(
        0.5,
        help="Seconds to wait before the first retry, doubled after each (>= 0).",
    )
    max_concurrency: int = knob(
        8,
        help="Requests in flight at once, also how many matches of a round are judged at a time (>= 1); match it to "
        "what the server batches well.",
    )
    api_key_env: str | None = knob(
        None,
        help="The name of an environment variable holding a bearer token, when the server needs one; the token "
        "itself never goes in the config. null: no Authorization header.",
    )
    extra_body: dict = knob(
        default_factory=dict,
        help="Keys merged into every request, e.g. {chat_template_kwargs: {enable_thinking: false}} for a Qwen3 "
        "judge on vLLM.",
    )

    def validate(self) -> None:
        key = self.group or "judge"
        if not self.base_url.startswith(("http://", "https://")):
            raise ConfigError(f"{key}.base_url={self.base_url}: expected an http:// or https:// URL ending in /v1")
        check_template(f"{key}.template", self.template)
        check_choices(f"{key}.choices", self.choices)
        for name, low in (("max_tokens", 1), ("max_concurrency", 1), ("retries", 0), ("top_logprobs", 0)):
            if getattr(self, name) < low:
                raise ConfigError(f"{key}.{name}={getattr(self, name)}: expected an integer >= {low}")
        for name in ("timeout_s",):
            if not getattr(self, name) > 0:
                raise ConfigError(f"{key}.{name}={getattr(self, name)}: expected a number > 0 (seconds)")
        if self.backoff_s < 0 or self.temperature < 0:
            raise ConfigError(f"{key}.backoff_s and {key}.temperature must be >= 0")

    def __post_init__(self):
        self.retries_made = 0
        self._lock = threading.Lock()
        self._slots: threading.BoundedSemaphore | None = None

    @property
    def slots(self) -> threading.BoundedSemaphore:
        with self._lock:
            if self._slots is None:
                self._slots = threading.BoundedSemaphore(self.max_concurrency)
            return self._slots

    def request_body(self, prompt: str, a: str, b: str) -> tuple[str, dict]:
        text = self.template.format(prompt=prompt, a=a, b=b)
        body: dict[str, Any] = {
            "model": self.model,
            "max_tokens": self.max_tokens,
            "temperature": self.temperature,
            **self.extra_body,
        }
        if self.endpoint == "chat":
            body["messages"] = [{"role": "user", "content": text}]
            if self.top_logprobs:
                body.update(logprobs=True, top_logprobs=self.top_logprobs)
            return "/chat/completions", body
        body["prompt"] = text
        if self.top_logprobs:
            body["logprobs"] = self.top_logprobs
        return "/completions", body

    def read_answer(self, answer: dict) -> float:
        try:
            choice = answer["choices"][0]
            if self.endpoint == "chat":
                text = choice["message"]["content"] or ""
                content = (choice.get("logprobs") or {}).get("content") or []
                table = {e["token"]: e["logprob"] for e in content[0].get("top_logprobs", [])} if content else {}
            else:
                text = choice["text"] or ""
                tops = (choice.get("logprobs") or {}).get("top_logprobs") or []
                table = dict(tops[0]) if tops else {}
        except (KeyError, IndexError, TypeError, AttributeError) as error:
            raise BadAnswer(f"unexpected answer shape ({type(error).__name__}: {error})") from None
        probability = probability_from_logprobs(table, self.choices) if table else None
        if probability is not None:
            return probability
        try:
            return parse_verdict(text, self.choices)
        except ValueError as error:
            raise BadAnswer(str(error)) from None

    def _post(self, path: str, body: dict) -> dict:
        headers = {"Content-Type": "application/json"}
        token = os.environ.get(self.api_key_env) if self.api_key_env else None
        if token:
            headers["Authorization"] = f"Bearer {token}"
        request = urllib.request.Request(
            self.base_url.rstrip("/") + path, data=json.dumps(body).encode(), headers=headers, method="POST"
        )
        with self.slots, urllib.request.urlopen(request, timeout=self.timeout_s) as response:
            raw = response.read()
        try:
            return json.loads(raw)
        except ValueError:
            raise BadAnswer(f"not JSON: {raw[:80]!r}") from None

    def __call__(self, prompt: str, a: str, b: str) -> float:
        path, body = self.request_body(prompt, a, b)
        for attempt in range(self.retries + 1):
            try:
                return self.read_answer(self._post(path, body))
            except urllib.error.HTTPError as error:
                if (error.code != 429 and error.code < 500) or attempt == self.retries:
                    raise
            except (urllib.error.URLError, TimeoutError, ConnectionError):
                if attempt == self.retries:
                    raise
            with self._lock:
                self.retries_made += 1
            time.sleep(self.backoff_s * 2**attempt)
        raise AssertionError("unreachable")


# -------------------------------------------------------------------------------------- referee


@dataclass
class Counts:
    calls: int = 0  # judge calls made (each order of a pair is one call; cached pairs make none)
    failures: int = 0  # calls that raised, timed out or answered something that is not a probability
    skipped: int = 0  # matches with no usable verdict (every call for them failed)
    cache_hits: int = 0
    retries: int = 0  # retries inside the judge (HttpJudge), where it counts them

    def minus(self, other: Counts) -> Counts:
        return Counts(*(getattr(self, f) - getattr(other, f) for f in self.__dataclass_fields__))


class Referee:
    """A judge made safe for training. `many(prompt, pairs)` judges a round of matches (concurrently
    up to the judge's `max_concurrency`, or in one `judge_batch` call when the judge has one) and
    returns each first response's win probability, or None for a skipped match.

    - identical texts tie (0.5) without a call;
    - a pair's result is cached until `new_step()` (both orderings share it: (b, a) reads 1 - p);
    - `both_orders`: the result is the mean of p(a, b) and 1 - p(b, a) (one of them if the other failed);
    - `timeout_s`: a wall-clock limit on any judge call (the call is abandoned, its thread left to
      finish); a `ConfigError` from the judge is a setup error and is raised.
    """

    def __init__(self, judge: Callable, *, both_orders: bool = False, timeout_s: float | None = None, name="judge"):
        self.judge = judge
        self.both_orders = both_orders
        self.timeout_s = timeout_s
        self.name = name
        self.workers = max(1, int(getattr(judge, "max_concurrency", 1) or 1))
        self.counts = Counts()
        self._cache: dict[tuple[str, str, str], float] = {}
        self._warned = False

    def new_step(self) -> None:
        self._cache.clear()

    def totals(self) -> Counts:
        retries = getattr(self.judge, "retries_made", 0)
        return Counts(self.counts.calls, self.counts.failures, self.counts.skipped, self.counts.cache_hits, retries)

    def __call__(self, prompt: str, a: str, b: str) -> float | None:
        return self.many(prompt, [(a, b)])[0]

    def many(self, prompt: str, pairs: Sequence[tuple[str, str]]) -> list[float | None]:
        results: list[float | None] = [None] * len(pairs)
        pending: list[int] = []
        calls: dict[tuple[str, str], float | None] = {}
        for index, (a, b) in enumerate(pairs):
            if a == b:
                results[index] = 0.5
                continue
            cached = self._cached(prompt, a, b)
            if cached is not None:
                results[index] = cached
                self.counts.cache_hits += 1
                continue
            pending.append(index)
            if self.both_orders:
                calls.setdefault((a, b), None)
                calls.setdefault((b, a), None)
            elif (b, a) not in calls:  # the same texts may meet twice in a round, in either order
                calls.setdefault((a, b), None)
        verdicts = dict(zip(calls, self._judge_all(prompt, list(calls)), strict=True))

        def first_wins(x: str, y: str) -> float | None:
            if (x, y) in verdicts:
                return verdicts[(x, y)]
            return None if verdicts[(y, x)] is None else 1.0 - verdicts[(y, x)]

        for index in pending:
            a, b = pairs[index]
            estimates = [first_wins(a, b)]
            if self.both_orders:
                reverse = verdicts[(b, a)]
                estimates.append(None if reverse is None else 1.0 - reverse)
            estimates = [value for value in estimates if value is not None]
            if not estimates:
                self.counts.skipped += 1
                continue
            results[index] = sum(estimates) / len(estimates)
            self._store(prompt, a, b, results[index])
        return results

    def _cached(self, prompt: str, a: str, b: str) -> float | None:
        if a <= b:
            return self._cache.get((prompt, a, b))
        value = self._cache.get((prompt, b, a))
        return None if value is None else 1.0 - value

    def _store(self, prompt: str, a: str, b: str, value: float) -> None:
        if a <= b:
            self._cache[(prompt, a, b)] = value
        else:
            self._cache[(prompt, b, a)] = 1.0 - value

    def _judge_all(self, prompt: str, calls: list[tuple[str, str]]) -> list[float | None]:
        if not calls:
            return []
        batch = getattr(self.judge, "judge_batch", None)
        if batch is not None and self.timeout_s is None:
            outcomes = self._batched(batch, [(prompt, a, b) for a, b in calls])
        elif self.workers == 1 or len(calls) == 1:
            outcomes = [self._attempt(prompt, a, b) for a, b in calls]
        else:
            with ThreadPoolExecutor(max_workers=min(self.workers, len(calls))) as pool:
                outcomes = list(pool.map(lambda pair: self._attempt(prompt, *pair), calls))
        self.counts.calls += len(calls)
        values = []
        for value, error in outcomes:
            if error is not None:
                self.counts.failures += 1
                self._warn(error)
            values.append(value)
        return values

    def _batched(self, batch: Callable, matches: list[tuple[str, str, str]]) -> list[tuple[float | None, str | None]]:
        try:
            values = list(batch(matches))
            if len(values) != len(matches):
                raise ValueError(f"judge_batch returned {len(values)} values for {len(matches)} matches")
        except ConfigError:
            raise
        except Exception as error:  # any judge failure skips the matches, never the step
            return [(None, f"{type(error).__name__}: {error}")] * len(matches)
        outcomes = []
        for value in values:
            try:
                outcomes.append((win_probability(value), None))
            except ValueError as error:
                outcomes.append((None, str(error)))
        return outcomes

    def _attempt(self, prompt: str, a: str, b: str) -> tuple[float | None, str | None]:
        """(win probability, None) or (None, why it failed)."""
        if self.timeout_s is None:
            return self._call(prompt, a, b)
        box: list = []
        worker = threading.Thread(target=lambda: box.append(self._call(prompt, a, b, keep_config_errors=True)))
        worker.daemon = True  # a judge that never returns must not keep the process alive
        worker.start()
        worker.join(self.timeout_s)
        if not box:
            return None, f"timed out after {self.timeout_s:g} s"
        if isinstance(box[0], ConfigError):
            raise box[0]
        return box[0]

    def _call(self, prompt, a, b, keep_config_errors=False):
        try:
            return win_probability(self.judge(prompt, a, b)), None
        except ConfigError as error:
            if keep_config_errors:
                return error
            raise
        except Exception as error:  # any judge failure skips the match, never the step
            return None, f"{type(error).__name__}: {error}"

    def _warn(self, error: str) -> None:
        if not self._warned:
            self._warned = True
            log.warning(
                "%s failed (%s); the match is skipped and counted in gar/judge_failures (warned once)", self.name, error
            )
