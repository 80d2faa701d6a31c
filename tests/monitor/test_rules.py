"""Health-monitor rules on synthetic metric streams: which rule fires at which step, by hand.

Thresholds are worked out in the comments from conf/monitor/{default,strict}.yaml; values are
chosen away from the boundaries (or exactly on them where the comparison's strictness matters).
"""

from __future__ import annotations

import json

import pytest

from align_kit.monitor import RULES, Alert, HealthMonitor, HealthMonitorConfig
from align_kit.monitor.rules import RunContext
from align_kit.monitor.rules.fixes import in_terms
from align_kit.monitor.settings import AboveThreshold, EntropyDrop, RewardPlateau

Stream = list[tuple[int, dict[str, float | None]]]


def series(metric: str, values: list[float | None], first_step: int = 1, every: int = 1) -> Stream:
    return [(first_step + i * every, {metric: value}) for i, value in enumerate(values)]


def fired(monitor: HealthMonitor, stream: Stream) -> list[tuple[int, str]]:
    return [(alert.step, alert.rule) for step, metrics in stream for alert in monitor.update(step, metrics)]


def monitor_for(config: HealthMonitorConfig, max_completion_length: int | None = 100, reward_max: float = 1.0):
    return HealthMonitor(config, max_completion_length=max_completion_length, reward_max=reward_max)


# Entropy: steps 1-10 at 1.0, steps 11-20 at 0.5625, from step 21 on 0.4375 (dyadic: exact sums).
ENTROPY = series("entropy", [1.0] * 10 + [0.5625] * 10 + [0.4375] * 10)


def test_entropy_rules_default(configs):
    # Smoothed over 10 points (changed from single values: one noisy batch tripped entropy_drop on
    # healthy runs). At step 10 + j (j <= 10) the last 10 average 1 - 0.04375 j; at 20 + j, 0.5625 - 0.0125 j.
    # entropy_decline (fall 0.4, log): < 0.6 x 1.0 first at j = 10 (0.5625; j = 9 gives 0.60625) -> step 20.
    # entropy_collapse (first 10 vs last 10, fall 0.5) and entropy_drop (10-point mean vs its maximum 1.0 in
    #   the 100-step window, fall 0.5): < 0.5 first at step 26 (0.4875; step 25 gives exactly 0.5).
    monitor = monitor_for(configs["default"])
    alerts = [alert for step, metrics in ENTROPY for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.action) for a in alerts] == [
        (20, "entropy_decline", "log"),
        (26, "entropy_collapse", "warn"),
        (26, "entropy_drop", "warn"),
    ]
    assert alerts[1].values == {"early_mean": 1.0, "recent_mean": 0.4875, "threshold": 0.5}
    assert alerts[2].values == {"latest": 0.4875, "window_max": 1.0, "threshold": 0.5}


def test_entropy_rules_strict(configs):
    # entropy_decline fall 0.3: 1 - 0.04375 j < 0.7 first at j = 7 (0.69375) -> step 17.
    # entropy_collapse fall 0.4: first evaluable at step 20 (20 points): 0.5625 < 0.6.
    # entropy_drop fall 0.4 (a halt): 1 - 0.04375 j < 0.6 first at j = 10 -> step 20.
    monitor = monitor_for(configs["strict"])
    alerts = [alert for step, metrics in ENTROPY for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.action) for a in alerts] == [
        (17, "entropy_decline", "warn"),
        (20, "entropy_collapse", "warn"),
        (20, "entropy_drop", "halt"),
    ]


def test_one_noisy_batch_does_not_trip_entropy_drop(configs):
    # The healthy-run case: entropy steady at 0.125 with one batch at 0.03125 (step 49). The 10-point
    # mean there is (9 x 0.125 + 0.03125)/10 = 0.115625, above 0.5 x 0.125. A real fall to 0.03125 from
    # step 51 on: the mean at 50 + j is 0.125 - 0.009375 j < 0.0625 first at j = 7 -> step 57.
    noisy = series("entropy", [0.125] * 48 + [0.03125] + [0.125] * 20)
    assert fired(monitor_for(configs["default"]), noisy) == []
    # entropy_collapse (first-10 mean 0.125, same threshold) fires with it; entropy_decline (log, fall
    # 0.4: < 0.075) at j = 6 (0.06875).
    falling = series("entropy", [0.125] * 50 + [0.03125] * 10)
    assert fired(monitor_for(configs["default"]), falling) == [
        (56, "entropy_decline"),
        (57, "entropy_collapse"),
        (57, "entropy_drop"),
    ]


def test_entropy_drop_window_counts_training_steps():
    # Logged every 50 steps, span 2: smoothed values at steps 50..250 are 1.0, 0.75, 0.5, 0.475, 0.45.
    # At step 150 the 100-step window (steps >= 50) holds 1.0: 0.5 is not below 0.5 x 1.0.
    # At step 200 it holds steps 100-200 (max 0.75, threshold 0.375): 0.475 stays above, although a
    # whole-history maximum (1.0, threshold 0.5) would fire. Step 250: max 0.5, threshold 0.25.
    config = HealthMonitorConfig(entropy_drop=EntropyDrop(span=2, window_steps=100, fall=0.5))
    stream = series("entropy", [1.0, 1.0, 0.5, 0.5, 0.45, 0.45], first_step=0, every=50)
    assert [a for a in fired(monitor_for(config), stream) if a[1] == "entropy_drop"] == []
    # Then 0.2 at steps 300 and 350: smoothed 0.325 at 300 (window max 0.475, threshold 0.2375) does
    # not fire; 0.2 at 350 (window steps 250-350, max 0.45, threshold 0.225) does.
    longer = stream + series("entropy", [0.2, 0.2], first_step=300, every=50)
    assert [a for a in fired(monitor_for(config), longer) if a[1] == "entropy_drop"] == [(350, "entropy_drop")]


def test_fires_once_per_episode_and_rearms_after_recovery():
    config = HealthMonitorConfig(zero_std_groups=AboveThreshold(span=1, threshold=0.5))
    monitor = monitor_for(config)
    # > 0.5 at steps 2, 3, 4 (one episode), 0.4 at step 5 ends it, 0.9 at step 6 opens a new one.
    stream = series("frac_reward_zero_std", [0.2, 0.6, 0.7, 0.8, 0.4, 0.9, 0.9])
    alerts = [alert for step, metrics in stream for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule) for a in alerts] == [(2, "zero_std_groups"), (6, "zero_std_groups")]
    assert json.loads(alerts[0].to_json()) == {
        "step": 2,
        "rule": "zero_std_groups",
        "action": "warn",
        "values": {"recent_mean": 0.6, "threshold": 0.5},
        "message": "frac_reward_zero_std mean 0.600 > 0.500: the batch lost its learning signal",
        "advice": "sampling=dynamic (drop groups whose rewards are all equal, DAPO); advantage=ngrpo (a virtual "
        "full-score sample gives all-equal groups a signal); check the reward gives signal: score a few completions "
        "by hand (the reward= nodes)",
        "metric": "frac_reward_zero_std",  # new field: the metric the rule read
        # Newer fields: the decision read one point (span 1), at step 2; no reward logged, so no difficulty.
        "severity": "warning",
        "first_step": 2,
        "points": 1,
        "fixes": ["dynamic_sampling", "ngrpo", "fix_reward"],
        "words": {"difficulty": "", "why": ""},
    }


