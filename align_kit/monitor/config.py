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

from align_kit.errors import ConfigError

Action = Literal["log", "warn", "halt"]
ACTIONS = ("log", "warn", "halt")


@dataclass
class EntropyCollapse:
    """Mean of the last `span` points below (1 - fall) x the mean of the first `span` (seed 002 §18.3.1)."""

    action: Action = "warn"
    span: int = 10
    fall: float = 0.5


@dataclass
class EntropyDrop:
    """Latest value below (1 - fall) x the highest value of the last `window_steps` steps (seed 002 §18.3.7)."""

    action: Action = "warn"
    window_steps: int = 100
    fall: float = 0.5


@dataclass
class EntropyDecline:
    """Latest value below (1 - fall) x the first logged value (seed 002 §18.3.3: at most 40% per run)."""

    action: Action = "log"
    fall: float = 0.4


@dataclass
class AboveThreshold:
    """Mean of the last `span` points above `threshold`."""

    action: Action = "warn"
    span: int = 1
    threshold: float = 0.0


@dataclass
class LengthGrowth:
    """Mean of the last `span` points above `factor` x the mean of the first `span` (seed 002 §18.3.1)."""

    action: Action = "warn"
    span: int = 10
    factor: float = 3.0


@dataclass
class LengthNearMax:
    """Mean of the last `span` points at or above (1 - margin) x max_completion_length (seed 000 table 16-6)."""

    action: Action = "warn"
    span: int = 1
    margin: float = 0.05


@dataclass
class RewardPlateau:
    """Reward flat over the last `window` points while below reward_max (seed 000 table 16-6).

    Flat: |mean of the window's second half - mean of its first half| < `tolerance` (halves, not
    max - min, so per-step sampling noise does not hide a plateau). Below: the window's mean is
    at most reward_max - `gap`."""

    action: Action = "warn"
    window: int = 50
    tolerance: float = 0.02
    gap: float = 0.05


@dataclass
class GradNormVanishing:
    """Every one of the last `window` points below `floor` (seed 000 table 16-6)."""

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
    """The last `window` points exactly zero after an earlier non-zero one (seed 002 §18.3.4)."""

    action: Action = "warn"
    window: int = 10


@dataclass
class PolicyRatioDrift:
    """Mean of the last `span` points further than `deviation` from 1.0 (seed 002 §18.3.4)."""

    action: Action = "warn"
    span: int = 1
    deviation: float = 0.5


@dataclass
class TrainEvalDivergence:
    """Over the last `window` evaluations, train reward gains more than `min_train_gain` while eval
    reward gains less than `max_eval_gain` (seed 002 §18.3.7). Gain: mean of the second half of
    the window minus mean of its first half; the train value paired with an evaluation is the
    mean train reward logged since the previous evaluation."""

    action: Action = "warn"
    window: int = 4
    min_train_gain: float = 0.05
    max_eval_gain: float = 0.01


@dataclass
class HealthMonitorConfig:
    """All rules; `enabled: false` (`monitor=off`) turns every one of them off."""

    enabled: bool = True
    entropy_collapse: EntropyCollapse = field(default_factory=EntropyCollapse)
    entropy_drop: EntropyDrop = field(default_factory=EntropyDrop)
    entropy_decline: EntropyDecline = field(default_factory=EntropyDecline)
    # Seed 000 table 16-6 (healthy < 30%, alarm > 50%); 10 points as seed 002 §18.3.1's code.
    zero_std_groups: AboveThreshold = field(default_factory=lambda: AboveThreshold(span=10, threshold=0.5))
    # Seed 002 §18.3.2 / §18.3.7: a zero-advantage ratio above 30%.
    zero_advantage: AboveThreshold = field(default_factory=lambda: AboveThreshold(span=10, threshold=0.3))
    length_growth: LengthGrowth = field(default_factory=LengthGrowth)
    length_near_max: LengthNearMax = field(default_factory=LengthNearMax)
    reward_plateau: RewardPlateau = field(default_factory=RewardPlateau)
    grad_norm_vanishing: GradNormVanishing = field(default_factory=GradNormVanishing)
    kl_rising: Rising = field(default_factory=Rising)
    policy_ratio_drift: PolicyRatioDrift = field(default_factory=PolicyRatioDrift)
    clip_ratio_rising: Rising = field(default_factory=Rising)
    clip_ratio_zero: ClipRatioZero = field(default_factory=ClipRatioZero)
    # Seed 000 §16.6.1: alarm when the mean |logp_train - logp_inference| exceeds 0.01.
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
    if isinstance(settings, Rising | RewardPlateau | TrainEvalDivergence) and settings.window < 2:
        raise ConfigError(f"monitor.{rule}.window={settings.window} must be >= 2: the rule follows a trend")
    for name in ("fall", "margin"):
        if name in own and not 0 < own[name] < 1:
            raise ConfigError(f"monitor.{rule}.{name}={own[name]} must lie strictly between 0 and 1")
