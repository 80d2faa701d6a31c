"""Thresholds, windows and actions of the health-monitor rules (the `monitor=` Hydra node).

Every rule has its own settings block and an `action`: `log` (recorded only), `warn` (shown to
the user) or `halt` (stop training after a checkpoint). Windows counted in *logged points* are
`span`/`window`; the one window counted in *training steps* is `window_steps`. The defaults
here equal `conf/monitor/default.yaml` (a test holds them together).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any, Literal, get_type_hints

from align_kit.core.component import buildable
from align_kit.core.errors import ConfigError
from align_kit.core.fields import field_facts, knob
from align_kit.monitor.samples import SampleSettings

Action = Literal["log", "warn", "halt"]


def _action(default: str) -> Any:
    return knob(
        default,
        help="What the alert does: log (recorded in alerts.jsonl only), warn (also shown) or halt (stop training "
        "after a checkpoint).",
    )


def _span(default: int, source: str | None = None) -> Any:
    return knob(default, help="Logged points averaged on each side of the comparison, >= 1.", source=source, ge=1)


def _fall(default: float, source: str) -> Any:
    return knob(
        default, help="The share of entropy lost that alerts, strictly between 0 and 1.", source=source, gt=0, lt=1
    )


def _progress(default: float) -> Any:
    return knob(
        default,
        ge=0,
        help="How far the accuracy (else the reward) must gain between the same first and last points, as a share "
        "of its range, for falling entropy to read as convergence (a policy becoming right), not collapse.",
        source="16.6, figure 16-11; 18.3.1",
    )


@dataclass
class EntropyCollapse:
    """Mean of the last `span` points below (1 - fall) x the mean of the first `span` (the
    policy-optimization chapter, 18.3.1) while the accuracy (else the reward) over the same points stalls or falls:
    entropy falling while it gains more than `rise` is a policy becoming right (16.6, figure 16-11), the
    `entropy_converging` note. A run shorter than 2 x `span` is judged at its end on halves of its points."""

    action: Action = _action("warn")
    span: int = _span(10, "18.3.1")
    fall: float = _fall(0.5, "18.3.1")
    rise: float = _progress(0.05)


@dataclass
class EntropyDrop:
    """The smoothed entropy (mean of the last `span` points) below (1 - fall) x the highest smoothed
    value of the last `window_steps` training steps: "entropy falls more than 50 % within 100 steps"
    (the policy-optimization chapter, 18.3.7). Smoothed on both sides, so one noisy batch neither
    raises the reference nor trips the alarm."""

    action: Action = _action("warn")
    span: int = _span(10)
    rise: float = _progress(0.05)
    window_steps: int = knob(
        100,
        help="Training steps back to the highest smoothed entropy the latest is compared with.",
        source="18.3.7",
        ge=1,
    )
    fall: float = _fall(0.5, "18.3.7")


@dataclass
class EntropyDecline:
    """The smoothed entropy (mean of the last `span` points) below (1 - fall) x the mean of the first
    `span` points (the policy-optimization chapter, 18.3.3: a healthy run loses at most 40 %)."""

    action: Action = _action("log")
    span: int = _span(10)
    fall: float = _fall(0.4, "18.3.3")


@dataclass
class AboveThreshold:
    """Mean of the last `span` points above `threshold`."""

    action: Action = _action("warn")
    span: int = _span(1)
    threshold: float = knob(0.0, ge=0, help="The level the recent mean must exceed to alert, >= 0.")


@dataclass
class RisingShare:
    """A share that "keeps rising beyond `threshold`" (the policy-optimization chapter, 18.3.2): the
    mean of the last `span` points above `threshold`, and over the last `window` points the mean
    of the second half above the mean of the first half by more than `rise`."""

    action: Action = _action("warn")
    span: int = _span(10)
    threshold: float = knob(0.3, ge=0, help="The share the recent mean must exceed (30 %).", source="18.3.2")
    window: int = knob(40, help="Logged points whose two halves are compared, >= 2.", source="18.3.2", ge=2)
    rise: float = knob(
        0.15,
        ge=0,
        help="How far the second half's mean must exceed the first half's; healthy runs rose at most +0.10 "
        "(benchmarks/alert_calibration.py).",
    )


@dataclass
class LengthGrowth:
    """Mean of the last `span` points above `factor` x the mean of the first `span` (the
    policy-optimization chapter, 18.3.1)."""

    action: Action = _action("warn")
    span: int = _span(10, "18.3.1")
    factor: float = knob(
        3.0, gt=0, help="The growth of the mean completion length that alerts (3x the start).", source="18.3.1"
    )


@dataclass
class LengthNearMax:
    """Mean of the last `span` points at or above (1 - margin) x max_completion_length (the
    training-stability chapter, table 16-6); or, whether the budget is known or not, the truncated
    share (`completions/clipped_ratio`) averaging at least `clipped` over the last `clipped_span`
    points: most completions end at the budget."""

    action: Action = _action("warn")
    span: int = _span(1)
    margin: float = knob(
        0.05,
        gt=0,
        lt=1,
        help="Alert when the mean length is within this share of trainer.max_completion_length, strictly between 0 "
        "and 1.",
        source="16.6.5, table 16-6",
    )
    clipped: float = knob(
        0.5,
        gt=0,
        le=1,
        help="The mean truncated share at or above which completions run into the budget (most of them cut), in "
        "(0, 1]; `length_pinned` is its failing level (0.9).",
    )
    clipped_span: int = knob(
        10,
        ge=1,
        help="Logged points the truncated share is averaged over (a step of a few completions cuts 0 or 1/2 of "
        "them by chance); a shorter run is judged at its end on all of its points.",
        source="18.3.1",
    )


@dataclass
class RewardPlateau:
    """Reward flat over the last `window` points while below reward_max (the training-stability
    chapter, table 16-6).

    Flat: |mean of the window's second half - mean of its first half| < `tolerance` (halves, not
    max - min, so per-step sampling noise does not hide a plateau). Below: the window's mean is
    at most reward_max - `gap` and in the lower `highest` share of the range, while the accuracy (when
    logged) neither averages above `highest` nor rises by more than `tolerance` between the halves.
    A history shorter than `window` is judged at its end: a plateau when it holds at least `fewest`
    points and every one lies within `tolerance` of the others (on so few points the halves are
    noise); not one when its points spread wider, or its mean is above the ceiling."""

    action: Action = _action("warn")
    window: int = knob(
        100,
        ge=2,
        help="Logged points whose two halves are compared, >= 2; over 50, a slowly rising healthy reward read as "
        "flat within the noise.",
        source="16.6.5, table 16-6",
    )
    tolerance: float = knob(0.02, ge=0, help="The largest change between the halves' means that counts as flat.")
    gap: float = knob(0.05, ge=0, help="How far below the attainable maximum the mean must stay to count as stuck.")
    highest: float = knob(
        0.5,
        gt=0,
        le=1,
        help="The share of the reward's range (and the accuracy) the window's mean must stay below to count as "
        "stuck (1: no bound): a reward flat in the upper half of its range, or an accuracy above it, is a run that "
        "learned.",
    )
    fewest: int = knob(
        5,
        ge=2,
        help="The fewest points a history shorter than `window` must hold, every one within `tolerance` of the "
        "others, for the end of the run to call it a plateau.",
    )


@dataclass
class GradNormVanishing:
    """Every one of the last `window` points below `floor` (the training-stability chapter, table 16-6)."""

    action: Action = _action("warn")
    window: int = knob(10, help="Logged points that must all be below floor, >= 1.", source="16.6.5, table 16-6", ge=1)
    floor: float = knob(1e-4, ge=0, help="The gradient norm below which an update counts as vanished.")


@dataclass
class Rising:
    """Strictly increasing over the last `window` points."""

    action: Action = _action("warn")
    window: int = knob(10, help="Logged points that must each rise above the one before, >= 2.", source="18.3.7", ge=2)


@dataclass
class ClipRatioZero:
    """The last `window` points exactly zero after `window` points that clipped `min_before` of the
    tokens on average (the policy-optimization chapter, 18.3.4). A lone clipped token in an almost
    on-policy run is not a drop."""

    action: Action = _action("warn")
    window: int = knob(
        10, help="Logged points of zero clipping, after as many that clipped, >= 1.", source="18.3.4", ge=1
    )
    min_before: float = knob(
        1e-3, ge=0, help="The mean clip ratio the earlier window must have had for the drop to zero to count."
    )


@dataclass
class PolicyRatioDrift:
    """Mean of the last `span` points further than `deviation` from 1.0 (the policy-optimization chapter, 18.3.4)."""

    action: Action = _action("warn")
    span: int = _span(1)
    deviation: float = knob(
        0.5, gt=0, help="How far the mean policy ratio may move from 1.0 before it alerts.", source="18.3.4"
    )


@dataclass
class TrainEvalDivergence:
    """Over the last `window` evaluations, train reward gains more than `min_train_gain` while eval
    reward gains less than `max_eval_gain` (the policy-optimization chapter, 18.3.7). Gain: mean of the second half of
    the window minus mean of its first half; the train value paired with an evaluation is the
    mean train reward logged since the previous evaluation."""

    action: Action = _action("warn")
    window: int = knob(4, help="Evaluations whose two halves are compared, >= 2.", source="18.3.7", ge=2)
    min_train_gain: float = knob(0.05, ge=0, help="The train reward's gain that must be exceeded, >= 0.")
    max_eval_gain: float = knob(
        0.01, help="The eval reward's gain it must stay below; may be negative: only when eval reward falls."
    )


@dataclass
class RewardDecline:
    """The smoothed reward (mean of the last `span` points) more than `drop` x reward_max below its
    best smoothed value so far: the reward "keeps decaying and finally collapses" (the
    training-stability chapter, 16.6.1, figure 16-10)."""

    action: Action = _action("warn")
    span: int = _span(20)
    drop: float = knob(
        0.1,
        gt=0,
        lt=1,
        help="The fall below the best smoothed reward, as a share of the attainable maximum, that alerts; strictly "
        "between 0 and 1.",
        source="16.6.1, figure 16-10",
    )


@dataclass
class RewardCollapse:
    """The format reward rising while correctness stays flat (the policy-optimization chapter,
    18.3.2): over the last `window` points (generation steps), the format reward's gain (mean of
    the second half minus mean of the first half) above `min_format_gain` and correctness's gain
    below `max_correctness_gain`. `format_reward` / `correctness_reward` name the reward nodes
    (TRL logs them as rewards/<name>/mean)."""

    action: Action = _action("warn")
    window: int = knob(20, help="Logged points whose two halves are compared, >= 2.", source="18.3.2", ge=2)
    min_format_gain: float = knob(0.1, ge=0, help="The format reward's gain that must be exceeded, >= 0.")
    max_correctness_gain: float = knob(0.02, help="The correctness reward's gain it must stay below; may be negative.")
    format_reward: str = knob("format", help="The reward node that scores the format (rewards/<name>/mean).")
    correctness_reward: str = knob("correctness", help="The reward node that scores correctness.")


@dataclass
class EntropyExploding:
    """The smoothed entropy (mean of the last `span` points) above `factor` x the mean of the first `span`: entropy
    that "oscillates violently and shoots above 4.0" before the run falls apart (the policy-optimization chapter,
    18.3.7, figure 18-8: truncated samples' noisy rewards without overlong filtering). Relative to the run's own
    start, so it reads the same for a 150k vocabulary and a tiny model."""

    action: Action = _action("warn")
    span: int = _span(10)
    factor: float = knob(
        2.0,
        gt=1,
        help="The growth of the smoothed entropy over its start that alerts, > 1 (figure 18-8 rises about 8x, from "
        "0.5 to above 4.0; in the doctor's labelled set the healthy runs rose at most 1.20x, the runs collapsing "
        "from too high a learning rate 2.5x).",
        source="18.3.7, figure 18-8",
    )
    truncated: float = knob(
        0.1,
        ge=0,
        le=1,
        help="The truncated share (completions/clipped_ratio) over the span from which the advice puts overlong "
        "filtering first (figure 18-8's cause); below it, a lower learning rate comes first.",
    )


@dataclass
class LengthPinned:
    """Completions pinned at the length budget: the truncated share (`completions/clipped_ratio`) averages at least
    `clipped` over the last `span` points, and, when max_completion_length is known and the mean length is logged,
    the mean length is within `margin` of it. A run whose answers are all cut trains on truncated samples' noisy
    rewards (the policy-optimization chapter, 18.3.7, figure 18-8; the training-stability chapter, table 16-6). A
    level rule: a run shorter than `span` is judged at its end on the points there are."""

    action: Action = _action("warn")
    span: int = _span(10, "18.3.1")
    clipped: float = knob(
        0.9,
        help="The mean truncated share that counts as pinned, strictly between 0 and 1.",
        source="18.3.7",
        gt=0,
        lt=1,
    )
    margin: float = knob(
        0.05,
        gt=0,
        lt=1,
        help="How close to max_completion_length the mean length must be (a share of it), strictly between 0 and 1.",
        source="16.6.5, table 16-6",
    )


@dataclass
class LengthCollapse:
    """Completions shrinking to a few tokens while entropy collapses: over the first and the last `span` points,
    the mean length falls to at most `few` tokens and to at most `shrink` x its start, while entropy falls below
    (1 - fall) x its start (the policy answers with a few fixed tokens; 18.3.1's collapse with its "repetitive"
    outputs). A run shorter than 2 x `span` is judged at its end on halves of its points (3 at least)."""

    action: Action = _action("warn")
    span: int = _span(10, "18.3.1")
    few: float = knob(
        10.0, gt=0, help="The mean completion length, in tokens, at or below which answers are a few tokens."
    )
    shrink: float = knob(
        0.25, gt=0, lt=1, help="The share of its start the mean length must fall to, strictly between 0 and 1."
    )
    fall: float = _fall(0.5, "18.3.1")


@dataclass
class AllTruncated:
    """Every completion cut at the length budget: the truncated share (`completions/clipped_ratio`) at least
    `clipped` on each of the last `rows` rows, or (without the share) the mean length at the budget on each; or on
    a single row at that share while entropy fell below (1 - entropy_fall) x its first value (a truncation
    collapse). TRL's default max_completion_length cuts many reasoning runs this way without a word."""

    action: Action = _action("warn")
    rows: int = knob(2, ge=1, help="Consecutive logged rows that must all be cut, >= 1.")
    clipped: float = knob(0.99, gt=0, le=1, help="The truncated share that counts as every completion, in (0, 1].")
    entropy_fall: float = knob(
        0.9, gt=0, lt=1, help="The share of entropy lost that makes one fully cut row a collapse, in (0, 1)."
    )


@dataclass
class SetupRule:
    """A rule on the run's composition, judged once from what the run states (its RunContext)."""

    action: Action = _action("warn")


@dataclass
class SamplerGapDrift:
    """The sampler and the trainer drifting apart (the training-stability chapter, 16.6.1: precision and routing
    differences between the inference engine and the trainer): the mean importance-sampling ratio trainer/sampler
    (`sampling/importance_sampling_ratio/mean`) over the last `span` points further than `ratio_deviation` from 1,
    or the mean |logp gap| (`mismatch/logp_abs_diff/mean`, `sampling/sampling_logp_difference/mean`) rising: over
    the last `window` points, its second half's mean above its first half's by more than `rise` x the first
    half's, and above `min_gap`."""

    action: Action = _action("warn")
    span: int = _span(10)
    ratio_deviation: float = knob(
        0.05,
        gt=0,
        help="How far the smoothed IS ratio may move from 1.0; 16.6.1's 0.01 logp gap is a ratio of about 1 +- 0.01.",
        source="16.6.1",
    )
    window: int = knob(20, help="Logged points whose two halves are compared, >= 2.", source="16.6.1", ge=2)
    rise: float = knob(
        1.0, gt=0, help="The relative growth of the logp gap between the halves that alerts (1.0: it doubled)."
    )
    min_gap: float = knob(
        0.005,
        ge=0,
        help="The gap's second-half mean must also exceed this: half 16.6.1's 0.01 alarm, so a gap doubling from "
        "rounding noise is not a drift.",
        source="16.6.1",
    )


@dataclass
class KlRisingFlatReward:
    """The KL to the reference rising while the reward stays flat (the policy-optimization chapter, 18.3.7's row
    "KL keeps rising", and 18.3.5: the policy moves away from the reference without earning reward). KL starts at
    0 (the policy is the reference) and rises while the policy leaves it: the first `window` points are that start,
    not a drift, so the rule judges from `2 x window` points on. Over the last `window` points: KL's least-squares
    trend rises with a t-statistic of at least `min_t`, its second-half mean exceeds (1 + rise) x its first half's,
    and the reward's halves lie within `tolerance` x (reward_max - reward_min) of each other."""

    action: Action = _action("warn")
    window: int = knob(
        40,
        ge=2,
        help="Logged points whose trend is read, >= 2; also the start-up skipped. A healthy run with kl=constant "
        "(benchmarks/alert_calibration.py) rose from 0 for about 30 logged points, then held.",
        source="18.3.7",
    )
    rise: float = knob(1.0, gt=0, help="The relative growth of KL between the halves that alerts (1.0: doubled).")
    min_t: float = knob(
        3.0,
        gt=0,
        help="The least t-statistic of KL's trend over the window (noise alone rarely reaches 3; the healthy "
        "kl=constant run peaked at 1.7 after its start-up).",
    )
    tolerance: float = knob(
        0.05,
        ge=0,
        help="The largest change of the reward between the halves, as a share of its range, that counts as flat.",
        source="16.6.5, table 16-6",
    )
    skip_start: bool = knob(
        True,
        help="Skip the first `window` points as KL's start from 0; the end of a run shorter than 2 x window reads "
        "its whole history from its first non-zero KL instead, where a rise counts only once the KL's second half "
        "averages at least `far`.",
    )
    far: float = knob(
        1.0,
        gt=0,
        help="The KL (nats per token) whose second-half mean makes a rise read over a whole short history a drift "
        "and not the start-up from the reference: a healthy KL term holds the policy far below it.",
    )


@dataclass
class NoSignal:
    """No learning signal at all: every reward of the last `span` points within `floor` x (reward_max - reward_min)
    of reward_min, with the flat-group share averaging at least `flat` (every group equally wrong: zero advantages,
    zero gradient; the training-stability chapter, 16.6.5). A level rule: judged at the end of a run shorter than
    `span`, even a single row."""

    action: Action = _action("warn")
    span: int = _span(10, "18.3.1")
    floor: float = knob(
        0.01, ge=0, help="How close to reward_min each reward must be, as a share of the reward range.", source="16.6.5"
    )
    flat: float = knob(
        0.99,
        help="The flat-group share that counts as every group, strictly between 0 and 1.",
        source="16.6.5",
        gt=0,
        lt=1,
    )
    rows: int = knob(
        10,
        ge=2,
        help="Consecutive rows with zero reward spread (reward_std 0, or every group flat with loss and grad_norm "
        "0) that are no signal whatever the reward scale, >= 2; 10 as the span: with a few completions per step "
        "(a notebook's 1 prompt x 2-8), 2 or more flat rows in a row come and go in runs that learn.",
    )


@dataclass
class NonFinite:
    """A NaN or infinite value of any of `metrics` (the alert names the first in this order that is non-finite; a
    non-finite entropy is itself a failure sign, and a non-finite KL to the reference is an infinite log-ratio
    between the policy's and the reference's log-probabilities, whether or not the loss still reads it). `halt`
    stops without saving the broken weights."""

    action: Action = _action("halt")
    metrics: list[str] = knob(
        default_factory=lambda: ["loss", "grad_norm", "entropy", "kl"],
        help="The metrics watched; the alert names the first of them that is non-finite.",
    )


def _rule(default_factory: Any, help: str, source: str | None = None) -> Any:
    return knob(default_factory=default_factory, help=help, source=source)


@buildable
@dataclass
class HealthMonitorConfig:
    """All rules; `enabled: false` (`monitor=off`) turns every one of them off."""

    enabled: bool = knob(True, help="false (monitor=off) turns every rule off.")
    non_finite: NonFinite = _rule(
        NonFinite, "A NaN or infinite loss, grad norm, entropy or KL: halts, keeping the last finite checkpoint."
    )
    entropy_collapse: EntropyCollapse = _rule(
        EntropyCollapse, "Entropy fell by more than `fall` from its start (the chapter's own check).", "18.3.1"
    )
    entropy_converging: EntropyCollapse = _rule(
        lambda: EntropyCollapse(action="log"),
        "Entropy fell by more than `fall` while the accuracy (else the reward) rose: convergence, a note.",
        "16.6, figure 16-11",
    )
    entropy_drop: EntropyDrop = _rule(
        EntropyDrop, "Entropy falls more than 50 % within 100 steps (the chapter's alert table).", "18.3.7"
    )
    entropy_decline: EntropyDecline = _rule(
        EntropyDecline, "Entropy below 60 % of its start: a healthy run loses at most 40 %.", "18.3.3"
    )
    # The training-stability chapter's table 16-6 (16.6.5: healthy < 30 %, alarm > 50 %), over 10
    # points as the policy-optimization chapter's code (18.3.1).
    zero_std_groups: AboveThreshold = _rule(
        lambda: AboveThreshold(span=10, threshold=0.5),
        "The share of groups whose rewards are all equal (groups/flat_fraction, else TRL's frac_reward_zero_std) "
        "above 50 %; healthy runs stay below 30 %.",
        "16.6.5, table 16-6",
    )
    zero_advantage: RisingShare = _rule(
        RisingShare, "The share of zero advantages (adv/zero_std_fraction) keeps rising beyond 30 %.", "18.3.2"
    )
    reward_collapse: RewardCollapse = _rule(
        RewardCollapse, "The format reward rises while correctness stays flat (reward hacking of the format).", "18.3.2"
    )
    reward_decline: RewardDecline = _rule(
        RewardDecline, "The reward keeps decaying below its best and finally collapses.", "16.6.1, figure 16-10"
    )
    length_growth: LengthGrowth = _rule(LengthGrowth, "The mean completion length grew `factor` times.", "18.3.1")
    length_near_max: LengthNearMax = _rule(
        LengthNearMax, "Completions run into the length budget.", "16.6.5, table 16-6"
    )
    reward_plateau: RewardPlateau = _rule(
        RewardPlateau, "The reward is flat while below its attainable maximum.", "16.6.5, table 16-6"
    )
    grad_norm_vanishing: GradNormVanishing = _rule(
        GradNormVanishing, "Every recent gradient norm below `floor`: updates stopped.", "16.6.5, table 16-6"
    )
    kl_rising: Rising = _rule(Rising, "The KL to the reference rises step after step.", "18.3.7")
    policy_ratio_drift: PolicyRatioDrift = _rule(
        PolicyRatioDrift, "The mean policy ratio (policy_ratio/mean) drifts away from 1.0.", "18.3.4"
    )
    # Mean |ratio - 1| over completion tokens (policy_ratio/abs_dev), smoothed: updates that move
    # tokens a large share of the way to the clip bounds (the policy-optimization chapter, 18.3.4).
    policy_ratio_noise: AboveThreshold = _rule(
        lambda: AboveThreshold(span=10, threshold=0.1),
        "The mean |ratio - 1| over completion tokens (policy_ratio/abs_dev) above 0.1: updates move tokens far "
        "toward the clip bounds.",
        "18.3.4",
    )
    clip_ratio_rising: Rising = _rule(
        Rising, "The clipped share (clip_ratio/region_mean) rises step after step.", "18.3.4"
    )
    clip_ratio_zero: ClipRatioZero = _rule(
        ClipRatioZero, "Clipping stopped after it had been clipping: the update became on-policy.", "18.3.4"
    )
    # The training-stability chapter, 16.6.1: alarm when the mean |logp_train - logp_inference|
    # exceeds 0.01 (align_kit's mismatch metric, or TRL's when rollouts come from vLLM).
    logp_mismatch: AboveThreshold = _rule(
        lambda: AboveThreshold(threshold=0.01),
        "The mean |logp_train - logp_inference| (mismatch/logp_abs_diff/mean, or TRL's with vLLM) above 0.01.",
        "16.6.1",
    )
    entropy_exploding: EntropyExploding = _rule(
        EntropyExploding,
        "Entropy above `factor` x its start: it oscillates and shoots up before the run falls apart.",
        "18.3.7, figure 18-8",
    )
    length_pinned: LengthPinned = _rule(
        LengthPinned,
        "Completions pinned at the length budget: the truncated share near 1 (and the mean length at the budget, "
        "when it is known).",
        "18.3.7, figure 18-8",
    )
    length_collapse: LengthCollapse = _rule(
        LengthCollapse, "Completions shrink to a few tokens while entropy collapses.", "18.3.1"
    )
    all_truncated: AllTruncated = _rule(
        AllTruncated,
        "Every completion cut at the length budget (the truncated share at 1, or the length at the budget).",
        "18.3.7, figure 18-8",
    )
    sampler_gap_drift: SamplerGapDrift = _rule(
        SamplerGapDrift,
        "The IS ratio trainer/sampler drifts from 1, or the sampler's logp gap rises.",
        "16.6.1",
    )
    is_correction_filtered: SetupRule = _rule(
        SetupRule,
        "An importance-sampling correction while top_p < 1, top_k > 0 or min_p > 0 filter the sampler: the sampler's "
        "log-probs are renormalised over the kept tokens, so the ratio is scaled by the kept mass (TRL issue 6789).",
        "16.6.1",
    )
    moe_aux_loss: SetupRule = _rule(
        SetupRule,
        "An MoE model's router auxiliary (load-balancing) loss on during RL: it trains the router apart from the "
        "reward, so routing moves between sampling and training.",
        "16.6.1",
    )
    kl_rising_flat_reward: KlRisingFlatReward = _rule(
        KlRisingFlatReward, "The KL to the reference rises while the reward stays flat.", "18.3.7"
    )
    no_signal: NoSignal = _rule(
        NoSignal, "Every reward at its minimum and every group flat: nothing to learn from.", "16.6.5"
    )
    train_eval_divergence: TrainEvalDivergence = _rule(
        TrainEvalDivergence,
        "Train reward gains while eval reward does not: overfitting the training prompts.",
        "18.3.7",
    )

    samples: SampleSettings = knob(
        default_factory=SampleSettings,
        help="The completions kept for the alerts: each alert's groups in samples/ beside alerts.jsonl, and an "
        "optional periodic sample (align_kit/monitor/samples.py).",
    )

    def __post_init__(self) -> None:
        if isinstance(self.samples, Mapping):
            try:
                self.samples = SampleSettings(**self.samples)
            except TypeError as error:
                raise ConfigError(f"monitor.samples: {error}; check its keys") from None
        _check("samples", self.samples)
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
            _check(rule, block)

    @staticmethod
    def rule_names() -> list[str]:
        return [f.name for f in fields(HealthMonitorConfig) if f.name not in ("enabled", "samples")]


def _check(rule: str, settings: Any) -> None:
    """Each value of a rule's block against its field's facts: its choices (`Literal`), an integer where the field
    is one, its range (`knob`), in the schema's words (align_kit.experiment.schema)."""
    hints = get_type_hints(type(settings))
    for facts in field_facts(type(settings)):
        value, key = getattr(settings, facts.name), f"monitor.{rule}.{facts.name}"
        if facts.choices is not None and value not in facts.choices:
            raise ConfigError(f"{key}={value!r}: expected one of [{', '.join(facts.choices)}]")
        integer = hints[facts.name] is int
        if integer and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"{key}={value!r}: expected an integer")
        if facts.bounds is not None and not facts.bounds.holds(value):
            raise ConfigError(f"{key}={value!r}: expected {facts.bounds.describe(integer)}")
        if hints[facts.name] == list[str] and not (value and all(isinstance(item, str) and item for item in value)):
            raise ConfigError(f"{key}={value!r}: expected a non-empty list of metric names")