def test_absent_metric_keeps_the_episode_open():
    config = HealthMonitorConfig(zero_std_groups=AboveThreshold(span=1, threshold=0.5))
    monitor = monitor_for(config)
    # Step 2 carries no usable value (None, NaN, or the key missing): the episode opened at step 1
    # stays open, so 0.9 at step 5 raises nothing new.
    stream: Stream = [
        (1, {"frac_reward_zero_std": 0.9}),
        (2, {"frac_reward_zero_std": None}),
        (3, {"frac_reward_zero_std": float("nan")}),
        (4, {"loss": 0.1}),
        (5, {"frac_reward_zero_std": 0.9}),
    ]
    assert fired(monitor, stream) == [(1, "zero_std_groups")]


def test_zero_std_groups_default_vs_strict(configs):
    # Default span 10, > 0.5: nine 1.0s are not enough points; the 10th (mean 1.0) fires at step 10.
    assert fired(monitor_for(configs["default"]), series("frac_reward_zero_std", [1.0] * 12)) == [
        (10, "zero_std_groups")
    ]
    # A steady 0.4: default never (0.4 <= 0.5); strict (span 5, > 0.3) at step 5.
    steady = series("frac_reward_zero_std", [0.4] * 12)
    assert fired(monitor_for(configs["default"]), steady) == []
    assert fired(monitor_for(configs["strict"]), steady) == [(5, "zero_std_groups")]


def test_zero_advantage_fires_on_a_rising_share_only(configs):
    # Changed from "10-point mean > 0.3": the default run's share hovers at 0.2-0.35 without rising
    # (a steady third of the groups are flat), and the policy-optimization chapter (18.3.2) names a
    # share that keeps rising beyond 30 %. A steady 0.375 therefore never fires.
    assert fired(monitor_for(configs["default"]), series("adv/zero_std_fraction", [0.375] * 60)) == []
    # 40 points at 0.25, then 0.5625. Default (span 10, > 0.3; window 40, rise > 0.15): at step 40 + j the
    # window's first half is all 0.25 and its second half averages 0.25 + 0.015625 j: the change exceeds
    # 0.15 first at j = 10 (0.15625; j = 9 gives 0.140625), the last 10 all 0.5625 > 0.3 -> step 50.
    rising = series("adv/zero_std_fraction", [0.25] * 40 + [0.5625] * 15)
    assert fired(monitor_for(configs["default"]), rising) == [(50, "zero_advantage")]
    # Strict (span 5, > 0.2; window 20): second half 0.25 + 0.03125 j, change > 0.15 first at j = 5
    # (0.15625), last 5 all 0.5625 -> step 45, a halt.
    monitor = monitor_for(configs["strict"])
    alerts = [alert for step, metrics in rising for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.action) for a in alerts] == [(45, "zero_advantage", "halt")]


def test_zero_std_groups_prefers_align_kits_flat_fraction(configs):
    # Both logged: TRL's undercounts groups flat at 0.2 or 0.8 (float32 std above 1e-8), so the rule reads
    # align_kit's groups/flat_fraction: 10 points at 0.625 > 0.5 -> step 10.
    stream = series("groups/flat_fraction", [0.625] * 10)
    stream = [(step, {**metrics, "frac_reward_zero_std": 0.0}) for step, metrics in stream]
    monitor = monitor_for(configs["default"])
    alerts = [alert for step, metrics in stream for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.metric) for a in alerts] == [(10, "zero_std_groups", "groups/flat_fraction")]
    assert alerts[0].message.startswith("groups/flat_fraction mean 0.625 > 0.500")


# Mean length: steps 1-10 at 20, 11-20 at 50, 21-23 at 96, 24 at 80, 25 at 99; max_completion_length 100.
LENGTHS = series("completions/mean_length", [20.0] * 10 + [50.0] * 10 + [96.0] * 3 + [80.0, 99.0])


def test_length_rules_default(configs):
    # length_near_max (>= 0.95 x 100 = 95): 96 at step 21; 80 at step 24 re-arms; 99 at 25 fires again.
    # length_growth (last 10 > 3 x 20 = 60): step 21: (9x50 + 96)/10 = 54.6; step 22: (8x50 + 2x96)/10
    #   = 59.2; step 23: (7x50 + 3x96)/10 = 63.8 -> fires; step 24: 66.8 and step 25: 71.7 stay above.
    assert fired(monitor_for(configs["default"]), LENGTHS) == [
        (21, "length_near_max"),
        (23, "length_growth"),
        (25, "length_near_max"),
    ]


def test_length_rules_strict(configs):
    # length_growth factor 2: threshold 40, first evaluable at step 20 with mean 50 -> fires at 20.
    # length_near_max margin 0.1: >= 90 at steps 21-23 (fires 21), 80 re-arms, 99 fires at 25.
    assert fired(monitor_for(configs["strict"]), LENGTHS) == [
        (20, "length_growth"),
        (21, "length_near_max"),
        (25, "length_near_max"),
    ]


def test_length_near_max_needs_max_completion_length(configs):
    assert fired(monitor_for(configs["default"], max_completion_length=None), LENGTHS) == [(23, "length_growth")]


def test_length_near_max_includes_the_boundary(configs):
    # 19 of a 20-token budget is exactly 95%: "within 5%" of the maximum, so it fires.
    stream = series("completions/mean_length", [19.0])
    assert fired(monitor_for(configs["default"], max_completion_length=20), stream) == [(1, "length_near_max")]


def test_reward_plateau_flat_below_the_maximum():
    config = HealthMonitorConfig(reward_plateau=RewardPlateau(window=4, tolerance=0.04, gap=0.05))
    rewards = [0.1, 0.2, 0.3, 0.4, 0.45, 0.5, 0.5, 0.5, 0.5, 0.9, 1.0, 1.0, 1.0, 1.0]
    # Change = mean(last 2 of the window) - mean(first 2); ceiling = min(reward_max - 0.05, 0.5 x reward_max).
    # step 7: [0.4, 0.45, 0.5, 0.5] -> 0.5 - 0.425 = 0.075 (rising); step 8: [0.45, 0.5, 0.5, 0.5] ->
    # 0.025 < 0.04 with mean 0.4875 <= 0.5 -> fires. step 10: [0.5, 0.5, 0.5, 0.9] -> 0.2, re-arms.
    # step 13: [0.9, 1, 1, 1] -> 0.05, not flat. step 14: [1, 1, 1, 1] -> flat, but mean 1.0 > 0.5.
    assert fired(monitor_for(config), series("reward", rewards)) == [(8, "reward_plateau")]
    # A composition whose best total is 2.0: tolerance and gap are shares of the range 2.0 - 0, so the tolerance is
    # 0.08 and the ceiling min(2.0 - 0.1, 0.5 x 2.0) = 1.0. Step 7's change 0.075 < 0.08 fires; step 10 (0.2)
    # re-arms; step 13: [0.9, 1, 1, 1] -> 0.05 < 0.08 with mean 0.975 <= 1.0 fires again.
    assert fired(monitor_for(config, reward_max=2.0), series("reward", rewards)) == [
        (7, "reward_plateau"),
        (13, "reward_plateau"),
    ]


