"""A verdict does not depend on the reward's scale: every labelled run of benchmarks/doctor_runs, its reward columns
mapped by a * x + b (a > 0), gets the verdict and the alerts it gets as logged. The mapped columns: the total reward,
the eval reward, each component (rewards/<name>/mean, and the accuracy and format roles read from them) and a stated
reward range by a * x + b; the reward spread (reward_std) by a. Nothing else moves (lengths, entropy, KL)."""

from __future__ import annotations

import csv
from functools import cache

import pytest

from align_kit.doctor.diagnose import diagnose
from align_kit.doctor.history import RunHistory
from align_kit.doctor.readers import read_runs
from tests.conftest import ROOT

LABELS = ROOT / "benchmarks" / "doctor_runs" / "labels.csv"
# (a, b): a range moved far below 0, one squeezed inside [0, 1] (rewards of 0..1 become 0.7..0.75), one stretched.
MAPS = [(3.0, -2.0), (0.05, 0.7), (12.5, 40.0)]
SHIFTED = ("reward", "eval_reward", "accuracy", "format", "reward/max_attainable")
SPREADS = ("reward_std",)


def _labelled() -> list[str]:
    with LABELS.open(newline="") as handle:
        rows = [row for row in csv.DictReader(handle) if row["run"].strip() and not row["run"].startswith("#")]
    # The align_kit runs under outputs/ are rebuilt by benchmarks/alert_calibration.py, not kept in the repository.
    return [row["path"] for row in rows if (ROOT / row["path"]).exists()]


def mapped(history: RunHistory, a: float, b: float) -> RunHistory:
    def value(concept: str, x: float) -> float:
        if concept in SHIFTED or (concept.startswith("rewards/") and concept.endswith("/mean")):
            return a * x + b
        return a * x if concept in SPREADS else x

    context = dict(history.context)
    for key in ("reward_max", "reward_min"):
        if isinstance(context.get(key), int | float):
            context[key] = a * context[key] + b
    rows = [(step, {concept: value(concept, x) for concept, x in row.items()}) for step, row in history.rows]
    return RunHistory(
        history.source, history.format, history.framework, rows, dict(history.mapping), list(history.unmapped),
        list(history.notes), context, history.name, dict(history.roles),
    )  # fmt: skip


@cache
def histories(path: str) -> tuple[RunHistory, ...]:
    return tuple(read_runs(str(ROOT / path)))


def judged(history: RunHistory) -> tuple[str, list[tuple[int, str, str]]]:
    diagnosis = diagnose(history)
    return diagnosis.verdict, [(alert.step, alert.rule, alert.action) for alert in diagnosis.alerts]


def test_the_labelled_set_is_here():
    assert len(_labelled()) >= 60


def test_mapping_moves_the_reward_columns_and_their_spread():
    # By hand: reward 0.5 -> 3 x 0.5 - 2 = -0.5; reward_std 0.2 -> 0.6; entropy unchanged.
    run = RunHistory("r", "trl_state", "trl", [(1, {"reward": 0.5, "reward_std": 0.2, "entropy": 1.1})])
    assert mapped(run, 3.0, -2.0).rows == [(1, {"reward": -0.5, "reward_std": 0.6000000000000001, "entropy": 1.1})]


@pytest.mark.parametrize(
    "path",
    # Every fourth labelled run in the default tier, every run in the slow tier (about a minute in all).
    [path if index % 4 == 0 else pytest.param(path, marks=pytest.mark.slow) for index, path in enumerate(_labelled())],
)
def test_the_verdict_is_the_same_on_any_reward_scale(path):
    for history in histories(path):
        logged = judged(history)
        for a, b in MAPS:
            assert judged(mapped(history, a, b)) == logged, f"{history.name}: rewards mapped by {a} x + {b}"
