"""The monitor's per-step shortcuts (monitor/rules/base.py) against a recomputation from the values themselves: the
run of rises a window's monotone test reads, the head's mean kept once logged, one smoothed mean per new value, and
the first logged alternative once a new metric appears. The doctor replays every rule through them."""

from __future__ import annotations

import math
import random

from align_kit.monitor.rules.base import History, Series, first_logged


def rises_by_hand(values: list[float]) -> int:
    count = 0
    for earlier, later in zip(reversed(values[:-1]), reversed(values[1:]), strict=True):
        if later <= earlier:
            break
        count += 1
    return count


def test_the_run_of_rises_and_the_head_mean_match_a_recomputation():
    rng = random.Random(3)
    series = Series(head=10, tail=30)
    logged: list[float] = []
    for step in range(200):
        # stretches that rise, then a fall or a repeat
        value = (logged[-1] + rng.random()) if logged and rng.random() < 0.8 else rng.choice([0.0, 5.0])
        series.append(step, value)
        logged.append(value)
        assert series.rises == rises_by_hand(logged)
        for n in (1, 5, 10):
            assert series.mean_first(n) == math.fsum(logged[:n]) / len(logged[:n])
    # after a resume the run of rises is read again from the kept values (as far as they go)
    resumed = Series(head=10, tail=30)
    resumed.load_state_dict(series.state_dict())
    assert resumed.rises == min(series.rises, 29)


def test_one_smoothed_mean_per_value_matches_the_means_of_the_kept_values():
    rng = random.Random(5)
    series = Series(tail=40)
    logged = []
    for step in range(1, 120):
        value = rng.gauss(0, 1)
        series.append(step, value)
        logged.append((step, value))
        if step % 7 == 0 or step > 100:  # read now and then (several new values) and at every value
            kept = logged[-40:]
            expected = [
                (kept[end - 4][0], kept[end][0], math.fsum(v for _, v in kept[end - 4 : end + 1]) / 5)
                for end in range(4, len(kept))
            ]
            assert series.smoothed(5) == expected


def test_the_smoothed_window_matches_a_pass_over_the_smoothed_means():
    """The latest smoothed mean, the window's highest, its first step and size (a monotone queue) against the
    means themselves, read now and then and at every value, steps logged every 1-3, a window of 12 steps."""
    rng = random.Random(9)
    series = Series(tail=30)
    step = 0
    for index in range(300):
        step += rng.choice([1, 1, 2, 3])
        series.append(step, rng.gauss(0, 1) + (3.0 if 100 < index < 110 else 0.0))  # a bump to be the highest
        if index < 4 or (index % 5 and index < 200):
            continue
        since = step - 12
        window = [mean for mean in series.smoothed(5) if mean[1] >= since]
        assert series.smoothed_window(5, since) == (
            window[-1][2],
            max(mean for _, _, mean in window),
            window[0][0],
            len(window),
        )


def test_the_first_logged_alternative_follows_a_metric_logged_later():
    history = History()
    names = ("groups/flat_fraction", "frac_reward_zero_std")
    assert first_logged(history, names) == "groups/flat_fraction"  # none logged: the first name
    history["frac_reward_zero_std"] = Series(tail=2)
    history["frac_reward_zero_std"].append(1, 0.5)
    assert first_logged(history, names) == "frac_reward_zero_std"
    history["groups/flat_fraction"] = Series(tail=2)
    history["groups/flat_fraction"].append(2, 0.25)
    assert first_logged(history, names) == "groups/flat_fraction"
