"""Thresholds, windows and actions of the health-monitor rules (the `monitor=` Hydra node).

Every rule has its own settings block and an `action`: `log` (recorded only), `warn` (shown to
the user) or `halt` (stop training after a checkpoint). Windows counted in *logged points* are
`span`/`window`; the one window counted in *training steps* is `window_steps`. The defaults
here equal `conf/monitor/default.yaml` (a test holds them together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_type_hints

from align_kit.core.component import buildable
from align_kit.core.errors import ConfigError

Action = Literal["log", "warn", "halt"]
ACTIONS = ("log", "warn", "halt")


@dataclass
class EntropyCollapse:
    """Mean of the last `span` points below (1 - fall) x the mean of the first `span` (the
    policy-optimization chapter, 18.3.1)."""

    action: Action = "warn"
    span: int = 10
    fall: float = 0.5


@dataclass
class EntropyDrop:
    """The smoothed entropy (mean of the last `span` points) below (1 - fall) x the highest smoothed
    value of the last `window_steps` training steps: "entropy falls more than 50 % within 100 steps"
    (the policy-optimization chapter, 18.3.7). Smoothed on both sides, so one noisy batch neither
    raises the reference nor trips the alarm."""

    action: Action = "warn"
    span: int = 10
    window_steps: int = 100
    fall: float = 0.5


@dataclass
class EntropyDecline:
    """The smoothed entropy (mean of the last `span` points) below (1 - fall) x the mean of the first
    `span` points (the policy-optimization chapter, 18.3.3: a healthy run loses at most 40 %)."""

    action: Action = "log"
    span: int = 10
    fall: float = 0.4


@dataclass
class AboveThreshold:
    """Mean of the last `span` points above `threshold`."""

    action: Action = "warn"
    span: int = 1
    threshold: float = 0.0


@dataclass
class RisingShare:
    """A share that "keeps rising beyond `threshold`" (the policy-optimization chapter, 18.3.2): the
    mean of the last `span` points above `threshold`, and over the last `window` points the mean
    of the second half above the mean of the first half by more than `rise`."""

    action: Action = "warn"
    span: int = 10
    threshold: float = 0.3
    window: int = 40
    rise: float = 0.15


@dataclass
class LengthGrowth:
    """Mean of the last `span` points above `factor` x the mean of the first `span` (the
    policy-optimization chapter, 18.3.1)."""

    action: Action = "warn"
    span: int = 10
    factor: float = 3.0


@dataclass
class LengthNearMax:
    """Mean of the last `span` points at or above (1 - margin) x max_completion_length (the
    training-stability chapter, table 16-6)."""

    action: Action = "warn"
    span: int = 1
    margin: float = 0.05


@dataclass
class RewardPlateau:
    """Reward flat over the last `window` points while below reward_max (the training-stability
    chapter, table 16-6).

    Flat: |mean of the window's second half - mean of its first half| < `tolerance` (halves, not
    max - min, so per-step sampling noise does not hide a plateau). Below: the window's mean is
    at most reward_max - `gap`."""

    action: Action = "warn"
    window: int = 100
    tolerance: float = 0.02
    gap: float = 0.05


@dataclass
class GradNormVanishing:
    """Every one of the last `window` points below `floor` (the training-stability chapter, table 16-6)."""

    action: Action = "warn"
    window: int = 10
    floor: float = 1e-4


@dataclass
class Rising:
    """Strictly increasing over the last `window` points."""

    action: Action = "warn"
    window: int = 10


@dataclass
class ClipRatioZero:
    """The last `window` points exactly zero after `window` points that clipped `min_before` of the
    tokens on average (the policy-optimization chapter, 18.3.4). A lone clipped token in an almost
    on-policy run is not a drop."""

    action: Action = "warn"
    window: int = 10
    min_before: float = 1e-3


@dataclass
class PolicyRatioDrift:
    """Mean of the last `span` points further than `deviation` from 1.0 (the policy-optimization chapter, 18.3.4)."""

    action: Action = "warn"
    span: int = 1
    deviation: float = 0.5


@dataclass
class TrainEvalDivergence:
    """Over the last `window` evaluations, train reward gains more than `min_train_gain` while eval
    reward gains less than `max_eval_gain` (the policy-optimization chapter, 18.3.7). Gain: mean of the second half of
    the window minus mean of its first half; the train value paired with an evaluation is the
    mean train reward logged since the previous evaluation."""

    action: Action = "warn"
    window: int = 4
    min_train_gain: float = 0.05
    max_eval_gain: float = 0.01


@dataclass
class RewardDecline:
    """The smoothed reward (mean of the last `span` points) more than `drop` x reward_max below its
    best smoothed value so far: the reward "keeps decaying and finally collapses" (the
    training-stability chapter, 16.6.1, figure 16-10)."""

    action: Action = "warn"
    span: int = 20
    drop: float = 0.1


@dataclass
class RewardCollapse:
    """The format reward rising while correctness stays flat (the policy-optimization chapter,
    18.3.2): over the last `window` points (generation steps), the format reward's gain (mean of
    the second half minus mean of the first half) above `min_format_gain` and correctness's gain
    below `max_correctness_gain`. `format_reward` / `correctness_reward` name the reward nodes
    (TRL logs them as rewards/<name>/mean)."""

    action: Action = "warn"
    window: int = 20
    min_format_gain: float = 0.1
    max_correctness_gain: float = 0.02
    format_reward: str = "format"
    correctness_reward: str = "correctness"


@dataclass
class NonFinite:
    """A NaN or infinite value of any of `metrics` (listed in the order a training step computes
    them, so the alert names the first to go). `halt` stops without saving the broken weights."""

    action: Action = "halt"
    metrics: list[str] = field(default_factory=lambda: ["loss", "grad_norm"])


@buildable
@dataclass
class HealthMonitorConfig:
    """All rules; `enabled: false` (`monitor=off`) turns every one of them off."""

    enabled: bool = True
    non_finite: NonFinite = field(default_factory=NonFinite)
    entropy_collapse: EntropyCollapse = field(default_factory=EntropyCollapse)
    entropy_drop: EntropyDrop = field(default_factory=EntropyDrop)
    entropy_decline: EntropyDecline = field(default_factory=EntropyDecline)
    # The training-stability chapter's table 16-6 (16.6.5: healthy < 30 %, alarm > 50 %), over 10
    # points as the policy-optimization chapter's code (18.3.1).
    zero_std_groups: AboveThreshold = field(default_factory=lambda: AboveThreshold(span=10, threshold=0.5))
    zero_advantage: RisingShare = field(default_factory=RisingShare)
    reward_collapse: RewardCollapse = field(default_factory=RewardCollapse)
    reward_decline: RewardDecline = field(default_factory=RewardDecline)
    length_growth: LengthGrowth = field(default_factory=LengthGrowth)
    length_near_max: LengthNearMax = field(default_factory=LengthNearMax)
    reward_plateau: RewardPlateau = field(default_factory=RewardPlateau)
    grad_norm_vanishing: GradNormVanishing = field(default_factory=GradNormVanishing)
    kl_rising: Rising = field(default_factory=Rising)
    policy_ratio_drift: PolicyRatioDrift = field(default_factory=PolicyRatioDrift)
    # Mean |ratio - 1| over completion tokens (policy_ratio/abs_dev), smoothed: updates that move
    # tokens a large share of the way to the clip bounds (the policy-optimization chapter, 18.3.4).
    policy_ratio_noise: AboveThreshold = field(default_factory=lambda: AboveThreshold(span=10, threshold=0.1))
    clip_ratio_rising: Rising = field(default_factory=Rising)
    clip_ratio_zero: ClipRatioZero = field(default_factory=ClipRatioZero)
    # The training-stability chapter, 16.6.1: alarm when the mean |logp_train - logp_inference|
    # exceeds 0.01 (align_kit's mismatch metric, or TRL's when rollouts come from vLLM).
    logp_mismatch: AboveThreshold = field(default_factory=lambda: AboveThreshold(threshold=0.01))
    train_eval_divergence: TrainEvalDivergence = field(default_factory=TrainEvalDivergence)

    def __post_init__(self) -> None:
        # Hydra hands nested YAML blocks over as mappings: build each rule's settings from its block.
        for rule in self.rule_names():
            block = getattr(self, rule)
            if isinstance(block, Mapping):
                settings_type = get_type_hints(HealthMonitorConfig)[rule]
                try:
                    block = settings_type(**block)
                except TypeError as error:
                    raise ConfigError(f"monitor.{rule}: {error}; check its keys") from None
                setattr(self, rule, block)
            _validate(rule, block)

    @staticmethod
    def rule_names() -> list[str]:
        return [f.name for f in fields(HealthMonitorConfig) if f.name != "enabled"]


def _validate(rule: str, settings: Any) -> None:
    action = settings.action
    if action not in ACTIONS:
        raise ConfigError(f"monitor.{rule}.action={action!r}: choose one of {', '.join(ACTIONS)}")
    own = {f.name: getattr(settings, f.name) for f in fields(settings)}
    for name in ("span", "window", "window_steps"):
        if name in own and not (isinstance(own[name], int) and own[name] >= 1):
            raise ConfigError(f"monitor.{rule}.{name}={own[name]!r} must be a whole number >= 1")
    # A trend needs two points: a one-point "rising" window would always fire.
    if isinstance(settings, Rising | RewardPlateau | TrainEvalDivergence | RisingShare | RewardCollapse) and (
        settings.window < 2
    ):
        raise ConfigError(f"monitor.{rule}.window={settings.window} must be >= 2: the rule follows a trend")
    if isinstance(settings, NonFinite) and not (
        isinstance(settings.metrics, list) and settings.metrics and all(isinstance(m, str) for m in settings.metrics)
    ):
        raise ConfigError(f"monitor.{rule}.metrics={settings.metrics!r} must be a non-empty list of metric names")
    for name in ("fall", "margin", "drop"):
        if name in own and not 0 < own[name] < 1:
            raise ConfigError(f"monitor.{rule}.{name}={own[name]} must lie strictly between 0 and 1")
