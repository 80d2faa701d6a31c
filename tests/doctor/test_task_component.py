"""Whether the run learns, judged on its task component (the accuracy) when one is logged (monitor/rules/over_run.py):
a total that rises only through the format reward while the answer reward falls is reward hacking (failing), one
whose answer reward stays within its noise is not shown to learn (unjudged, exit 4). The slopes the tests rely on
are computed here by numpy's least squares, not by the code under test."""

from __future__ import annotations

import random

import pytest

from align_kit.doctor.diagnose import diagnose
from align_kit.monitor.rules.over_run import LEARNED, TASK_FELL, TASK_FLAT, trend
from tests.doctor.histories import history
from tests.doctor.test_over_run import slope_t  # numpy's least squares, the textbook error

_RNG = random.Random(11)
NOISE = [_RNG.gauss(0, 1) for _ in range(1200)]
N = 300


def components(accuracy_gain: float) -> list[dict[str, float]]:
    """N rows: a format reward climbing 0 -> 3 slowly (0.2 per 20-point window, under the window rule's bound of a
    tenth of the total's range; its noise too small to pass it by chance), an answer reward from -2 moving by
    `accuracy_gain` over the run with a noise of 0.3; the total their sum."""
    rows = []
    for i in range(N):
        fmt = 3.0 * i / N + 0.05 * NOISE[i]
        acc = -2.0 + accuracy_gain * i / N + 0.3 * NOISE[N + i]
        rows.append({"reward": fmt + acc, "format": fmt, "accuracy": acc})
    return rows


def column(rows: list[dict[str, float]], key: str) -> list[float]:
    return [row[key] for row in rows]


def test_the_total_rising_through_the_format_while_the_answer_falls_is_reward_hacking():
    rows = components(accuracy_gain=-2.5)
    assert slope_t(column(rows, "reward")) > 2 and slope_t(column(rows, "accuracy")) < -2
    reading = trend(column(rows, "reward"), column(rows, "accuracy"))
    assert reading.state == TASK_FELL
    diagnosis = diagnose(history(rows))
    assert diagnosis.verdict == "failing" and diagnosis.exit_code == 3
    (alert,) = [alert for alert in diagnosis.counted if "whole history" in alert.message]
    assert alert.rule == "reward_collapse" and "read once over the whole history: 300 logged points" in alert.message
    assert alert.values["accuracy_slope_t"] == pytest.approx(slope_t(column(rows, "accuracy")), rel=1e-9)


def test_the_total_rising_while_the_answer_stays_within_its_noise_is_not_healthy():
    rows = components(accuracy_gain=0.0)
    assert abs(slope_t(column(rows, "accuracy"))) < 2 < slope_t(column(rows, "reward"))
    assert trend(column(rows, "reward"), column(rows, "accuracy")).state == TASK_FLAT
    diagnosis = diagnose(history(rows))
    assert not diagnosis.counted
    assert diagnosis.verdict == "unjudged" and diagnosis.exit_code == 4
    assert "no rise of the task component" in diagnosis.summary
    assert diagnosis.questions["does it learn"] is False


def test_the_answer_rising_with_the_total_learned():
    rows = components(accuracy_gain=1.5)
    assert slope_t(column(rows, "accuracy")) > 2
    assert trend(column(rows, "reward"), column(rows, "accuracy")).state == LEARNED
    assert diagnose(history(rows)).verdict == "healthy"


def test_with_no_task_component_the_total_decides_as_before():
    rows = [{"reward": row["reward"]} for row in components(accuracy_gain=-2.5)]
    assert trend(column(rows, "reward")).state == LEARNED
    assert diagnose(history(rows)).verdict == "healthy"


def test_a_short_history_whose_total_rises_without_its_answer_is_not_shown_healthy():
    rows = [{"reward": 0.1 * i + 0.05 * NOISE[i], "accuracy": 0.5 + 0.2 * NOISE[600 + i]} for i in range(12)]
    assert slope_t(column(rows, "reward")) > 2 and abs(slope_t(column(rows, "accuracy"))) < 2
    reading = trend(column(rows, "reward"), column(rows, "accuracy"))
    assert reading.short and reading.state == TASK_FLAT
    assert diagnose(history(rows)).verdict == "unjudged"


@pytest.mark.parametrize(("scale", "shift"), [(0.01, 5.0), (40.0, -3.0)])
def test_the_same_verdict_on_any_positive_affine_map(scale, shift):
    for gain, verdict in ((-2.5, "failing"), (0.0, "unjudged"), (1.5, "healthy")):
        rows = [{key: scale * value + shift for key, value in row.items()} for row in components(gain)]
        diagnosis = diagnose(history(rows))
        assert diagnosis.verdict == verdict, (gain, scale, shift)
