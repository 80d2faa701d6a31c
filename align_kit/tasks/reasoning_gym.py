"""reasoning-gym's procedurally generated tasks (offline, each with its own verifier) as chat prompts.

`task.datasets` lists reasoning-gym datasets (`[chain_sum, gsm_symbolic]`) and `task.options` gives any of them its
own options (`{chain_sum: {max_terms: 3}}`): a list and a null in the YAML, so an override replaces them whole (Hydra
refuses new keys in a dict the config already holds). Each dataset is a domain, so per-domain metrics and
kl=per_domain split the mixture. A row is a conversation (a system
message stating the answer format, then the question), which TRL renders with the model's chat template, and
carries what the reward needs to rebuild the row's entry (`gym_config`, `gym_index`), so the dataset's own
`score_answer` judges it (reward=gym_correctness, align_kit/rewards/gym.py).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import json
import typing
from dataclasses import dataclass
from typing import Any, ClassVar

from align_kit.core.contracts import TaskNode
from align_kit.core.errors import ConfigError
from align_kit.core.fields import SEED, SEED_LIMIT, knob
from align_kit.rewards.gym import build_dataset, plain_option
from align_kit.tasks.gym_ranges import check_curriculum_ranges
from align_kit.tasks.option_types import expected

INSTALL = "make install-real-model (or pip install reasoning-gym==0.1.25)"
# The answer format the system message asks for, as reasoning-gym's own prompts do (reasoning_gym.utils.SYSTEM_PROMPTS),
# shortened for a small model's context.
SYSTEM_PROMPT = (
    "Solve the problem. Think briefly, then give only the final answer between <answer> and </answer> tags, "
    "for example <answer>42</answer>."
)
# Streams per split: train and eval draw from different generator seeds, so the held-out rows are other items.
SPLIT_SEED_OFFSET = {"train": 0, "eval": 1_000_003, "probe": 2_000_006}


def require_reasoning_gym(key: str) -> None:
    if importlib.util.find_spec("reasoning_gym") is None:
        raise ConfigError(f"{key} needs the reasoning-gym package, which is not installed: {INSTALL}")


def dataset_options(name: str) -> tuple[type, list[str]]:
    """(the config class of reasoning-gym's dataset `name`, its option names)."""
    from reasoning_gym.factory import DATASETS

    config_class = DATASETS[name][1]
    return config_class, [f.name for f in dataclasses.fields(config_class)]


def known_datasets() -> list[str]:
    from reasoning_gym.factory import DATASETS

    return sorted(name for name in DATASETS if name != "composite")  # composite mixes; task.datasets does that


@dataclass
class ReasoningGymTask(TaskNode):
    COLUMNS: ClassVar[tuple[str, ...]] = ("prompt", "answer", "domain", "gym_config", "gym_index")
    datasets: list[str] = knob(
        default_factory=lambda: ["chain_sum"],
        help="reasoning-gym datasets mixed as domains (rows alternate between them), e.g. [chain_sum,gsm_symbolic].",
    )
    options: dict | None = knob(
        None,
        help="Each dataset's own options by its name, e.g. {chain_sum:{max_terms:3,max_digits:2}} (its difficulty "
        "keys; `size` and `seed` override the task's for it); null: every dataset's defaults.",
    )
    num_train: int = knob(
        2000, ge=1, help="Training rows in all, split evenly over the datasets (a dataset's own `size` overrides)."
    )
    num_eval: int = knob(
        0, ge=0, help="Held-out rows (drawn with other seeds than training's), split evenly; 0: no evaluation set."
    )
    seed: int = knob(1234, within=SEED, help="Seeds every dataset's generator (a dataset's own `seed` overrides).")
    system_prompt: str = knob(
        SYSTEM_PROMPT,
        help="The system message of every conversation: it states the answer format reward=gym_correctness reads.",
    )

    def validate(self) -> None:
        require_reasoning_gym("task=reasoning_gym")
        if not self.datasets:
            raise ConfigError(
                "task.datasets must list at least one reasoning-gym dataset, e.g. task.datasets=[chain_sum]"
            )
        known = known_datasets()
        for name in self.datasets:
            if name not in known:
                raise ConfigError(f"task.datasets: {name} is not a reasoning-gym dataset; known: {', '.join(known)}")
        if len(set(self.datasets)) < len(self.datasets):
            raise ConfigError(f"task.datasets={list(self.datasets)} names a dataset twice; list each once")
        for name, options in (self.options or {}).items():
            if name not in self.datasets:
                raise ConfigError(
                    f"task.options.{name}: {name} is not in task.datasets={list(self.datasets)}; add it there or "
                    "drop its options"
                )
            if not hasattr(options, "keys"):
                raise ConfigError(f"task.options.{name}={options!r} must map {name}'s options to values")
            _, option_names = dataset_options(name)
            for key in options:
                if key not in option_names:
                    raise ConfigError(
                        f"task.options.{name}.{key}: not an option of {name}; its options: {', '.join(option_names)}"
                    )
            self._check_types(name, options)
            check_curriculum_ranges(name, {key: plain_option(options[key]) for key in options})
        for name in self.datasets:
            for split in ("train", "eval"):
                self._check_config(name, self.config(name, split, 1))

    def _check_types(self, name: str, options) -> None:
        """Each option's value against the type reasoning-gym's config declares for it (align_kit/tasks/option_types),
        and `size` / `seed`, which the task reads itself, as whole numbers in range."""
        config_class, _ = dataset_options(name)
        hints = typing.get_type_hints(config_class)
        for key in options:
            value = plain_option(options[key])
            want = expected(hints.get(key), value)
            if want is None and key == "size" and value < 1:
                want = "a whole number >= 1"
            if want is None and key == "seed" and value is not None and not 0 <= value < SEED_LIMIT:
                want = "a whole number in [0, 2^32)"
            if want is not None:
                shown = json.dumps(value, default=str)  # as YAML writes it: true, [1, 2], "3"
                raise ConfigError(f"task.options.{name}.{key}={shown}: {name}'s {key} must be {want}")

    def _check_config(self, name: str, config: dict) -> None:
        """The dataset's own checks (its config's `validate`: asserts on ranges) as one line."""
        config_class, _ = dataset_options(name)
        try:
            built = config_class(**{k: plain_option(v) for k, v in config.items() if k != "name"})
            if hasattr(built, "validate"):
                built.validate()
        except (AssertionError, ValueError, TypeError) as error:
            reason = str(error).strip().splitlines()[0] if str(error).strip() else "its config's check failed"
            raise ConfigError(f"task.options.{name}: {reason}") from None

    @property
    def source(self) -> str:
        return f"task.datasets={list(self.datasets)}"

    def own_options(self, name: str) -> dict:
        return dict((self.options or {}).get(name) or {})

    def split_size(self, name: str, split: str) -> int:
        options = self.own_options(name)
        if split == "train" and "size" in options:
            return options["size"]  # a whole number >= 1 (validate)
        total = self.num_eval if split == "eval" else self.num_train
        share, extra = divmod(total, len(self.datasets))
        return share + (1 if list(self.datasets).index(name) < extra else 0)

    def config(self, name: str, split: str, size: int | None = None) -> dict:
        """The dataset's full config for `split`: its options, then size and a per-split seed."""
        options = {k: plain_option(v) for k, v in self.own_options(name).items()}
        own_seed = options.pop("seed", None)  # null: the task's seed, as when it is not given
        seed = (self.seed if own_seed is None else own_seed) + SPLIT_SEED_OFFSET[split]
        options.pop("size", None)
        return {
            "name": name,
            **options,
            "seed": seed,
            "size": max(1, self.split_size(name, split) if size is None else size),
        }

    def rows(self, split: str, count: int | None = None) -> list[dict[str, Any]]:
        """The split's rows, the datasets interleaved (row i of each in turn)."""
        per_dataset = []
        for name in self.datasets:
            size = self.split_size(name, split) if count is None else -(-count // len(self.datasets))
            if size < 1:
                continue
            config = self.config(name, split, size)
            encoded = json.dumps(config, sort_keys=True)
            per_dataset.append(
                [
                    {
                        "prompt": [
                            {"role": "system", "content": self.system_prompt},
                            {"role": "user", "content": entry["question"]},
                        ],
                        "answer": str(entry["answer"]),
                        "domain": name,
                        "gym_config": encoded,
                        "gym_index": index,
                    }
                    for index, entry in generated(name, config)
                ]
            )
        interleaved = [row for group in _zip_longest(per_dataset) for row in group]
        return interleaved if count is None else interleaved[:count]

    def dataset(self, split: str = "train"):
        from datasets import Dataset

        rows = self.rows(split)
        return Dataset.from_dict({column: [row[column] for row in rows] for column in self.COLUMNS})

    def probe_pairs(self, count: int) -> list[tuple[Any, str]]:
        return [(row["prompt"], row["answer"]) for row in self.rows("probe", count)]

    def cache_key(self) -> dict:
        options = {name: {k: plain_option(v) for k, v in self.own_options(name).items()} for name in self.datasets}
        return {"kind": "reasoning_gym", "options": options, "seed": self.seed, "system": self.system_prompt}

    def check(self, plan) -> None:
        from align_kit.rewards.gym import GymCorrectness

        if not any(isinstance(spec.func, GymCorrectness) for spec in plan.rewards):
            raise ConfigError(
                "task=reasoning_gym is scored by each dataset's own verifier: add reward=[gym_correctness,gym_format] "
                "(the answer between <answer> tags)"
            )


def _zip_longest(groups: list[list]) -> list[list]:
    longest = max((len(g) for g in groups), default=0)
    return [[g[i] for g in groups if i < len(g)] for i in range(longest)]


def generated(name: str, config: dict) -> list[tuple[int, dict]]:
    """(index, entry) of every item reasoning-gym generates for `config`; a generator that fails on the options
    (values its config's checks let through) is one line naming them, not a traceback from inside the generator."""
    try:
        return list(enumerate(build_dataset(config)))
    except Exception as error:  # the generators raise ValueError, TypeError, IndexError, ... on odd options
        reason = str(error).strip().splitlines()[0][:160] if str(error).strip() else "no message"
        raise ConfigError(
            f"task.options.{name}: reasoning-gym cannot generate {name} with these options "
            f"({type(error).__name__}: {reason}); change them"
        ) from None
