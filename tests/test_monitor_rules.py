"""Health-monitor rules on synthetic metric streams: which rule fires at which step, by hand.

Thresholds are worked out in the comments from conf/monitor/{default,strict}.yaml; values are
chosen away from the boundaries (or exactly on them where the comparison's strictness matters).
"""

from __future__ import annotations

import json

import pytest
from hydra import compose, initialize_config_dir
from hydra.utils import instantiate

from align_kit import CONF_DIR
from align_kit.errors import ConfigError
from align_kit.monitor import RULES, Alert, HealthMonitor, HealthMonitorConfig
from align_kit.monitor.config import AboveThreshold, RewardPlateau

Stream = list[tuple[int, dict[str, float | None]]]


def load_config(name: str) -> HealthMonitorConfig:
    # The group option composed on its own, so the test does not depend on train.yaml's defaults list.
    with initialize_config_dir(config_dir=str(CONF_DIR), version_base="1.3"):
        node = compose(config_name=f"monitor/{name}").monitor
    return instantiate(node, _convert_="all")


@pytest.fixture(scope="module")
def configs() -> dict[str, HealthMonitorConfig]:
    return {name: load_config(name) for name in ("default", "strict", "off")}


def series(metric: str, values: list[float | None], first_step: int = 1, every: int = 1) -> Stream:
    return [(first_step + i * every, {metric: value}) for i, value in enumerate(values)]


def fired(monitor: HealthMonitor, stream: Stream) -> list[tuple[int, str]]:
    return [(alert.step, alert.rule) for step, metrics in stream for alert in monitor.update(step, metrics)]


def monitor_for(config: HealthMonitorConfig, max_completion_length: int | None = 100, reward_max: float = 1.0):
    return HealthMonitor(config, max_completion_length=max_completion_length, reward_max=reward_max)


# Entropy: steps 1-10 at 1.0, steps 11-20 at 0.5625, from step 21 on 0.4375 (dyadic: exact sums).
ENTROPY = series("entropy", [1.0] * 10 + [0.5625] * 10 + [0.4375] * 10)


def test_default_yaml_equals_the_dataclass_defaults(configs):
    assert configs["default"] == HealthMonitorConfig()
    assert configs["strict"] != configs["default"]
    assert configs["off"].enabled is False


def test_every_rule_has_a_settings_block():
    assert [rule.name for rule in RULES] == HealthMonitorConfig.rule_names()


def test_entropy_rules_default(configs):
    # entropy_decline (fall 0.4): 0.5625 < 0.6 x 1.0 at step 11 (a log-only rule by default).
    # entropy_drop (fall 0.5, 100 steps): needs < 0.5 x 1.0 = 0.5; 0.4375 first at step 21.
    # entropy_collapse (span 10, fall 0.5): at step 20+j the last 10 average 0.5625 - 0.0125 j;
    #   j = 5 gives exactly 0.5 (not below 0.5), j = 6 gives 0.4875 < 0.5 -> step 26.
    monitor = monitor_for(configs["default"])
    alerts = [alert for step, metrics in ENTROPY for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.action) for a in alerts] == [
        (11, "entropy_decline", "log"),
        (21, "entropy_drop", "warn"),
        (26, "entropy_collapse", "warn"),
    ]
    assert alerts[2].values == {"early_mean": 1.0, "recent_mean": 0.4875, "threshold": 0.5}


def test_entropy_rules_strict(configs):
    # entropy_collapse fall 0.4: threshold 0.6; first evaluable at step 20 (20 points): 0.5625 < 0.6.
    # entropy_drop fall 0.4: 0.5625 < 0.6 x 1.0 at step 11; entropy_decline fall 0.3: 0.5625 < 0.7 at 11.
    monitor = monitor_for(configs["strict"])
    alerts = [alert for step, metrics in ENTROPY for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule, a.action) for a in alerts] == [
        (11, "entropy_drop", "halt"),
        (11, "entropy_decline", "warn"),
        (20, "entropy_collapse", "warn"),
    ]


def test_entropy_drop_window_counts_training_steps(configs):
    # Logged every 50 steps. At step 150 the 100-step window holds steps 50-150: max 0.75, so the
    # threshold is 0.375 and 0.4375 does not fire (a whole-history max of 1.0 would: 0.4375 < 0.5).
    # At step 200 the window holds steps 100-200: max 0.625, threshold 0.3125 > 0.3 -> fires.
    # entropy_decline: 0.625 >= 0.6, 0.4375 < 0.6 -> step 150. entropy_collapse: 5 points < 20.
    stream = series("entropy", [1.0, 0.75, 0.625, 0.4375, 0.3], first_step=0, every=50)
    assert fired(monitor_for(configs["default"]), stream) == [(150, "entropy_decline"), (200, "entropy_drop")]


def test_fires_once_per_episode_and_rearms_after_recovery():
    config = HealthMonitorConfig(zero_std_groups=AboveThreshold(span=1, threshold=0.5))
    monitor = monitor_for(config)
    # > 0.5 at steps 2, 3, 4 (one episode), 0.4 at step 5 ends it, 0.9 at step 6 opens a new one.
    stream = series("groups/flat_fraction", [0.2, 0.6, 0.7, 0.8, 0.4, 0.9, 0.9])
    alerts = [alert for step, metrics in stream for alert in monitor.update(step, metrics)]
    assert [(a.step, a.rule) for a in alerts] == [(2, "zero_std_groups"), (6, "zero_std_groups")]
    assert json.loads(alerts[0].to_json()) == {
        "step": 2,
        "rule": "zero_std_groups",
        "action": "warn",
        "values": {"recent_mean": 0.6, "threshold": 0.5},
        "message": "groups/flat_fraction mean 0.600 > 0.500: the batch lost its learning signal",
        "advice": "inject a virtual full-score sample (advantage=ngrpo), refine the reward function, "
        "or sampling=dynamic",
    }


