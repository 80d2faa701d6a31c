"""The reward family: no signal without a reward scale, format hacking on the `accuracy` and `format` concepts."""

from __future__ import annotations

from tests.monitor.rules.helpers import fired, replay


def test_no_reward_spread_on_two_rows_is_no_signal_whatever_the_scale():
    # Rewards 3.0 (no scale says what that is), reward_std 0 <= 1e-8 on both rows.
    rows = [{"reward": 3.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0}] * 2
    _, alerts = replay(rows)
    signal = [alert for alert in alerts if alert.rule == "no_signal"]
    assert [(a.step, a.words["basis"], a.severity) for a in signal] == [(2, "spread", "failing")]
    # A history of one row: flat from its first row to its last, judged at the end on all of it (the spread basis;
    # 3.0 is above the [0, 1] floor, so not the scale's).
    (alert,) = [alert for alert in replay(rows[:1])[1] if alert.rule == "no_signal"]
    assert (alert.step, alert.words["basis"], alert.points) == (1, "spread", 1)
    # Two rows, the first with a spread: not every row of the history is flat.
    mixed = [{"reward": 3.0, "reward_std": 0.5}, {"reward": 3.0, "reward_std": 0.0}]
    assert fired(replay(mixed)[1], "no_signal") == []


def test_every_group_flat_with_the_loss_at_zero_is_no_signal():
    # No reward_std logged: the flat share 1.0 >= 0.99 with the loss exactly 0 on both rows (grad_norm 0.006 from
    # a KL term). The loss at 0.02 on the second row breaks it.
    rows = [{"frac_reward_zero_std": 1.0, "loss": 0.0, "grad_norm": 0.006, "reward": 0.9}] * 2
    assert fired(replay(rows)[1], "no_signal") == [(2, "no_signal")]
    rows[1] = {**rows[1], "loss": 0.02}
    assert fired(replay(rows)[1], "no_signal") == []


def test_format_rising_while_accuracy_falls_on_the_concept_columns():
    # 20 rows: format 0.2 then 0.5 (halves gain +0.3 > 0.1), accuracy 0.4 then 0.3 (-0.1 < 0.02).
    rows = [{"format": 0.2 if i < 10 else 0.5, "accuracy": 0.4 if i < 10 else 0.3} for i in range(20)]
    _, alerts = replay(rows)
    assert fired(alerts, "reward_collapse") == [(20, "reward_collapse")]
    assert alerts[0].message.startswith("format rose +0.300 while accuracy moved -0.100")
    # 6 rows (fewer than the window of 20): judged at the end on the 6, halves of 3, the same gains.
    short = [{"format": 0.2 if i < 3 else 0.5, "accuracy": 0.4 if i < 3 else 0.3} for i in range(6)]
    assert fired(replay(short)[1], "reward_collapse") == [(6, "reward_collapse")]
