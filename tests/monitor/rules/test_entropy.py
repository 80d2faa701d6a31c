"""The entropy family judged as the chapters do (16.6, figure 16-11; 18.3.1): entropy falling while the accuracy or
reward rises is convergence, a note; falling while it stalls is collapse; short histories judged at their end."""

from __future__ import annotations

from tests.monitor.rules.helpers import fired, replay

# Entropy 1.0 for 10 rows then 0.25 for 10: first-10 mean 1.0, last-10 mean 0.25 < (1 - 0.5) x 1.0 at row 20.
FALLING = [1.0] * 10 + [0.25] * 10


def test_entropy_falling_while_the_reward_rises_is_convergence_not_collapse():
    # Reward 0.1 then 0.6: the same first and last 10 rows gain 0.5 > 0.05 x (1 - 0). entropy_drop is silent too:
    # at row 17 its smoothed 0.475 < 0.5 x 1.0, but the reward since row 1 went 0.1 -> (3 x 0.1 + 7 x 0.6) / 10 =
    # 0.45, a gain of 0.35.
    rows = [{"entropy": e, "reward": 0.1 if i < 10 else 0.6} for i, e in enumerate(FALLING)]
    _, alerts = replay(rows)
    assert fired(alerts, "entropy_collapse", "entropy_converging", "entropy_drop") == [(20, "entropy_converging")]
    note = next(alert for alert in alerts if alert.rule == "entropy_converging")
    assert note.action == "log" and note.severity == "note" and note.fixes == ()
    assert note.message.endswith("while reward rose (0.1 -> 0.6): the policy is converging, not collapsing")


def test_entropy_falling_while_the_accuracy_stalls_is_collapse_even_if_the_reward_rises():
    # The accuracy decides when logged: flat at 0.3, while the reward (format paid) rises 0.1 -> 0.6.
    rows = [{"entropy": e, "reward": 0.1 if i < 10 else 0.6, "accuracy": 0.3} for i, e in enumerate(FALLING)]
    _, alerts = replay(rows)
    assert fired(alerts, "entropy_collapse", "entropy_converging") == [(20, "entropy_collapse")]
    collapse = next(alert for alert in alerts if alert.rule == "entropy_collapse")
    assert collapse.severity == "failing" and "while accuracy stalled or fell (0.3 -> 0.3)" in collapse.message


def test_an_18_point_collapse_with_answers_shrinking_fails_at_the_end():
    # 9 rows of entropy 0.96 and length 53, then 9 of 0.05 and 4 tokens: fewer than the 20 points either rule
    # reads live; at the end each compares halves of 9: entropy 0.05 < 0.5 x 0.96 = 0.48; length 4 <= 10 tokens
    # and <= 0.25 x 53 = 13.25 while entropy fell below 0.48.
    rows = [{"entropy": 0.96, "completions/mean_length": 53.0}] * 9
    rows += [{"entropy": 0.05, "completions/mean_length": 4.0}] * 9
    _, alerts = replay(rows)
    assert fired(alerts, "entropy_collapse", "length_collapse") == [(18, "entropy_collapse"), (18, "length_collapse")]
    ends = {alert.rule: alert for alert in alerts}
    assert ends["length_collapse"].severity == "failing"
    assert ends["entropy_collapse"].message.endswith(
        "(judged at the end on 18 logged points, fewer than the 20 it reads)"
    )


def test_an_entropy_dip_that_recovered_is_a_recovery():
    # 1.0 x 10, 0.25 x 10, 1.0 x 10. entropy_drop: the smoothed value 1 - 0.075 j < 0.5 first at row 17; it is
    # 0.25 + 0.075 k >= 0.5 again first at row 20 + 4. entropy_collapse fires at 20 (no reward: entropy decides)
    # and its last-10 mean is the same smoothed value: false again at row 24.
    monitor, alerts = replay([{"entropy": e} for e in FALLING + [1.0] * 10])
    assert fired(alerts, "entropy_drop", "entropy_collapse") == [(17, "entropy_drop"), (20, "entropy_collapse")]
    spans = {(item.rule, item.fired, item.recovered) for item in monitor.recoveries}
    assert {("entropy_drop", 17, 24), ("entropy_collapse", 20, 24)} <= spans


def test_a_non_finite_entropy_is_a_failure():
    _, alerts = replay([{"entropy": float("nan"), "loss": 0.1, "grad_norm": 0.2}])
    assert [(a.rule, a.severity, a.message) for a in alerts] == [
        ("non_finite", "failing", "entropy is nan: the first non-finite value among loss, grad_norm, entropy, kl")
    ]
