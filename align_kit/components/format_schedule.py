"""Format-reward weight schedule (the policy-optimization chapter, 18.3.6): start with a high format weight so the model
learns the `<think>...</think>` structure quickly, then lower it so correctness dominates.

constant : the `format` reward's configured weight throughout
linear   : start -> end over `steps` optimizer steps, then end
step     : start until `at_step`, then end
adaptive : start (1.0) until the format reward's mean has stayed above threshold (0.9, strictly, as
           the policy-optimization chapter says, 18.3.6) for `window`
           consecutive generation batches, then floor (0.1-0.3) for the rest of the run (one-way:
           a later dip does not raise it again, so the schedule cannot oscillate)

The hook asks `weight(step)` once each training batch's rewards are computed (the weight in force
for that batch's advantages) and then reports the batch's mean format reward with `observe`. The
weight is TRL's `reward_weights` entry of the `format` reward, so it works under both
sum_then_normalize and GDPO's normalize_then_sum.

The reward's attainable maximum follows the weight: with correctness 0.8 and format 1.0 a perfect
completion earns 1.8, not 1.0. The hook logs the maximum in force as `reward/max_attainable` (the
monitor's reward-plateau rule reads it; NGRPO's virtual sample follows the weights it is given).
The training-stability chapter's rule that a perfect completion must reach 1.0 (16.6.3) is kept by validation: every
weight the schedule can reach (its start, and its end or floor) must leave the maximum >= 1.0.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from align_kit.core.component import Component
from align_kit.core.errors import ConfigError
from align_kit.core.fields import knob
from align_kit.core.hooks import TrainerHook


@dataclass
class FormatWeightSchedule(Component):
    kind: Literal["constant", "linear", "step", "adaptive"] = knob(
        "constant",
        help="How the weight moves: constant keeps the configured weight; linear goes start -> end over steps; step "
        "switches at at_step; adaptive drops to floor once the format reward's mean stays above threshold.",
        source="18.3.6",
    )
    reward: str = knob("format", help="The reward node whose weight is scheduled (its name under reward.).")
    start: float | None = knob(
        None,
        ge=0,
        help="The weight at step 0; null takes the reward's configured weight. The presets start high (1.0) so the "
        "structure is learnt first.",
        source="18.3.6",
    )
    end: float = knob(
        0.2,
        ge=0,
        help="The weight after the schedule (linear, step), >= 0; low enough that correctness dominates, but every "
        "weight reached must leave the reward maximum >= 1.0.",
        source="18.3.6; 16.6.3",
    )
    steps: int = knob(100, ge=1, help="linear: the optimizer steps from start to end, >= 1.", source="18.3.6")
    at_step: int = knob(100, help="step: the optimizer step at which the weight switches from start to end.")
    threshold: float = knob(
        0.9,
        ge=0,
        le=1,
        help="adaptive: the format reward's batch mean must stay strictly above this (0.9 as the chapter says).",
        source="18.3.6",
    )
    window: int = knob(
        5, ge=1, help="adaptive: consecutive generation batches above threshold before the weight drops, >= 1."
    )
    floor: float = knob(
        0.2,
        ge=0,
        help="adaptive: the weight for the rest of the run once lowered (one-way); the chapter suggests 0.1-0.3.",
        source="18.3.6",
    )
    reward_maxes: list[float] | None = field(default=None, init=False, repr=False)  # bound by the plan
    _above: int = field(default=0, init=False, repr=False)
    _lowered: bool = field(default=False, init=False, repr=False)

    def validate(self) -> None:
        return None  # every range is its field's (knob)

    @property
    def is_constant(self) -> bool:
        return self.kind == "constant"

    def check(self, plan) -> None:
        """The scheduled reward is selected, and every weight the schedule can reach keeps the maximum >= 1.0."""
        if self.is_constant:
            return
        names = [spec.name for spec in plan.rewards]
        if self.reward not in names:
            raise ConfigError(
                f"format_schedule={plan.choices.get('format_schedule')} schedules reward {self.reward!r}, "
                f"which is not selected (rewards: {names}); add it, e.g. reward=[correctness,format]"
            )
        if plan.refuses_reward_max(plan.reward_max):
            return  # the configured maximum itself is below 1.0: the plan's reward rule says so
        spec = next(spec for spec in plan.rewards if spec.name == self.reward)
        for weight in self.reachable_weights(spec.weight):
            reached = plan.reward_max + (weight - spec.weight) * spec.max_value
            if plan.refuses_reward_max(reached):
                raise ConfigError(
                    f"format_schedule={plan.choices.get('format_schedule')} sets the {spec.name} weight to "
                    f"{weight:g}, where a perfect completion earns {reached:g} < 1.0 (the training-stability "
                    "chapter, 16.6.3); raise format_schedule.end / format_schedule.floor, or set "
                    "train.allow_reward_max_below_one=true"
                )

    def bind_rewards(self, rewards) -> None:
        self.reward_maxes = [spec.max_value for spec in rewards]

    def reachable_weights(self, configured_weight: float) -> list[float]:
        """The weights the schedule can set (linear moves between the two, so the ends bound it)."""
        start = configured_weight if self.start is None else self.start
        if self.kind == "constant":
            return [configured_weight]
        return [start, self.floor if self.kind == "adaptive" else self.end]

    def bind(self, configured_weight: float) -> None:
        if self.start is None:
            self.start = configured_weight

    def weight(self, step: int) -> float:
        if self.kind == "linear":
            progress = min(step / self.steps, 1.0)
            return self.start + (self.end - self.start) * progress
        if self.kind == "step":
            return self.start if step < self.at_step else self.end
        if self.kind == "adaptive":
            return self.floor if self._lowered else self.start
        return self.start

    def observe(self, format_reward_mean: float) -> None:
        if self.kind != "adaptive" or self._lowered:
            return
        self._above = self._above + 1 if format_reward_mean > self.threshold else 0
        self._lowered = self._above >= self.window

    def state_dict(self) -> dict:
        return {"above": self._above, "lowered": self._lowered}

    def load_state_dict(self, state: dict) -> None:
        self._above, self._lowered = state["above"], state["lowered"]

    def trainer_hooks(self) -> list:
        return [] if self.is_constant else [FormatScheduleHook(self)]


class FormatScheduleHook(TrainerHook):
    """Sets the scheduled reward's entry of TRL's `reward_weights` for each training batch."""

    name = "format_schedule"

    def __init__(self, schedule: FormatWeightSchedule):
        self.schedule = schedule
        self.index = 0

    def attach(self, trainer) -> None:
        self.index = trainer.reward_func_names.index(self.schedule.reward)
        self.schedule.bind(float(trainer.reward_weights[self.index]))

    def on_rewards(self, trainer, state):

        from align_kit.components.advantage import attainable_max

        if state.mode != "train":
            return None
        # The weight in force for this batch's advantages; TRL applies the weights after this call. Every
        # generation round of one step (dynamic sampling draws several) gets the same weight: the schedule
        # observes only the batch that trains (on_train_batch).
        trainer.reward_weights[self.index] = self.schedule.weight(trainer.state.global_step)
        if self.schedule.reward_maxes is None:
            return None
        return {"reward/max_attainable": attainable_max(trainer.reward_weights, self.schedule.reward_maxes)}

    def on_train_batch(self, trainer, state, batch):
        import torch

        if state.mode == "train":
            self.schedule.observe(torch.nanmean(state.rewards_per_func[:, self.index]).item())
        return None

    def on_step_end(self, trainer, seconds: float):
        return {"schedule/format_weight": float(trainer.reward_weights[self.index])}

    def state_dict(self) -> dict:
        return self.schedule.state_dict()

    def load_state_dict(self, state: dict) -> None:
        self.schedule.load_state_dict(state)
