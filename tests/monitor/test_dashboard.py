"""The dashboard of the policy-optimization chapter (18.3.7), character for character, and its windows."""

from __future__ import annotations

from align_kit.monitor import Alert, dashboard_line
from align_kit.monitor.dashboard import Dashboard

SEED_EXAMPLE = {
    "loss": 0.42,
    "reward": 0.625,
    "rewards/format/mean": 0.875,
    "kl": 0.003,
    "tokens_per_sec": 2450.3,
    "completions/mean_length": 287.4,
    "adv/mean": 0.0,
    "adv/std": 0.82,
    "entropy": 0.47,
    "policy_ratio/mean": 1.02,
}


def test_seed_example_verbatim():
    assert dashboard_line(150, 500, SEED_EXAMPLE) == (
        "[Step 150/500] loss=0.42 reward_avg=0.625 format_reward_avg=0.875\n"
        "  kl=0.003 tok/sec=2450.3 avg_resp_len=287.4\n"
        "  adv_avg=0.00 adv_std=0.82 entropy_avg=0.47 policy_ratio=1.02"
    )


def test_rounding_and_negative_zero():
    metrics = {**SEED_EXAMPLE, "loss": 0.4249, "reward": 0.12345, "adv/mean": -0.001, "adv/std": -0.5}
    # loss 0.4249 -> 0.42; reward 0.12345 -> 0.123; adv/mean -0.001 rounds to zero and prints without
    # a sign; a genuinely negative value keeps it.
    line = dashboard_line(7, 10, metrics)
    assert line.startswith("[Step 7/10] loss=0.42 reward_avg=0.123 ")
    assert line.endswith("  adv_avg=0.00 adv_std=-0.50 entropy_avg=0.47 policy_ratio=1.02")


def test_missing_fields_show_a_dash():
    # No format reward, no KL (beta 0), no throughput or advantage stats; None is missing too.
    metrics = {"loss": 0.5, "reward": 0.25, "completions/mean_length": 21.0, "entropy": None}
    assert dashboard_line(3, None, metrics) == (
        "[Step 3/-] loss=0.50 reward_avg=0.250 format_reward_avg=-\n"
        "  kl=- tok/sec=- avg_resp_len=21.0\n"
        "  adv_avg=- adv_std=- entropy_avg=- policy_ratio=-"
    )


def test_alerts_are_appended_one_per_line():
    alerts = [
        Alert(150, "entropy_drop", "halt", {}, "entropy 0.2 < 0.25 (window max 0.5)", "clip=clip_higher"),
        Alert(150, "kl_rising", "warn", {}, "kl rose", "kl.beta"),
    ]
    lines = dashboard_line(150, 500, SEED_EXAMPLE, alerts).split("\n")
    assert lines[3:] == [
        "  ALERT entropy_drop (halt): entropy 0.2 < 0.25 (window max 0.5); advice: clip=clip_higher",
        "  ALERT kl_rising (warn): kl rose; advice: kl.beta",
    ]


def test_one_block_per_generation_window():
    # 2 mini-steps per generation, logging_steps=1: steps 1 and 3 generate (they log a reward), step 2
    # only trains. Step 2 prints nothing; step 3's block shows the mean of steps 2-3 (loss (0.75 + 0.25)/2
    # = 0.5, entropy (0.375 + 0.125)/2 = 0.25) with step 3's reward.
    dashboard = Dashboard()
    first = dashboard.update(1, 4, {"loss": 0.125, "reward": 0.5, "entropy": 0.5})
    assert first.startswith("[Step 1/4] loss=0.12 reward_avg=0.500 ")
    assert dashboard.update(2, 4, {"loss": 0.75, "entropy": 0.375, "policy_ratio/mean": 1.25}) is None
    block = dashboard.update(3, 4, {"loss": 0.25, "reward": 0.75, "entropy": 0.125, "policy_ratio/mean": 1.0})
    assert block == (
        "[Step 3/4] loss=0.50 reward_avg=0.750 format_reward_avg=-\n"
        "  kl=- tok/sec=- avg_resp_len=-\n"
        "  adv_avg=- adv_std=- entropy_avg=0.25 policy_ratio=1.12"
    )
    assert "[Step 2/" not in first + block


def test_alerts_on_a_training_only_step_print_at_once():
    alert = Alert(2, "non_finite", "halt", {}, "grad_norm is nan", "lower trainer.learning_rate")
    dashboard = Dashboard()
    dashboard.update(1, 4, {"loss": 0.5, "reward": 0.5})
    text = dashboard.update(2, 4, {"loss": float("nan"), "grad_norm": float("nan")}, [alert])
    assert text == "ALERT non_finite (halt): grad_norm is nan; advice: lower trainer.learning_rate"


def test_window_means_skip_missing_and_non_finite_values():
    dashboard = Dashboard()
    for row in [{"loss": 0.5, "entropy": None}, {"loss": float("nan"), "entropy": 0.25}, {"loss": 0.25, "kl": 1.0}]:
        assert dashboard.update(1, 4, row) is None
    # loss (0.5 + 0.25) / 2; entropy and kl from their one finite value each.
    assert dashboard.window_means() == {"loss": 0.375, "entropy": 0.25, "kl": 1.0}
