"""The reward's trend read once over the whole history (monitor/rules/over_run.py), when no range is stated: a rise
establishes that the run learns, a flat history is a plateau, a falling one a decline, and anything else is not shown
healthy. The t statistics the tests expect are computed here by numpy's least squares and by hand, not by the code
under test."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest

from align_kit.doctor.diagnose import diagnose
from align_kit.monitor.rules.over_run import FELL, FLAT, LEARNED, UNCLEAR, trend
from align_kit.monitor.settings import HealthMonitorConfig, RewardPlateau
from tests.doctor.histories import history, series

_RNG = random.Random(7)
NOISE = [_RNG.gauss(0, 1) for _ in range(400)]


def slope_t(values: list[float]) -> float:
    """The least-squares slope over the index in standard errors (numpy's lstsq and the textbook error)."""
    y = np.asarray(values, float)
    x = np.arange(len(y), dtype=float)
    design = np.vstack([np.ones_like(x), x]).T
    coef = np.linalg.lstsq(design, y, rcond=None)[0]
    residual = y - design @ coef
    error = math.sqrt(residual @ residual / (len(y) - 2) / ((x - x.mean()) @ (x - x.mean())))
    return coef[1] / error


def welch_t(early: list[float], recent: list[float]) -> float:
    a, b = np.asarray(early), np.asarray(recent)
    return (b.mean() - a.mean()) / math.sqrt(a.var(ddof=1) / len(a) + b.var(ddof=1) / len(b))


def thirds(values: list[float]) -> tuple[list[float], list[float]]:
    third = len(values) // 3
    return values[:third], values[-third:]


def flat_with_a_low_head() -> list[float]:
    """200 points of noise around 1.0 whose first 10 sit 0.3 lower: by chance, as far as the run can tell."""
    values = [1.0 + 0.3 * noise for noise in NOISE[:200]]
    return [value - 0.3 if index < 10 else value for index, value in enumerate(values)]


def noisy_fall() -> list[float]:
    """90 points falling by 1.1 under a noise of 1: too noisy for the per-point decline's 3 standard errors."""
    return [1.0 - 1.1 * index / 90 + noise for index, noise in enumerate(NOISE[:90])]


def test_a_flat_run_whose_first_points_sit_low_by_chance_is_a_plateau_not_a_run_that_learned():
    values = flat_with_a_low_head()
    # What the live plateau reads: its last 100 points above the first 10 by more than 2 standard errors (a rise)...
    assert welch_t(values[:10], values[-100:]) > 2
    # ...while over the whole history neither the slope nor the thirds tell a rise from the noise.
    assert abs(slope_t(values)) < 2 and welch_t(*thirds(values)) < 2
    diagnosis = diagnose(history(series("reward", values)))
    assert diagnosis.verdict == "warning"
    (alert,) = diagnosis.counted
    assert alert.rule == "reward_plateau" and "read once over the whole history: 200 logged points" in alert.message
    assert alert.step == 200 and alert.first_step == 1


def test_a_noisy_fall_under_the_per_point_bound_is_a_decline_over_the_whole_run():
    values = noisy_fall()
    assert -3 < welch_t(values[:20], values[-20:]) < 0  # the per-point reading: not 3 standard errors
    assert slope_t(values) < -2 and np.mean(values[-30:]) < np.mean(values[:30])
    diagnosis = diagnose(history(series("reward", values)))
    assert diagnosis.verdict == "failing"
    assert [alert.rule for alert in diagnosis.counted] == ["reward_decline"]
    assert "whole history" in diagnosis.counted[0].message


def test_a_rise_over_the_run_is_healthy():
    values = [0.5 + 0.5 * index / 150 + 0.3 * noise for index, noise in enumerate(NOISE[:150])]
    assert slope_t(values) > 2
    diagnosis = diagnose(history(series("reward", values)))
    assert diagnosis.verdict == "healthy" and diagnosis.exit_code == 0


def test_a_flat_reward_whose_accuracy_rose_learned():
    values = flat_with_a_low_head()
    accuracy = [0.2 + 0.3 * index / 200 + 0.02 * noise for index, noise in enumerate(NOISE[200:400])]
    assert slope_t(accuracy) > 2
    rows = [{"reward": reward, "accuracy": acc} for reward, acc in zip(values, accuracy, strict=True)]
    reading = trend(values, accuracy)
    assert reading.state == LEARNED
    assert "reward_plateau" not in [alert.rule for alert in diagnose(history(rows)).counted]


@pytest.mark.parametrize(
    ("values", "state"),
    [
        (flat_with_a_low_head(), FLAT),
        (noisy_fall(), FELL),
    ],
)
def test_the_states_as_the_statistics_say(values, state):
    reading = trend(values)
    assert reading.state == state
    assert reading.slope_t == pytest.approx(slope_t(values), rel=1e-9)
    early, recent = thirds(values)
    assert reading.thirds_t == pytest.approx(welch_t(early, recent), rel=1e-9)


def test_a_flat_run_whose_plateau_is_only_noted_is_not_shown_healthy():
    """With the plateau's action `log`, nothing counts against the run, yet nothing established that it learns."""
    config = HealthMonitorConfig(reward_plateau=RewardPlateau(action="log"))
    diagnosis = diagnose(history(series("reward", flat_with_a_low_head())), config)
    assert not diagnosis.counted
    assert diagnosis.verdict == "unjudged" and diagnosis.exit_code == 4
    assert "that the run learns was not established" in diagnosis.summary
    assert diagnosis.questions["does it learn"] is False


def test_under_three_points_it_reads_nothing():
    assert trend([0.1, 0.2]) is None


def test_a_short_history_falling_under_the_short_rules_bounds_is_not_shown_healthy():
    """12 points falling by 0.8 under a noise of 0.35: no short rule fires; only a rise would show it learns."""
    values = [1.0 - 0.8 * index / 12 + 0.35 * noise for index, noise in enumerate(NOISE[:12])]
    assert slope_t(values) < -2
    reading = trend(values)
    assert reading.short and reading.state == UNCLEAR
    assert reading.slope_t == pytest.approx(slope_t(values), rel=1e-9)
    diagnosis = diagnose(history(series("reward", values)))
    assert not diagnosis.counted and diagnosis.verdict == "unjudged"
    assert "that the run learns was not established (over its 12 points" in diagnosis.summary


def test_a_short_history_that_rises_learned():
    values = [0.2 + 0.5 * index / 12 + 0.1 * noise for index, noise in enumerate(NOISE[:12])]
    assert slope_t(values) > 2
    assert trend(values).state == LEARNED
    assert diagnose(history(series("reward", values))).verdict == "healthy"


def test_unchanged_by_a_positive_affine_map():
    values = noisy_fall()
    reading = trend(values)
    mapped = trend([-4.0 + 0.25 * value for value in values])
    assert mapped.state == reading.state
    assert mapped.slope_t == pytest.approx(reading.slope_t, rel=1e-9)
    assert mapped.thirds_t == pytest.approx(reading.thirds_t, rel=1e-9)


def test_a_stated_scale_keeps_the_window_rules():
    diagnosis = diagnose(history(series("reward", flat_with_a_low_head()), context={"reward_max": 2.0}))
    assert not any("whole history" in alert.message for alert in diagnosis.alerts)
