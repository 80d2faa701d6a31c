"""The component contract: every Hydra node is a small typed object built through `_target_`.

`BUILDABLE` is every class a config's `_target_` may name, keyed by its own defining path
(`module.qualname`): each `Component` subclass is recorded as it is defined, and the few nodes that are
not components (the health monitor's settings) are marked `@buildable`. A name that is not a key
here (a function, a re-exported name, another module's attribute) is never built.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

BUILDABLE: dict[str, type] = {}


def buildable(cls: type) -> type:
    """Let a config build `cls` through `_target_: <its module>.<its name>`."""
    BUILDABLE[f"{cls.__module__}.{cls.__qualname__}"] = cls
    return cls


@dataclass
class RewardSpec:
    """One reward function as TRL sees it, plus what align_kit needs to validate the composition."""

    name: str
    weight: float
    max_value: float  # the best score a perfect completion earns from this function
    func: Any  # a callable taking TRL's reward kwargs
    judges_answer: bool = False  # it scores whether the answer is right (a warm start measures success with it)


@dataclass
class Component:
    """Base of every node. `group` is the Hydra config group (used in error messages).

    A component may
      - set `GRPOConfig` fields (`grpo_fields`): TRL already implements the behaviour;
      - add reward functions (`reward_specs`), e.g. the soft overlong punishment;
      - check its own keys (`validate`) before anything heavy is imported, how it fits the rest of the plan
        (`check`), and the training data (`check_dataset`) before the model loads;
      - run code inside the trainer (`trainer_hooks`: `TrainerHook`s, see core/hooks.py);
      - tell the health monitor which stability fix it is and whether it is on (`monitor_facts`).
    """

    group: str = field(default="", init=False, repr=False)

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        buildable(cls)

    def grpo_fields(self) -> dict[str, Any]:
        return {}

    def reward_specs(self, trainer_fields: dict[str, Any]) -> list[RewardSpec]:
        return []

    def validate(self) -> None:
        return None

    def check(self, plan) -> None:
        """Rules that tie this node to the rest of the plan (another node, a trainer field, the rewards).

        Run by `build_plan` (align_kit/experiment/plan.py) once every node is built and validated and the plan's
        GRPOConfig fields are merged, after the generic batch-shape and trainer rules and before the reward maximum,
        in the order of the defaults list; nothing heavy is imported yet. `plan` is the ExperimentPlan: its
        `components`, `rewards`, `choices`, `effective(name)` (a GRPOConfig field as TRL will see it) and
        `reward_max`. Raise a ConfigError to refuse the plan; append to `plan.notes` to warn once at start."""
        return None

    def field_hint(self, name: str) -> str:
        """Words appended to an error about the GRPOConfig field `name` this node sets, when another node or
        `trainer.<name>` contradicts it (why the node needs its value); empty when there is nothing to add."""
        return ""

    def monitor_facts(self) -> dict[str, Any]:
        """What this node tells the health monitor, as fields of `RunContext` (align_kit/monitor/rules.py): the
        stability fix it is and whether it is on, e.g. {"dynamic_sampling": True, "max_gen_batches": 4}, so an
        alert never advises a fix that is already on. Nothing by default."""
        return {}

    def idle_fields(self) -> dict[str, str]:
        """This node's fields that change nothing as the node is configured, each with the key that would make it
        count (e.g. rollout's quant_scale while quantization=none: "rollout.quantization=fp8|int8"). A value the
        user sets for one (on the command line, or swept) is refused: two arms differing only there would train
        the same thing. Nothing by default."""
        return {}

    def check_dataset(self, dataset) -> None:
        """Checks that need the training data (run after it loads, before the model does)."""
        return None

    def bind_rewards(self, rewards: list[RewardSpec]) -> None:
        """Told the run's rewards once they are known (before training)."""
        return None

    def trainer_hooks(self) -> list:
        """The TrainerHooks this node adds to AlignTrainer (none: TRL's own behaviour)."""
        return []


buildable(Component)  # step_mask=off: the node that changes nothing