def test_absent_metric_keeps_the_episode_open():
    config = HealthMonitorConfig(zero_std_groups=AboveThreshold(span=1, threshold=0.5))
    monitor = monitor_for(config)
    # Step 2 carries no usable value (None, NaN, or the key missing): the episode opened at step 1
    # stays open, so 0.9 at step 5 raises nothing new.
    stream: Stream = [
        (1, {"groups/flat_fraction": 0.9}),
        (2, {"groups/flat_fraction": None}),
        (3, {"groups/flat_fraction": float("nan")}),
        (4, {"loss": 0.1}),
        (5, {"groups/flat_fraction": 0.9}),
    ]
    assert fired(monitor, stream) == [(1, "zero_std_groups")]


def test_zero_std_groups_default_vs_strict(configs):
    # Default span 10, > 0.5: nine 1.0s are not enough points; the 10th (mean 1.0) fires at step 10.
    assert fired(monitor_for(configs["default"]), series("groups/flat_fraction", [1.0] * 12)) == [
        (10, "zero_std_groups")
    ]
    # A steady 0.4: default never (0.4 <= 0.5); strict (span 5, > 0.3) at step 5.
    steady = series("groups/flat_fraction", [0.4] * 12)
    assert fired(monitor_for(configs["default"]), steady) == []
    assert fired(monitor_for(configs["strict"]), steady) == [(5, "zero_std_groups")]


def test_zero_advantage_threshold_is_strictly_above(configs):
    # Default span 10, > 0.3. Ten 0.25s, then 0.5s: the last-10 mean at step 10+j is (2.5 + 0.25 j)/10.
    # j = 2: exactly 0.3 (not above); j = 3: 0.325 -> fires at step 13.
    stream = series("adv/zero_std_fraction", [0.25] * 10 + [0.5] * 5)
    assert fired(monitor_for(configs["default"]), stream) == [(13, "zero_advantage")]


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
    # Change = mean(last 2 of the window) - mean(first 2); ceiling = reward_max - 0.05.
    # step 7: [0.4, 0.45, 0.5, 0.5] -> 0.5 - 0.425 = 0.075 (rising); step 8: [0.45, 0.5, 0.5, 0.5] ->
    # 0.025 < 0.04 with mean 0.4875 <= 0.95 -> fires. step 10: [0.5, 0.5, 0.5, 0.9] -> 0.2, re-arms.
    # step 13: [0.9, 1, 1, 1] -> 0.05, not flat. step 14: [1, 1, 1, 1] -> flat, but mean 1.0 > 0.95.
    assert fired(monitor_for(config), series("reward", rewards)) == [(8, "reward_plateau")]
    # A composition whose best total is 2.0: ceiling 1.95, so the flat 1.0 at step 14 is a plateau.
    assert fired(monitor_for(config, reward_max=2.0), series("reward", rewards)) == [
        (8, "reward_plateau"),
        (14, "reward_plateau"),
    ]


def test_reward_plateau_default_vs_strict(configs):
    flat = series("reward", [0.5] * 60)
    assert fired(monitor_for(configs["default"]), flat) == [(50, "reward_plateau")]  # window 50
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
    # step 11: the last 10 (steps 11-20) are all zero after a non-zero 0.10 -> step 20.
    stream = series("clip_ratio/region_mean", [k / 100 for k in range(1, 11)] + [0.0] * 12)
    assert fired(monitor_for(configs["default"]), stream) == [(10, "clip_ratio_rising"), (20, "clip_ratio_zero")]


def test_clip_ratio_never_clipping_is_not_a_drop(configs):
    # A fully on-policy run logs a clip ratio of exactly 0 throughout.
    assert fired(monitor_for(configs["default"]), series("clip_ratio/region_mean", [0.0] * 30)) == []


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


@pytest.mark.parametrize(
    ("rule", "node"),
    [
        ("entropy_collapse", "clip=clip_higher"),
        ("entropy_drop", "eps_high >= 0.28"),
        ("zero_std_groups", "advantage=ngrpo"),
        ("zero_advantage", "sampling=dynamic"),
        ("length_growth", "overlong=soft_punish"),
        ("length_near_max", "overlong=soft_punish"),
        ("kl_rising", "kl.beta"),
        ("train_eval_divergence", "kl=constant"),
    ],
)
def test_advice_names_the_align_kit_node(rule, node):
    assert node in next(r.advice for r in RULES if r.name == rule)


def test_alert_is_one_json_line():
    alert = Alert(step=3, rule="kl_rising", action="halt", values={"latest": 0.5}, message="m", advice="a")
    line = alert.to_json()
    assert "\n" not in line
    assert json.loads(line)["values"] == {"latest": 0.5}


@pytest.mark.parametrize(
    ("overrides", "key"),
    [
        ({"kl_rising": {"action": "stop"}}, "monitor.kl_rising.action"),
        ({"kl_rising": {"window": 1}}, "monitor.kl_rising.window"),
        ({"entropy_drop": {"fall": 1.5}}, "monitor.entropy_drop.fall"),
        ({"grad_norm_vanishing": {"windw": 5}}, "monitor.grad_norm_vanishing"),
    ],
)
def test_bad_settings_name_their_key(overrides, key):
    with pytest.raises(ConfigError, match=key):
        HealthMonitorConfig(**overrides)
