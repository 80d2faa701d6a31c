"""The reward family: no signal without a reward scale, format hacking on the `accuracy` and `format` concepts."""

from __future__ import annotations

import numpy as np

from align_kit.monitor.rules import RunContext
from tests.monitor.rules.helpers import fired, replay

NO_RANGE = RunContext(reward_scale_stated=False)


def _slope_t(values: list[float]) -> float:
    """The least-squares slope's t-statistic, by numpy (a second implementation of own_noise.trend_t)."""
    x = np.arange(len(values), dtype=float)
    (slope, intercept), residuals, *_ = np.polyfit(x, values, 1, full=True)
    scatter = residuals[0] / (len(values) - 2)
    return slope / np.sqrt(scatter / np.sum((x - x.mean()) ** 2))


def test_a_plateau_without_a_stated_range_is_read_against_the_runs_own_noise():
    # 120 rows on a custom scale: -1.3 + 0.05 x (+1, -1, ...) with a slow wave 0.02 x sin(i / 7) so the scatter is
    # not a pure alternation. Its slope over the last 100 rows is within 2 standard errors of 0, its mean no higher
    # than its first 10 points': a plateau, first at step 100 (the window's first full reading).
    flat = [-1.3 + 0.05 * (-1) ** i + 0.02 * np.sin(i / 7) for i in range(120)]
    assert abs(_slope_t(flat[:100])) < 2.0
    monitor, alerts = replay([{"reward": r} for r in flat], NO_RANGE)
    assert fired(alerts, "reward_plateau") == [(100, "reward_plateau")]
    assert "no range stated" in alerts[0].message
    # Rising by 0.002 a row under the same noise: the slope is many standard errors from 0, not flat.
    rising = [r + 0.002 * i for i, r in enumerate(flat)]
    assert _slope_t(rising[-100:]) > 2.0
    monitor, alerts = replay([{"reward": r} for r in rising], NO_RANGE)
    assert fired(alerts, "reward_plateau") == [] and {c.rule: c for c in monitor.coverage()}["reward_plateau"].judged
    # Risen from -3.0 (its first 10 rows) to the flat -1.3: a run that learned and levelled off is no plateau.
    learned = [-3.0] * 10 + flat[10:]
    assert fired(replay([{"reward": r} for r in learned], NO_RANGE)[1], "reward_plateau") == []
    # The flat run mapped by 40 x + 7 (any scale, any offset): the same alert at the same step.
    scaled = [{"reward": 40 * r + 7} for r in flat]
    assert fired(replay(scaled, NO_RANGE)[1], "reward_plateau") == [(100, "reward_plateau")]


def test_no_reward_spread_on_two_rows_is_no_signal_whatever_the_scale():
    # Rewards 3.0 (no scale says what that is), reward_std 0 <= 1e-8 on both rows.
    rows = [{"reward": 3.0, "reward_std": 0.0, "frac_reward_zero_std": 1.0}] * 2
    _, alerts = replay(rows)
    signal = [alert for alert in alerts if alert.rule == "no_signal"]
    assert [(a.step, a.words["basis"], a.severity) for a in signal] == [(2, "spread", "failing")]
    # A history of one row: flat from its first row to its last, judged at the end on all of it (the spread basis;
    # 3.0 is above the [0, 1] floor, so not the scale's).
    # One row is one batch, not yet sustained: a warning (two rows above: failing).
    (alert,) = [alert for alert in replay(rows[:1])[1] if alert.rule == "no_signal"]
    assert (alert.step, alert.words["basis"], alert.points, alert.severity) == (1, "spread", 1, "warning")
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


def test_a_short_history_is_a_plateau_only_when_every_point_is_flat_in_the_lower_half():
    # 6 rows at 0.2055-0.2065 (spread 0.001 < tolerance 0.02 x range 1): judged at the end, a plateau below 0.5.
    rows = [{"reward": 0.2055 + 0.0002 * i} for i in range(6)]
    monitor, alerts = replay(rows)
    assert fired(alerts, "reward_plateau") == [(6, "reward_plateau")]
    assert alerts[-1].values["ceiling"] == 0.5  # min(1 - 0.05, 0 + 0.5 x 1)
    # 4 such rows: fewer than `fewest` (5), no decision either way.
    monitor, alerts = replay(rows[:4])
    assert fired(alerts, "reward_plateau") == []
    assert not {c.rule: c for c in monitor.coverage()}["reward_plateau"].judged
    # 4 rows spread 0.37-0.41, or 2 rows at 0.99 (at the top), or 1 row: too few points to judge a trend either
    # way; the rule claims no judgement (a single reward point is no plateau judged, nor a judged absence of one).
    for rewards in ((0.39, 0.40, 0.37, 0.41), (0.99, 0.99), (0.2,)):
        monitor, alerts = replay([{"reward": r} for r in rewards])
        plateau = {c.rule: c for c in monitor.coverage()}["reward_plateau"]
        assert fired(alerts, "reward_plateau") == [] and not plateau.judged
        assert plateau.reason.startswith("needs 5 logged points of reward to judge its trend")
    # 5 rows spread 0.37-0.41 (0.04 >= 0.02): not flat, judged so (no plateau shown).
    monitor, alerts = replay([{"reward": r} for r in (0.39, 0.40, 0.37, 0.41, 0.38)])
    assert fired(alerts, "reward_plateau") == [] and {c.rule: c for c in monitor.coverage()}["reward_plateau"].judged


