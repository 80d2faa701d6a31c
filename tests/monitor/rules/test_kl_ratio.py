"""The KL family: a rise from an exact 0 is the start, not an alert; a drift far from the reference in a short run
fires at its end; a flat-reward alert whose reward later rose is a recovery."""

from __future__ import annotations

from tests.monitor.rules.helpers import fired, replay


def test_kl_rising_from_an_exact_zero_is_not_an_alert():
    # 0, 0.001, ..., 0.009: strictly rising over the window of 10, but from KL's exact 0 (the policy is the
    # reference at the start). From 0.001 to 0.010 it is a rise.
    assert fired(replay([{"kl": 0.001 * i} for i in range(10)])[1], "kl_rising") == []
    assert fired(replay([{"kl": 0.001 * i} for i in range(1, 11)])[1], "kl_rising") == [(10, "kl_rising")]


def test_kl_drifting_far_while_the_reward_stays_flat_fires_at_the_end():
    # 30 rows, KL 0.002 + 0.1 i (0.002 -> 2.902), reward 0.3. Whole history: halves of 15 average 0.702 and 2.202,
    # a growth of 2.14 > 1; an exact line (t infinite); the second half 2.202 >= far 1.0; the reward moved 0.
    rows = [{"kl": 0.002 + 0.1 * i, "reward": 0.3} for i in range(30)]
    _, alerts = replay(rows)
    assert fired(alerts, "kl_rising_flat_reward") == [(30, "kl_rising_flat_reward")]
    drift = alerts[[a.rule for a in alerts].index("kl_rising_flat_reward")]
    assert round(drift.values["kl_first_half"], 6) == 0.702 and round(drift.values["kl_second_half"], 6) == 2.202


def test_a_flat_reward_alert_whose_reward_later_rose_is_recovered():
    # KL 0.001 x 1.05^row over 110 rows: over any 40 rows the halves differ by 1.05^20 = 2.65 (growth 1.65 > 1,
    # t well above 3). Reward 0.3 for 80 rows, then 0.6: first judged at row 80 (2 x 40), flat, so it fires.
    rows = [{"kl": 0.001 * 1.05**step, "reward": 0.3 if step <= 80 else 0.6} for step in range(1, 111)]
    monitor, alerts = replay(rows)
    assert fired(alerts, "kl_rising_flat_reward") == [(80, "kl_rising_flat_reward")]
    # From row 81 the reward's halves differ by more than 0.05: (row 81 + 20) the window's second half holds 0.6s.
    recovered = [item for item in monitor.recoveries if item.rule == "kl_rising_flat_reward"]
    assert [(item.fired, item.recovered) for item in recovered] == [(80, 84)]