def test_reward_plateau_default_vs_strict(configs):
    flat = series("reward", [0.4] * 110)  # in the lower half of [0, 1]: 0.5, the middle, is not
    # Window 100 (was 50: on healthy runs the slowly rising reward read as flat within the noise).
    assert fired(monitor_for(configs["default"]), flat) == [(100, "reward_plateau")]
    assert fired(monitor_for(configs["strict"]), flat) == [(30, "reward_plateau")]  # window 30


def test_grad_norm_vanishing(configs):
    # 0.5 at steps 1-5, then 5e-5. Default: all of the last 10 < 1e-4 from step 15 (steps 6-15).
    # Strict: all of the last 5 < 1e-3 from step 10 (steps 6-10).
    stream = series("grad_norm", [0.5] * 5 + [5e-5] * 12)
    assert fired(monitor_for(configs["default"]), stream) == [(15, "grad_norm_vanishing")]
    assert fired(monitor_for(configs["strict"]), stream) == [(10, "grad_norm_vanishing")]


def test_kl_rising_monotonically(configs):
    # kl = step/1000 except step 3, which repeats step 2's value: the pair (2, 3) is not a rise.
    # Default window 10: the first window without that pair is steps 3-12 -> step 12.
    # Strict window 6: steps 3-8 -> step 8.
    values = [0.001, 0.002, 0.002] + [step / 1000 for step in range(4, 13)]
    assert fired(monitor_for(configs["default"]), series("kl", values)) == [(12, "kl_rising")]
    assert fired(monitor_for(configs["strict"]), series("kl", values)) == [(8, "kl_rising")]


def test_policy_ratio_drift(configs):
    # |ratio - 1|: 0.02, 0.4, 0.6, 0.55, 0.0, 0.6. Default (> 0.5): steps 3-4, then 6.
    # Strict (> 0.2): steps 2-4, then 6.
    stream = series("policy_ratio/mean", [1.02, 1.4, 1.6, 0.45, 1.0, 0.4])
    assert fired(monitor_for(configs["default"]), stream) == [(3, "policy_ratio_drift"), (6, "policy_ratio_drift")]
    assert fired(monitor_for(configs["strict"]), stream) == [(2, "policy_ratio_drift"), (6, "policy_ratio_drift")]


def test_clip_ratio_rises_then_drops_to_zero(configs):
    # 0.01 .. 0.10 over steps 1-10: strictly rising over 10 points at step 10. Then zeros from
    # step 11: the last 10 (steps 11-20) are all zero after 10 points averaging 0.055 > 1e-3 -> step 20.
    stream = series("clip_ratio/region_mean", [k / 100 for k in range(1, 11)] + [0.0] * 12)
    assert fired(monitor_for(configs["default"]), stream) == [(10, "clip_ratio_rising"), (20, "clip_ratio_zero")]


def test_clip_ratio_never_clipping_is_not_a_drop(configs):
    # A fully on-policy run logs a clip ratio of exactly 0 throughout.
    assert fired(monitor_for(configs["default"]), series("clip_ratio/region_mean", [0.0] * 30)) == []
    # The healthy-run case (an advantage-sweep arm at lr 2e-5): one token batch clipped once (0.00136
    # at step 10), zeros around it: the 10 points before the zero window average 0.000136 < 1e-3.
    lone = series("clip_ratio/region_mean", [0.0] * 9 + [0.00136] + [0.0] * 20)
    assert fired(monitor_for(configs["default"]), lone) == []


def test_logp_mismatch_reads_trls_vllm_metric(configs):
    # Rollouts from vLLM: TRL logs the same quantity (mean |logp difference|) under its own name.
    stream = series("sampling/sampling_logp_difference/mean", [0.006, 0.02])
    monitor = monitor_for(configs["default"])
    alerts = [alert for step, metrics in stream for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.metric) for a in alerts] == [
        (2, "logp_mismatch", "sampling/sampling_logp_difference/mean")
    ]
    assert "(sampling/sampling_logp_difference/mean) mean 0.02 > 0.01" in alerts[0].message


def test_logp_mismatch(configs):
    # Default (> 0.01): 0.02 at step 2, 0.008 re-arms, 0.012 at step 4. Strict (> 0.005): from step 1 on.
    stream = series("mismatch/logp_abs_diff/mean", [0.006, 0.02, 0.008, 0.012])
    assert fired(monitor_for(configs["default"]), stream) == [(2, "logp_mismatch"), (4, "logp_mismatch")]
    assert fired(monitor_for(configs["strict"]), stream) == [(1, "logp_mismatch")]