def test_no_plateau_in_the_upper_half_or_while_the_accuracy_is_high_or_rising():
    # 100 rows flat at 0.6: in the upper half of [0, 1] (ceiling 0.5), a run that learned.
    assert fired(replay([{"reward": 0.6}] * 100)[1], "reward_plateau") == []
    # Flat at 0.3 for 100 rows: a plateau at step 100 ...
    assert fired(replay([{"reward": 0.3}] * 100)[1], "reward_plateau") == [(100, "reward_plateau")]
    # ... unless the accuracy rises between the halves (0.2 -> 0.3, +0.1 > 0.02) or averages above 0.5.
    rising = [{"reward": 0.3, "accuracy": 0.2 if i < 50 else 0.3} for i in range(100)]
    assert fired(replay(rising)[1], "reward_plateau") == []
    high = [{"reward": 0.3, "accuracy": 0.6}] * 100
    assert fired(replay(high)[1], "reward_plateau") == []


def _stall_then_learn(accuracy_after: float) -> list[dict[str, float]]:
    # 60 rows. Rows 1-20: format 0.2 -> 0.5 at row 11 while the accuracy stays 0.2 (reward_collapse fires at row 20:
    # format +0.3 > 0.1, accuracy +0.0 < 0.02). Rows 21-60: format 0.5, accuracy `accuracy_after`.
    return [{"format": 0.2 if i < 10 else 0.5, "accuracy": 0.2 if i < 20 else accuracy_after} for i in range(60)]


def test_reward_collapse_that_the_whole_run_reversed_is_a_recovered_episode():
    # The accuracy rises to 0.6 after the window: first 10 rows' mean 0.2, last 10's 0.6, +0.4 > 0.1 over the run.
    monitor, alerts = replay(_stall_then_learn(0.6))
    assert fired(alerts, "reward_collapse") == [(20, "reward_collapse")]
    assert [(r.rule, r.fired, r.recovered) for r in monitor.recoveries] == [("reward_collapse", 20, 60)]
    # The accuracy ends at 0.21 (+0.01 over the run, within the stall bound 0.02): the alert stands.
    monitor, alerts = replay(_stall_then_learn(0.21))
    assert fired(alerts, "reward_collapse") == [(20, "reward_collapse")]
    assert monitor.recoveries == []


def test_a_short_run_declining_over_half_its_own_spread_is_reward_decline_whatever_the_scale():
    # 8 rows, 22.6 down to 14.1 (a scale nobody stated): 4-point means, best (22.6+20.3+17+14.9)/4 = 18.7, latest
    # (14.1+14.1+13.8+14.1)/4 = 14.025 < 18.7 - 0.5 x (22.6 - 13.8) = 14.3: the spread basis.
    rows = [{"reward": r} for r in (22.6, 20.3, 17.0, 14.9, 14.1, 14.1, 13.8, 14.1)]
    unstated = RunContext(reward_scale_stated=False)  # no range stated, and the rewards leave [0, 1]
    _, alerts = replay(rows, unstated)
    (alert,) = [a for a in alerts if a.rule == "reward_decline"]
    assert (alert.step, alert.words["basis"], alert.severity) == (8, "spread", "failing")
    assert alert.values["threshold"] == 18.7 - 0.5 * (22.6 - 13.8)
    # A stated range of 0..100: the scale decides, 14.025 >= 18.7 - 0.1 x 100; the looser spread is not read.
    assert fired(replay(rows, RunContext(reward_max=100.0))[1], "reward_decline") == []
    # A noisy flat short run: 4-point means move far less than half of the points' range, no alert.
    noisy = [{"reward": r} for r in (1.72, 1.97, 1.80, 1.75, 1.95, 1.74, 1.90, 1.78)]
    assert fired(replay(noisy, unstated)[1], "reward_decline") == []
    # 5 rows: fewer than the 6 a short run needs.
    assert fired(replay(rows[:5], unstated)[1], "reward_decline") == []


