"""What a task, a model and a logger node offer the rest of align_kit: a `Protocol` each (what the trainer, the plan,
the entry point and the models may use) and a base class each that gives every member its default, so callers use
plain attributes and never probe a node for one.

A shipped or user node subclasses the base (`TaskNode`, `ModelNode`, `LoggerNode`) and overrides what it has;
tests/core/test_contracts.py checks every shipped node against its protocol.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from align_kit.core.component import Component


@runtime_checkable
class Task(Protocol):
    """The training data, and what the warm start and a multi-turn rollout need from it."""

    COLUMNS: tuple[str, ...] | None  # the columns `dataset` gives the rewards (None: not declared, not checked)
    num_eval: int  # eval rows the trainer evaluates on (0: no eval dataset)

    @property
    def source(self) -> str:
        """How errors name this data (e.g. `task.path=...`)."""
        ...

    def dataset(self, split: str = "train") -> Any: ...

    def demonstrations(self) -> list: ...

    def probe_pairs(self, count: int) -> list[tuple[str, str]]: ...

    def cache_key(self) -> dict: ...

    def rollout_func(self) -> Callable | None: ...

    def warm_start_success_rate(self, model, tokenizer, count: int, max_new_tokens: int) -> dict | None: ...


@runtime_checkable
class Model(Protocol):
    """The policy: loaded once the data is checked; what the config tells about it before that."""

    max_position_embeddings: int | None  # positions, prompt included, when known before loading

    def load(self, task: Task, cache_dir: str | Path, reward=None, max_new_tokens: int = 32) -> Any: ...

    def prompt_problem(self, prompt: str | list, completion_budget: int) -> str | None: ...

    def declared_model_type(self) -> str | None: ...


@runtime_checkable
class Logger(Protocol):
    """Where the run reports: TRL's `report_to` and the tracking session around training."""

    def report_to(self) -> list[str]: ...

    def session(self, run_dir: str | Path, identity: Any) -> contextlib.AbstractContextManager: ...


class TaskNode(Component):
    """Base of every task node. A task gives `dataset` and `cache_key`; the rest has defaults: no declared
    columns, no eval rows, no warm-start demonstrations or probe, TRL's single-turn generation."""

    COLUMNS: tuple[str, ...] | None = None
    num_eval = 0  # a task whose eval rows are a knob declares num_eval as a field

    @property
    def source(self) -> str:
        return "the training set"

    def dataset(self, split: str = "train"):
        raise NotImplementedError

    def demonstrations(self) -> list:
        """(prompt, completion) pairs for the warm-start SFT of model=tiny (none: it starts from random weights)."""
        return []

    def probe_pairs(self, count: int) -> list[tuple[str, str]]:
        """(prompt, answer) pairs held out from training, to measure the warm start (none: not measured)."""
        return []

    def cache_key(self) -> dict:
        """Everything about this task that shapes a warm-started model (its cache key)."""
        raise NotImplementedError

    def rollout_func(self) -> Callable | None:
        """TRL's `rollout_func` for GRPOTrainer (a multi-turn task's episode loop), or None: TRL generates."""
        return None

    def warm_start_success_rate(self, model, tokenizer, count: int, max_new_tokens: int) -> dict | None:
        """A task that scores its own episodes (multi-turn) measures the warm start itself: the `start_*` entries
        of the policy's info. None: the model measures `probe_pairs` with the correctness reward."""
        return None


class ModelNode(Component):
    """Base of every model node. A model gives `load`; before it loads, it may know its positions, its
    transformers model_type and what a prompt cannot hold (all unknown by default)."""

    max_position_embeddings: int | None = None

    def load(self, task: Task, cache_dir: str | Path, reward=None, max_new_tokens: int = 32):
        raise NotImplementedError

    def prompt_problem(self, prompt: str | list, completion_budget: int) -> str | None:
        """Why this model cannot take `prompt` (a text, or a message list) as written; None when it can or when
        that is known only once the model loads."""
        return None

    def declared_model_type(self) -> str | None:
        """The transformers model_type the node will build, when knowable without loading it."""
        return None


class LoggerNode(Component):
    """Base of every logger node: by default TRL reports nowhere and no tracking run is opened."""

    def report_to(self) -> list[str]:
        return []

    @contextlib.contextmanager
    def session(self, run_dir: str | Path, identity: Any) -> Iterator[Any]:
        """The tracking run around training (yields it, or None)."""
        yield None