def train_and_eval(eval_rewards: list[float]) -> Stream:
    # Train reward every step (1-8); evaluations at steps 0 (before any training), 2, 4, 6, 8.
    train = dict(zip(range(1, 9), [0.2, 0.3, 0.35, 0.45, 0.5, 0.6, 0.65, 0.75], strict=True))
    stream: Stream = [(0, {"eval_reward": 0.5})]
    for step, reward in train.items():
        stream.append((step, {"reward": reward}))
        if step % 2 == 0:
            stream.append((step, {"eval_reward": eval_rewards[step // 2 - 1]}))
    return stream


def test_train_reward_rising_while_eval_is_flat(configs):
    # The step-0 evaluation has no train reward before it: unpaired. Train means per evaluation
    # interval: 0.25, 0.4, 0.55, 0.7 -> gain (0.55 + 0.7)/2 - (0.25 + 0.4)/2 = 0.3.
    # Eval 0.5, 0.5, 0.505, 0.5 -> gain 0.5025 - 0.5 = 0.0025 < 0.01 (default) -> fires at step 8.
    assert fired(monitor_for(configs["default"]), train_and_eval([0.5, 0.5, 0.505, 0.5])) == [
        (8, "train_eval_divergence")
    ]
    # Eval 0.5, 0.55, 0.6, 0.65 -> gain 0.625 - 0.525 = 0.1: eval keeps up, nothing fires.
    assert fired(monitor_for(configs["default"]), train_and_eval([0.5, 0.55, 0.6, 0.65])) == []


def test_train_eval_divergence_default_vs_strict(configs):
    # Eval gain (0.515 + 0.515)/2 - 0.5 = 0.015: not below 0.01 (default), below 0.02 (strict, a halt).
    stream = train_and_eval([0.5, 0.5, 0.515, 0.515])
    assert fired(monitor_for(configs["default"]), stream) == []
    monitor = monitor_for(configs["strict"])
    alerts = [alert for step, metrics in stream for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.action) for a in alerts] == [(8, "train_eval_divergence", "halt")]


def test_off_fires_nothing(configs):
    everything = ENTROPY + LENGTHS + series("frac_reward_zero_std", [1.0] * 12) + train_and_eval([0.5] * 4)
    assert fired(monitor_for(configs["off"]), everything) == []


def test_missing_metrics_fire_nothing(configs):
    # 60 logging steps that carry none of the watched metrics, or carry them as None.
    stream: Stream = [(step, {"loss": 0.1, "entropy": None, "kl": None, "grad_norm": None}) for step in range(60)]
    assert fired(monitor_for(configs["strict"]), stream) == []


def advice(rule: str, context: RunContext) -> str:
    """A rule's advice: its fixes (for a finding without words) in align_kit's terms, for the run's composition."""
    return in_terms(next(r for r in RULES if r.name == rule).fixes_for({}), "align_kit", context)


@pytest.mark.parametrize(
    ("rule", "node"),
    [
        ("entropy_collapse", "clip=clip_higher"),
        ("entropy_drop", "clip=clip_higher (eps_high 0.28)"),
        ("zero_std_groups", "advantage=ngrpo"),
        ("zero_advantage", "sampling=dynamic"),
        ("reward_collapse", "advantage=gdpo"),
        ("reward_collapse", "reward.format.weight"),
        ("reward_decline", "trainer.learning_rate"),
        ("length_growth", "overlong=soft_punish"),
        ("length_near_max", "overlong=soft_punish"),
        ("kl_rising", "kl.beta"),
        ("policy_ratio_noise", "trainer.learning_rate"),
        ("train_eval_divergence", "kl=constant"),
        ("non_finite", "trainer.learning_rate"),
    ],
)
def test_advice_names_the_align_kit_node(rule, node):
    # The default composition (nothing on): the advice names the node to switch on.
    assert node in advice(rule, RunContext())


# Every node the advice can recommend, switched on at once.
ALL_ON = RunContext(
    advantage="ngrpo",
    clip_higher=True,
    eps_high=0.28,
    dynamic_sampling=True,
    max_gen_batches=4,
    overlong_shaping=True,
    kl_on=True,
    routing_replay=True,
    reward_weights={"correctness": 0.8, "format": 0.2},
)


@pytest.mark.parametrize("rule", [r.name for r in RULES])
def test_advice_never_recommends_a_node_already_on(rule):
    text = advice(rule, ALL_ON)
    for node in ("clip=clip_higher", "sampling=dynamic", "advantage=ngrpo", "overlong=soft_punish", "kl=constant",
                 "routing_replay=r2"):  # fmt: skip
        assert node not in text, (rule, text)
    assert "advantage=gdpo" not in advice(rule, RunContext(advantage="gdpo"))


def test_advice_for_what_is_already_on():
    # Clip-Higher at 0.28: the next step is 0.33 (18.3.8: 0.28-0.3 and beyond, in steps of 0.05).
    assert advice("entropy_drop", ALL_ON).startswith("clip.eps_high=0.33 (now 0.28)")
    # Dynamic sampling on and the trained batch still flat (issue: "enable dynamic sampling" told to a run using it).
    for rule in ("zero_advantage", "zero_std_groups"):
        assert advice(rule, ALL_ON).startswith("dynamic sampling is on yet flat groups remain: raise sampling.max_gen")
    assert "dynamic sampling is on" in advice("reward_plateau", ALL_ON)
    assert "sampling=dynamic" in advice("reward_plateau", RunContext())
    assert "advantage=ngrpo" in advice("reward_plateau", RunContext())
    assert advice("grad_norm_vanishing", RunContext(advantage="ngrpo")).startswith("sampling=dynamic")
    assert "kl.beta=twice its value" in advice("train_eval_divergence", ALL_ON)
    # KL off: raising its coefficient means adding the term first; the reward check (data, 18.3.8's first) leads.
    assert advice("kl_rising", RunContext()).endswith("(the reward= nodes); kl=constant (kl.beta=0.04)")
    assert advice("reward_collapse", RunContext(advantage="gdpo")).startswith("lower the format reward's weight")
    # Overlong shaping on: filtering is added to it, not put in its place.
    assert "overlong=filter_and_punish" in advice("length_pinned", ALL_ON)
    assert "overlong=filter " in advice("length_pinned", RunContext())


def test_length_near_max_from_the_first_step_means_the_budget_is_too_short(configs):
    # A 12-token budget for 20-token answers: every completion is cut from step 1 (12 >= 0.95 x 12).
    monitor = HealthMonitor(configs["default"], context=RunContext(max_completion_length=12))
    alerts = monitor.update(1, {"completions/mean_length": 12.0})
    assert [a.rule for a in alerts] == ["length_near_max"]
    # At the budget from the first step the rule puts a longer budget first (12 x 2); the advice reads in 18.3.8's
    # order: the data fixes (filtering, shaping) before sampling and generation (the budget).
    assert alerts[0].fixes == ("raise_max_length", "overlong_filter", "overlong_shaping")
    assert alerts[0].advice == (
        "overlong=filter (mask truncated completions out of the loss); overlong=soft_punish; "
        "trainer.max_completion_length=24"
    )


def test_run_context_from_a_composed_plan():
    from align_kit.experiment.compose import compose
    from align_kit.experiment.plan import build_plan

    overrides = ["logger=none", "clip=clip_higher", "sampling=dynamic", "advantage=ngrpo", "kl=constant"]
    plan = build_plan(compose(overrides), {"advantage": "ngrpo"}, "unused")
    context = RunContext.from_plan(plan)
    # conf/clip/clip_higher.yaml: 0.2 / 0.28; conf/sampling/dynamic.yaml: 4 rounds; trainer default: 32 tokens.
    assert (context.clip_higher, context.eps_high, context.sequence_clip) == (True, 0.28, False)
    assert (context.dynamic_sampling, context.max_gen_batches, context.advantage) == (True, 4, "ngrpo")
    assert (context.kl_on, context.overlong_shaping, context.max_completion_length) == (True, False, 32)
    assert context.reward_weights == {"correctness": 0.8, "format": 0.2}
    default = RunContext.from_plan(build_plan(compose(["logger=none"]), {}, "unused"))
    assert (default.clip_higher, default.dynamic_sampling, default.kl_on, default.advantage) == (
        False,
        False,
        False,
        "grpo",
    )


def test_alert_is_one_json_line():
    alert = Alert(step=3, rule="kl_rising", action="halt", values={"latest": 0.5}, message="m", advice="a")
    line = alert.to_json()
    assert "\n" not in line
    assert json.loads(line)["values"] == {"latest": 0.5}


def test_non_finite_names_the_first_metric_that_went_non_finite(configs):
    # Step 2: the loss is finite, the grad norm is NaN -> a halt naming grad_norm. Step 3 (both NaN)
    # stays in the same episode. None (a metric not logged) is not non-finite.
    stream: Stream = [
        (1, {"loss": 0.25, "grad_norm": 0.5}),
        (2, {"loss": 0.25, "grad_norm": float("nan")}),
        (3, {"loss": float("nan"), "grad_norm": float("nan")}),
        (4, {"loss": None, "grad_norm": None}),
    ]
    monitor = monitor_for(configs["default"])
    alerts = [alert for step, metrics in stream for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.action, a.metric) for a in alerts] == [(2, "non_finite", "halt", "grad_norm")]
    assert alerts[0].message == "grad_norm is nan: the first non-finite value among loss, grad_norm, entropy, kl"
    # An infinite loss comes first in a step (the grad norm is computed from it).
    monitor = monitor_for(configs["default"])
    alerts = monitor.update(5, {"loss": float("inf"), "grad_norm": float("nan")})
    assert [(a.rule, a.metric, a.message.split(":")[0]) for a in alerts] == [("non_finite", "loss", "loss is inf")]
    assert fired(monitor_for(configs["off"]), stream) == []
    # A NaN KL with the loss still finite (the log-ratio to the reference is broken; the loss need not read it).
    alerts = monitor_for(configs["default"]).update(300, {"loss": -0.04, "grad_norm": 0.006, "kl": float("nan")})
    assert [(a.rule, a.metric, a.severity) for a in alerts] == [("non_finite", "kl", "failing")]


def test_reward_collapse_format_rising_while_correctness_is_flat(configs):
    # Window 20: format 0.5 for 10 points, then 0.75 -> gain 0.25 > 0.1 at step 20 (first evaluable),
    # correctness flat at 0.25 -> gain 0 < 0.02: fires. With correctness rising 0.25 -> 0.375 (gain 0.125)
    # the same format curve is a healthy run.
    formats = [0.5] * 10 + [0.75] * 12
    flat = [(s, {"rewards/format/mean": f, "rewards/correctness/mean": 0.25}) for s, f in enumerate(formats, 1)]
    monitor = monitor_for(configs["default"])
    alerts = [alert for step, metrics in flat for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule) for a in alerts] == [(20, "reward_collapse")]
    assert alerts[0].message.startswith("the format reward rose +0.250 while the correctness reward moved +0.000")
    learning = [
        (s, {"rewards/format/mean": f, "rewards/correctness/mean": 0.25 if s <= 10 else 0.375})
        for s, f in enumerate(formats, 1)
    ]
    assert fired(monitor_for(configs["default"]), learning) == []


def test_reward_decline_from_its_best_smoothed_value(configs):
    # Span 20, drop 0.1 x reward_max. 20 points at 0.5 (best smoothed 0.5), then 0.375: the 20-point mean
    # at 20 + j is 0.5 - 0.00625 j < 0.4 first at j = 17 (0.39375; j = 16 gives exactly 0.4) -> step 37.
    stream = series("reward", [0.5] * 20 + [0.375] * 20)
    assert [a for a in fired(monitor_for(configs["default"]), stream) if a[1] == "reward_decline"] == [
        (37, "reward_decline")
    ]
    # A composition whose best total is 2.0: the drop must exceed 0.2, and 0.375 never gets there.
    assert [a for a in fired(monitor_for(configs["default"], reward_max=2.0), stream) if a[1] == "reward_decline"] == []


def test_policy_ratio_noise(configs):
    # 2 mini-steps: the on-policy one logs exactly 0. Span 10, > 0.1: alternating 0 and 0.25 average 0.125
    # -> fires at step 10; alternating 0 and 0.1875 average 0.09375 -> never.
    assert fired(monitor_for(configs["default"]), series("policy_ratio/abs_dev", [0.0, 0.25] * 6)) == [
        (10, "policy_ratio_noise")
    ]
    assert fired(monitor_for(configs["default"]), series("policy_ratio/abs_dev", [0.0, 0.1875] * 6)) == []


def test_plateau_rule_uses_the_maximum_in_force():
    # highest=1.0: no lower-half bound, so the gap below the maximum in force decides.
    config = HealthMonitorConfig(reward_plateau=RewardPlateau(window=4, tolerance=0.02, gap=0.05, highest=1.0))
    monitor = HealthMonitor(config, max_completion_length=32, reward_max=1.0)
    # Flat at 1.7 while a schedule makes 1.8 attainable: 1.7 <= 1.8 - 0.05, a plateau below the ceiling.
    alerts = [
        alert for step in range(1, 5) for alert in monitor.update(step, {"reward": 1.7, "reward/max_attainable": 1.8})
    ]
    assert [(a.step, a.rule) for a in alerts] == [(4, "reward_plateau")]
    assert alerts[0].values["reward_max"] == pytest.approx(1.8)


def test_zero_std_groups_rule_reads_the_flat_fraction():
    config = HealthMonitorConfig(zero_std_groups=AboveThreshold(span=1, threshold=0.5))
    monitor = HealthMonitor(config, max_completion_length=32, reward_max=1.0)
    # TRL's undercount (0.0) is not what the rule reads once align_kit's share is logged.
    assert monitor.update(1, {"frac_reward_zero_std": 0.0, "groups/flat_fraction": 0.9})[0].rule == "zero_std_groups"


# Every metric a default rule reads, with values that move (a long run whose history the monitor must not keep).
WATCHED = ("entropy", "reward", "completions/mean_length", "grad_norm", "kl", "policy_ratio/mean",
           "policy_ratio/abs_dev", "clip_ratio/region_mean", "adv/zero_std_fraction", "groups/flat_fraction",
           "rewards/format/mean", "rewards/correctness/mean", "loss")  # fmt: skip


def long_run(steps: int, reward=None) -> Stream:
    """Deterministic wobbling values (the reward from `reward(step)` if given), an evaluation every 50 steps."""
    stream: Stream = []
    for step in range(1, steps + 1):
        metrics = {name: 0.25 + 0.125 * ((step * (i + 3)) % 7) / 7 for i, name in enumerate(WATCHED)}
        stream.append((step, metrics if reward is None else {**metrics, "reward": reward(step)}))
        if step % 50 == 0:
            stream.append((step, {"eval_reward": 0.5 + 0.0625 * (step // 50 % 3)}))
    return stream


def kept(monitor: HealthMonitor) -> dict[str, tuple[int, int, int]]:
    """Per metric: the points the monitor holds (first ones, last ones with steps)."""
    return {name: (len(s.first), len(s.steps), len(s.values)) for name, s in monitor.history.items()}


def test_the_monitor_keeps_what_its_windows_read_however_long_the_run(configs):
    monitor = monitor_for(configs["default"])
    stream = long_run(10_000)
    for step, metrics in stream[:1_100]:
        monitor.update(step, metrics)
    at_1k = kept(monitor)
    for step, metrics in stream[1_100:]:
        monitor.update(step, metrics)
    assert monitor.history["entropy"].count == 10_000
    assert kept(monitor) == at_1k
    # By hand from conf/monitor/default.yaml: entropy's first 10 (collapse, decline) and its last 100 + 10
    # (entropy_drop's window_steps plus a span); reward's first 20 (reward_decline's first span, its fall read
    # against the run's own noise) and last 110 (the entropy rules read its progress over their points; plateau
    # reads 100); the length's
    # first 10 (length_growth); clip ratio's last 2 x 10 (clip_ratio_zero); the zero-advantage share's last 40.
    assert at_1k["entropy"] == (10, 110, 110)
    assert at_1k["reward"] == (20, 110, 110)
    assert at_1k["completions/mean_length"] == (10, 10, 10)
    assert at_1k["clip_ratio/region_mean"] == (0, 20, 20)
    assert at_1k["adv/zero_std_fraction"] == (0, 40, 40)
    assert len(monitor.history.train_eval.pairs) == 4  # train_eval_divergence's window


def test_a_resumed_monitor_judges_as_if_it_had_seen_the_whole_history(configs):
    # Reward 0.8125 for 200 steps, then 0.75 up to step 5,000, where the run is resumed, then 0.625. The best
    # 20-point mean stays 0.8125 (threshold 0.8125 - 0.1 = 0.7125), far before any window the monitor keeps:
    # at 5,000 + k the mean is (15 - 0.125 k) / 20 < 0.7125 first at k = 7. A monitor that knew only the
    # recent 0.75 would wait until k = 17 (threshold 0.65).
    stream = long_run(5_030, reward=lambda step: 0.8125 if step <= 200 else 0.75 if step <= 5_000 else 0.625)
    before = [point for point in stream if point[0] <= 5_000]
    after = [point for point in stream if point[0] > 5_000]

    ran = monitor_for(configs["default"])
    fired(ran, before)
    saved = json.loads(json.dumps(ran.state_dict()))  # as the checkpoint stores it
    resumed = monitor_for(configs["default"])
    assert resumed.load_state_dict(saved)
    replayed = monitor_for(configs["default"])  # the full re-read of the history
    fired(replayed, before)
    assert resumed.state_dict() == replayed.state_dict() == saved

    alerts = fired(ran, after)
    assert fired(resumed, after) == fired(replayed, after) == alerts
    assert (5_007, "reward_decline") in alerts


def test_a_state_kept_for_other_windows_is_not_loaded(configs):
    monitor = monitor_for(configs["default"])
    fired(monitor, long_run(200))
    other = monitor_for(HealthMonitorConfig(reward_plateau=RewardPlateau(window=300)))
    assert not other.load_state_dict(json.loads(json.dumps(monitor.state_dict())))
    assert other.history == {}


# --- severity, fixes, short histories, coverage, artefacts and the rules real logs need ---------------------


def only(rule: str, hits: list[tuple[int, str]]) -> list[tuple[int, str]]:
    return [hit for hit in hits if hit[1] == rule]


def rule_named(name: str):
    return next(rule for rule in RULES if rule.name == name)


def test_every_rule_has_a_severity_and_fixes_from_the_vocabulary():
    vocabulary = {
        "dynamic_sampling", "harder_data", "easier_data", "fix_reward", "lower_format_weight", "gdpo", "ngrpo",
        "overlong_filter", "overlong_shaping", "more_data", "clip_higher", "raise_eps_high", "gspo", "lower_lr",
        "fewer_updates", "add_kl", "raise_kl", "raise_max_length", "match_sampler_precision", "is_correction",
        "routing_replay", "group_size", "temperature", "unfiltered_sampler", "router_aux_off",
    }  # fmt: skip
    for rule in RULES:
        assert rule.severity in ("failing", "warning", "note"), rule.name
        for words in ({}, {"difficulty": "too easy"}, {"difficulty": "too hard"}, {"from_start": "yes"}):
            fixes = rule.fixes_for(words)
            # A note (entropy falling while the accuracy rises) is no fault: it has nothing to fix.
            assert (rule.severity == "note") == (not fixes) and set(fixes) <= vocabulary, (rule.name, fixes)
    assert rule_named("entropy_collapse").fixes_for({}) == ("clip_higher", "raise_eps_high", "lower_lr")
    failing = {rule.name for rule in RULES if rule.severity == "failing"}
    assert {"non_finite", "entropy_collapse", "entropy_exploding", "no_signal", "length_pinned"} <= failing


def test_alerts_state_the_points_read_and_their_first_step(configs):
    # Logged every 10 steps: zero_std_groups' span of 10 reads the points at steps 10..100 and fires at 100.
    stream = series("frac_reward_zero_std", [1.0] * 10, first_step=10, every=10)
    monitor = monitor_for(configs["default"])
    alerts = [alert for step, metrics in stream for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.first_step, a.points) for a in alerts] == [(100, "zero_std_groups", 10, 10)]
    # entropy_collapse reads the first 10 and the last 10 (ENTROPY above: fires at step 26, from step 1).
    monitor = monitor_for(configs["default"])
    collapse = [a for step, m in ENTROPY for a in monitor.update(step, m) if a.rule == "entropy_collapse"]
    assert [(a.step, a.first_step, a.points, a.severity) for a in collapse] == [(26, 1, 20, "failing")]
    # Old alerts.jsonl readers see the same keys as before, plus new ones.
    assert {"step", "rule", "action", "values", "message", "advice", "metric"} < set(json.loads(collapse[0].to_json()))


def test_flat_groups_say_too_easy_or_too_hard_and_the_fixes_differ():
    config = HealthMonitorConfig(zero_std_groups=AboveThreshold(span=1, threshold=0.5))

    def alert(reward: float):
        monitor = monitor_for(config)
        return monitor.update(1, {"reward": reward, "frac_reward_zero_std": 0.8})[0]

    # Flat share 0.8: flat groups all solved put the reward at >= 0.8 of its range, all failed at <= 0.2.
    easy, hard, mixed = alert(0.9), alert(0.1), alert(0.5)
    assert (easy.words["difficulty"], easy.fixes) == ("too easy", ("harder_data", "dynamic_sampling"))
    assert (hard.words["difficulty"], hard.fixes) == ("too hard", ("easier_data", "dynamic_sampling", "ngrpo"))
    assert (mixed.words["difficulty"], mixed.fixes) == ("", ("dynamic_sampling", "ngrpo", "fix_reward"))
    assert easy.message.endswith("(reward near its maximum: the data is too easy)")
    # On a reward range of -1..1, the reward 0.5 is 0.75 of the way up: neither >= 0.8 nor <= 0.2.
    monitor = HealthMonitor(config, context=RunContext(reward_min=-1.0, reward_max=1.0))
    assert monitor.update(1, {"reward": 0.5, "frac_reward_zero_std": 0.8})[0].words["difficulty"] == ""


def test_entropy_exploding_relative_to_the_run_s_own_start(configs):
    # Span 10, factor 2: 20 points at 0.5 (early mean 0.5, threshold 1.0), then 2.0. The last 10 at step 20 + j
    # average 0.5 + 0.15 j > 1.0 first at j = 4 (1.1; j = 3 gives 0.95) -> step 24.
    stream = series("entropy", [0.5] * 20 + [2.0] * 10)
    monitor = monitor_for(configs["default"])
    alerts = [a for step, m in stream for a in monitor.update(step, m) if a.rule == "entropy_exploding"]
    assert [(a.step, a.severity, a.first_step, a.points) for a in alerts] == [(24, "failing", 1, 20)]
    assert alerts[0].values["threshold"] == 1.0
    # No truncated share logged: figure 18-8's cause (truncated samples) comes first.
    assert alerts[0].fixes[:2] == ("overlong_filter", "overlong_shaping")
    # The same shape on a large vocabulary's scale (x 10) fires at the same step; a rise to 1.8x never does
    # (last-10 mean at most 0.9 < 1.0).
    assert only(
        "entropy_exploding", fired(monitor_for(configs["default"]), series("entropy", [5.0] * 20 + [20.0] * 10))
    ) == [(24, "entropy_exploding")]
    assert (
        only("entropy_exploding", fired(monitor_for(configs["default"]), series("entropy", [0.5] * 20 + [0.9] * 20)))
        == []
    )


def test_entropy_exploding_advice_follows_the_truncated_share(configs):
    # The same entropy course with a truncated share of 0.02 (< 0.1) on every row: the updates are too large, a
    # lower learning rate comes first; with 0.5 (>= 0.1) overlong filtering does.
    def fixes(clipped: float) -> tuple[str, ...]:
        rows = [
            (step, {"entropy": 0.5 if step <= 20 else 2.0, "completions/clipped_ratio": clipped})
            for step in range(1, 31)
        ]
        monitor = monitor_for(configs["default"])
        alerts = [a for step, m in rows for a in monitor.update(step, m) if a.rule == "entropy_exploding"]
        assert [a.step for a in alerts] == [24]
        return alerts[0].fixes

    assert fixes(0.02)[:2] == ("lower_lr", "fewer_updates")
    assert fixes(0.5)[:2] == ("overlong_filter", "overlong_shaping")


def test_length_pinned_from_the_truncated_share_alone_and_with_the_budget(configs):
    # Budget unknown: 10 points at a truncated share of 1.0 -> mean 1.0 >= 0.9 at step 10.
    pinned = series("completions/clipped_ratio", [1.0] * 12)
    monitor = monitor_for(configs["default"], max_completion_length=None)
    alerts = [a for step, m in pinned for a in monitor.update(step, m) if a.rule == "length_pinned"]
    assert [(a.step, a.severity, a.first_step, a.points) for a in alerts] == [(10, "failing", 1, 10)]
    assert "max_completion_length unknown" in alerts[0].message
    assert alerts[0].fixes[0] == "raise_max_length"
    # 0.875 is below 0.9: nothing.
    assert (
        only(
            "length_pinned",
            fired(monitor_for(configs["default"], None), series("completions/clipped_ratio", [0.875] * 12)),
        )
        == []
    )

    # Budget 32 known: pinned needs the mean length >= 0.95 x 32 = 30.4 too. 31 fires at step 10, 20 does not.
    def run(length: float):
        stream = [(s, {"completions/clipped_ratio": 1.0, "completions/mean_length": length}) for s in range(1, 11)]
        return only("length_pinned", fired(monitor_for(configs["default"], max_completion_length=32), stream))

    assert run(31.0) == [(10, "length_pinned")]
    assert run(20.0) == []


def test_a_short_history_is_judged_at_its_end(configs):
    # Three rows: fewer than length_pinned's span of 10, so update() never judges; finish() does, on the 3 there
    # are: mean (1 + 1 + 0.875) / 3 = 0.958 >= 0.9. all_truncated needs 2 rows at >= 0.99: 1.0 and 1.0 at step 20.
    # length_near_max reads the truncated share over 10 points too: at the end, 0.958 >= 0.5 on the 3.
    monitor = monitor_for(configs["default"], max_completion_length=None)
    live = [fired(monitor, [(step, {"completions/clipped_ratio": value})]) for step, value in ((10, 1.0), (20, 1.0))]
    assert live == [[], [(20, "all_truncated")]]
    assert monitor.update(30, {"completions/clipped_ratio": 0.875}) == []  # 0.875 < 0.99: its episode ends
    alerts = monitor.finish()
    assert [(a.step, a.rule, a.first_step, a.points) for a in alerts] == [
        (30, "length_near_max", 10, 3),
        (30, "length_pinned", 10, 3),
    ]
    assert alerts[1].message.endswith("(over 3 logged points, fewer than the span 10)")
    assert monitor.finish() == []  # it judged: the end does not repeat it


def test_no_signal_at_any_length_even_one_row(configs):
    # One row: every reward 0.0 <= 0 + 0.01 x (1 - 0) and the flat share 1.0 >= 0.99.
    monitor = monitor_for(configs["default"])
    assert monitor.update(1, {"reward": 0.0, "frac_reward_zero_std": 1.0}) == []
    ends = {alert.rule: alert for alert in monitor.finish()}
    assert ends["no_signal"].severity == "failing"
    assert ends["no_signal"].fixes == ("fix_reward", "easier_data")
    assert ends["zero_std_groups"].words["difficulty"] == "too hard"  # reward 0 <= 1 - 1.0
    # Live, over 10 points: fires at step 10. One reward of 0.02 (> 0.01) among them: not every row at the minimum.
    rows = [(s, {"reward": 0.0, "frac_reward_zero_std": 1.0}) for s in range(1, 11)]
    assert only("no_signal", fired(monitor_for(configs["default"]), rows)) == [(10, "no_signal")]
    rows[4] = (5, {"reward": 0.02, "frac_reward_zero_std": 1.0})
    assert only("no_signal", fired(monitor_for(configs["default"]), rows)) == []

    # A reward range of -1..1: the floor is -1 + 0.01 x 2 = -0.98, so 0.0 is no minimum and -1.0 is.
    def one_row(reward: float) -> list[str]:
        monitor = HealthMonitor(configs["default"], context=RunContext(reward_min=-1.0, reward_max=1.0))
        monitor.update(1, {"reward": reward, "frac_reward_zero_std": 1.0})
        return [alert.rule for alert in monitor.finish() if alert.rule == "no_signal"]

    assert one_row(0.0) == [] and one_row(-1.0) == ["no_signal"]


def test_no_signal_without_a_scale_from_zero_spread_over_the_whole_short_history(configs):
    # One row with reward_std 0: every group flat, whatever the reward's level (here 3.0, every completion at a
    # maximum above the [0, 1] assumed). Shorter than `rows` (2): every row logged is the history, judged at the end.
    monitor = monitor_for(configs["default"])
    monitor.update(1, {"reward": 3.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0})
    (alert,) = [a for a in monitor.finish() if a.rule == "no_signal"]
    assert alert.words["basis"] == "spread" and "scores alike" in alert.message
    # Two rows, the first with a spread: the last `rows` rows are not all flat, no alert.
    monitor = monitor_for(configs["default"])
    monitor.update(1, {"reward": 0.0, "reward_std": 0.3})
    monitor.update(2, {"reward": 0.0, "reward_std": 0.0})
    assert only("no_signal", [(a.step, a.rule) for a in monitor.finish()]) == []


def test_no_signal_scale_basis_does_not_hold_over_a_row_with_reward_spread(configs):
    # Rewards at the minimum 0.0 (as logged, rounded) and the flat share 0.995 on 10 rows would be no signal, but
    # every other row's reward_std 0.001 says some group's completions scored differently: an advantage to learn
    # from (and no 2 consecutive rows without a spread either).
    rows = [(s, {"reward": 0.0, "frac_reward_zero_std": 0.995, "reward_std": 0.001 * (s % 2)}) for s in range(1, 13)]
    assert only("no_signal", fired(monitor_for(configs["default"]), rows)) == []
    # Without those spreads it fires at step 10 on the scale basis (the loss and grad_norm are not logged, so the
    # spread basis cannot read the flat share alone).
    rows = [(s, {"reward": 0.0, "frac_reward_zero_std": 0.995}) for s in range(1, 13)]
    assert only("no_signal", fired(monitor_for(configs["default"]), rows)) == [(10, "no_signal")]


def test_sampler_gap_drift(configs):
    # The IS ratio's 10-point mean 0.9 is 0.1 > 0.05 from 1: fires at step 10; 0.98 (0.02 away) never.
    assert only(
        "sampler_gap_drift",
        fired(monitor_for(configs["default"]), series("sampling/importance_sampling_ratio/mean", [0.9] * 12)),
    ) == [(10, "sampler_gap_drift")]
    assert (
        only(
            "sampler_gap_drift",
            fired(monitor_for(configs["default"]), series("sampling/importance_sampling_ratio/mean", [0.98] * 12)),
        )
        == []
    )
    # The logp gap over a window of 20: first half 0.004, second 0.012: growth (0.012 - 0.004) / 0.004 = 2 > 1 and
    # 0.012 > 0.005 -> fires at step 20, its first evaluable point. 0.001 -> 0.003 grows as much, but stays < 0.005.
    rising = series("sampling/sampling_logp_difference/mean", [0.004] * 10 + [0.012] * 10)
    monitor = monitor_for(configs["default"])
    alerts = [a for step, m in rising for a in monitor.update(step, m) if a.rule == "sampler_gap_drift"]
    assert [(a.step, a.first_step, a.points, a.fixes[0]) for a in alerts] == [(20, 1, 20, "match_sampler_precision")]
    small = series("sampling/sampling_logp_difference/mean", [0.001] * 10 + [0.003] * 10)
    assert only("sampler_gap_drift", fired(monitor_for(configs["default"]), small)) == []


def test_kl_rising_while_the_reward_stays_flat(configs):
    # Default window 40, judged from 80 KL points on (the first 40 are KL's start from 0). KL 0.01 for steps 1-40,
    # then 0.002 x (step - 40): at step 80 the window (steps 41-80) holds 0.002 .. 0.080, halves' means
    # 0.002 x 10.5 = 0.021 and 0.002 x 30.5 = 0.061 (growth 1.90 > 1.0), an exact line (t = inf >= 3).
    def run(reward_after: float, reward_max: float = 1.0):
        rows = [
            (
                step,
                {
                    "kl": 0.01 if step <= 40 else 0.002 * (step - 40),
                    "reward": 0.5 if step <= 60 else reward_after,
                },
            )
            for step in range(1, 81)
        ]
        return only("kl_rising_flat_reward", fired(monitor_for(configs["default"], reward_max=reward_max), rows))

    # Reward flat at 0.5: change 0 <= 0.05 x 1.0.
    assert run(0.5) == [(80, "kl_rising_flat_reward")]
    # The reward's halves 0.5 and 0.6 (steps 41-60, 61-80): it gains 0.1 > 0.05, the KL buys reward. On a range of
    # 10 the same 0.1 is flat (<= 0.5).
    assert run(0.6) == []
    assert run(0.6, reward_max=10.0) == [(80, "kl_rising_flat_reward")]


def test_kl_rising_from_zero_at_the_start_is_not_a_drift(configs):
    # KL = 0.002 x step for 79 steps (from 0: the policy starts as the reference), reward flat: fewer than the 80
    # points the rule needs, so it never judges live, and coverage says why.
    monitor = monitor_for(configs["default"])
    rows = [(step, {"kl": 0.002 * step, "reward": 0.5}) for step in range(1, 80)]
    assert only("kl_rising_flat_reward", fired(monitor, rows)) == []
    coverage = {entry.rule: entry for entry in monitor.coverage()}["kl_rising_flat_reward"]
    assert not coverage.judged
    assert coverage.reason == "needs 80 logged points of kl during a run and 8 at its end, the run has 79"
    # At the end it reads the whole 79: halves 0.002 x 20 = 0.04 and 0.002 x 60 = 0.12 (39 points each), a growth
    # of 2 on an exact line, but the second half's 0.12 stays below `far` 1.0: the start-up, not a drift.
    assert only("kl_rising_flat_reward", [(a.step, a.rule) for a in monitor.finish()]) == []
    # Noise without a trend: KL alternating 0.01 / 0.03 for 120 steps, halves equal (growth 0): nothing fires.
    noisy = [(step, {"kl": 0.01 if step % 2 else 0.03, "reward": 0.5}) for step in range(1, 121)]
    assert only("kl_rising_flat_reward", fired(monitor_for(configs["default"]), noisy)) == []


def test_grad_norm_logged_as_zero_with_a_reward_spread_is_an_artefact(configs):
    # 10 rows of grad_norm exactly 0.0 while the loss and reward_std are non-zero: no vanishing-gradient alarm.
    rows = [(s, {"grad_norm": 0.0, "loss": 0.125, "reward_std": 0.25}) for s in range(1, 13)]
    monitor = monitor_for(configs["default"])
    assert only("grad_norm_vanishing", fired(monitor, rows)) == []
    assert len(monitor.artefacts()) == 1 and "0.0 on 12 of 12 logged rows" in monitor.artefacts()[0]
    coverage = {entry.rule: entry for entry in monitor.coverage()}
    assert not coverage["grad_norm_vanishing"].judged and "artefact" in coverage["grad_norm_vanishing"].reason
    # A batch without a reward spread has nothing to learn: exactly 0.0 is then a real stop (window 10).
    flat = [(s, {"grad_norm": 0.0, "loss": 0.0, "reward_std": 0.0}) for s in range(1, 13)]
    monitor = monitor_for(configs["default"])
    assert only("grad_norm_vanishing", fired(monitor, flat)) == [(10, "grad_norm_vanishing")]
    assert monitor.artefacts() == []


def test_coverage_says_which_rules_judged_and_why_the_others_did_not(configs):
    # 7 entropy points and 3 mean lengths, no budget known.
    monitor = monitor_for(configs["default"], max_completion_length=None)
    for step in range(1, 8):
        monitor.update(step, {"entropy": 0.5, **({"completions/mean_length": 10.0} if step <= 3 else {})})
    monitor.finish()
    coverage = {entry.rule: entry for entry in monitor.coverage()}
    assert [entry.rule for entry in monitor.coverage()] == [rule.name for rule in RULES]
    # entropy_drop and entropy_decline need a span of 10: 7 points are not enough (they are not shortened).
    # entropy_collapse (fewest 3) and entropy_exploding (fewest 4) judge at the end on halves of the 7: 3 vs 3;
    # length_collapse on its 3 lengths (fewest 3: 1 vs 1); non_finite reads every entropy.
    judged = {name for name, entry in coverage.items() if entry.judged}
    assert judged == {"non_finite", "entropy_collapse", "entropy_exploding", "length_collapse"}
    assert not any(entry.fired for entry in coverage.values())
    assert coverage["entropy_decline"].reason == "needs 10 logged points of entropy, the run has 7"
    assert coverage["length_near_max"].reason == "needs max_completion_length (unknown)"
    # length_growth judges halves of 6 points at the end at the fewest: 3 are too few even then.
    assert coverage["length_growth"].reason == "needs 6 logged points of completions/mean_length, the run has 3"
    assert (coverage["kl_rising"].reason, coverage["kl_rising"].missing) == ("lacks kl", ("kl",))
    assert coverage["no_signal"].missing == ("reward or groups/flat_fraction or frac_reward_zero_std or reward_std",)
    assert coverage["train_eval_divergence"].reason == "lacks eval_reward and reward"
    # Then 13 more entropy points: the entropy rules judge (none fires on a flat 0.5).
    for step in range(8, 21):
        monitor.update(step, {"entropy": 0.5})
    coverage = {entry.rule: entry for entry in monitor.coverage()}
    assert all(coverage[name].judged and not coverage[name].fired for name in ("entropy_collapse", "entropy_exploding"))
    assert coverage["entropy_collapse"].reason == ""


def test_the_new_bookkeeping_survives_a_resume(configs):
    monitor = monitor_for(configs["default"])
    fired(monitor, [(s, {"grad_norm": 0.0, "loss": 0.125, "reward_std": 0.25, "entropy": 0.5}) for s in range(1, 25)])
    resumed = monitor_for(configs["default"])
    assert resumed.load_state_dict(json.loads(json.dumps(monitor.state_dict())))
    assert resumed.artefacts() == monitor.artefacts() != []
    assert resumed.coverage() == monitor.coverage()