def test_a_long_run_without_a_scale_declines_against_its_own_spread():
    # 60 rows, no range stated: 3.0 for 30 rows, then 1.0. The 20-point mean would fall below best
    # 3.0 - 0.5 x (3.0 - 1.0) = 2.0 at row 41, but the latest 20 points fall below the first 20 (all 3.0) by more
    # than 3 standard errors first: at row 37 (7 rows at 1.0), Welch's t is below -3, at row 36 not.
    rewards = [3.0 if i < 30 else 1.0 for i in range(60)]
    assert _welch(rewards[:20], rewards[17:37]) < -3.0 <= _welch(rewards[:20], rewards[16:36])
    _, alerts = replay([{"reward": r} for r in rewards], RunContext(reward_scale_stated=False))
    (alert,) = [a for a in alerts if a.rule == "reward_decline"]
    assert (alert.step, alert.words["basis"]) == (37, "spread")
    # Rewards within [0, 1] are read the same way (no range is assumed from the values): 0.9 then 0.7 is the run
    # above mapped by 0.1 x + 0.6, the same step.
    inside = [{"reward": 0.9 if i < 30 else 0.7} for i in range(60)]
    (alert,) = [a for a in replay(inside, RunContext(reward_scale_stated=False))[1] if a.rule == "reward_decline"]
    assert (alert.step, alert.words["basis"]) == (37, "spread")


def test_no_spread_on_most_of_the_history_is_no_signal_even_when_the_last_rows_are_not_all_flat():
    # 20 rows, reward 0.44, reward_std 0.3 on rows 1, 6, 13 and 18, else 0. After row 12: 10 spreadless rows of
    # 12 (rows 2-5, 7-12), more than half and 10 at least; the last 10 rows (3-12) hold row 6, so the last-rows
    # reading does not hold: the `most` reading fires at step 12, failing.
    rows = [{"reward": 0.44, "reward_std": 0.3 if i in (0, 5, 12, 17) else 0.0} for i in range(20)]
    _, alerts = replay(rows, NO_RANGE)
    (alert,) = [a for a in alerts if a.rule == "no_signal"]
    assert (alert.step, alert.words["basis"], alert.severity) == (12, "most", "failing")
    assert alert.values == {"spreadless_rows": 10, "rows": 12}


def test_groups_flat_at_the_ceiling_the_run_rose_to_are_saturation_not_no_signal():
    # 20 rows rising 0.1 -> 1.0 with spread, then 20 rows at 1.0 with reward_std 0: risen far above its first 10
    # rows (no range stated), or at the stated maximum 1.0: saturated, a warning saying so.
    rows = [{"reward": 0.1 + 0.045 * i, "reward_std": 0.3} for i in range(20)]
    rows += [{"reward": 1.0, "reward_std": 0.0}] * 20
    for context in (NO_RANGE, RunContext(reward_max=1.0)):
        (alert,) = [a for a in replay(rows, context)[1] if a.rule == "no_signal"]
        assert (alert.severity, alert.words["state"]) == ("warning", "saturated")
        assert "saturated, not starved" in alert.message
    # Flat at 1.0 with no spread from its first row: no signal whatever the level, failing.
    flat = [{"reward": 1.0, "reward_std": 0.0}] * 40
    (alert,) = [a for a in replay(flat, NO_RANGE)[1] if a.rule == "no_signal"]
    assert alert.severity == "failing" and "state" not in alert.words


def _welch(first: list[float], latest: list[float]) -> float:
    """Welch's t of mean(latest) - mean(first), by the statistics module (a second implementation)."""
    import statistics

    error = (statistics.variance(first) / len(first) + statistics.variance(latest) / len(latest)) ** 0.5
    return (statistics.fmean(latest) - statistics.fmean(first)) / error


def test_a_steady_fall_within_the_spread_declines_against_the_runs_own_noise():
    # 40 rows, no range stated: -0.025 i with alternating noise +-0.3. The 20-point mean loses 0.5 of the
    # 0.3..-1.275 its rewards cover (half of 1.575 is more), so the spread reading never fires; the latest 20
    # points below the first 20 by more than 3 standard errors does, first where Welch's t crosses -3.
    rewards = [-0.025 * i + 0.3 * (-1) ** i for i in range(40)]
    alerts = [a for a in replay([{"reward": r} for r in rewards], NO_RANGE)[1] if a.rule == "reward_decline"]
    (alert,) = alerts
    step = alert.step
    assert _welch(rewards[:20], rewards[step - 20 : step]) < -3.0 <= _welch(rewards[:20], rewards[step - 21 : step - 1])
    assert alert.values["fall_t"] < -3.0 and alert.words["basis"] == "spread"
