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


@dataclass
class Component:
    """Base of every node. `group` is the Hydra config group (used in error messages).

    A component may
      - set `GRPOConfig` fields (`grpo_fields`): TRL already implements the behaviour;
      - add reward functions (`reward_specs`), e.g. the soft overlong punishment;
      - check its own keys (`validate`) before anything heavy is imported, and the training data
        (`check_dataset`) before the model loads;
      - run code inside the trainer (`trainer_hooks`: `TrainerHook`s, see core/hooks.py).
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
