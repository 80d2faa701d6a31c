"""The length budget advised first when every completion was cut from the first logged step."""

from __future__ import annotations

import math

from align_kit.doctor.advice import Advice
from align_kit.doctor.budget_first import budget_first, cut_from_the_start
from align_kit.doctor.diagnose import diagnose
from tests.doctor.histories import history, series

FILTER = Advice("overlong_filter", 1, "overlong=filter", ("all_truncated",))
SHAPING = Advice("overlong_shaping", 1, "overlong=soft_punish", ("all_truncated",))
HARDER = Advice("harder_data", 1, "a harder task mix", ("zero_std_groups",))
LONGER = Advice("raise_max_length", 4, "trainer.max_completion_length=24", ("all_truncated",))
SHARE = "completions/clipped_ratio"


def test_the_stretch_cut_from_the_start_begins_at_the_first_logged_share():
    assert cut_from_the_start(history(series(SHARE, [1.0, 1.0, 1.0, 0.9, 1.0]))) == (1, 3, 3)
    assert cut_from_the_start(history(series(SHARE, [0.9375, 1.0, 1.0]))) is None  # one of 16 finished at first
    assert cut_from_the_start(history(series(SHARE, [1.0]))) is None  # one point does not decide
    assert cut_from_the_start(history(series(SHARE, [1.0, math.nan, 1.0]))) is None
    assert cut_from_the_start(history(series("reward", [0.0, 0.0]))) is None  # the share is not logged


def test_the_budget_goes_first_and_the_overlong_fixes_after_it_say_why():
    cut = history(series(SHARE, [1.0] * 5), start=2, every=2)  # steps 2-10
    advice = budget_first([FILTER, SHAPING, HARDER, LONGER], cut)
    assert [line.fix for line in advice] == ["raise_max_length", "overlong_filter", "overlong_shaping", "harder_data"]
    assert advice[0].text.startswith(
        "trainer.max_completion_length=24 first: every completion was cut from step 2 to 10"
    )
    assert advice[1].text.endswith("(after the budget: it acts on groups that mix cut and finished)")
    assert advice[3] == HARDER  # untouched
    mixed = history(series(SHARE, [1.0, 0.75, 1.0]))
    assert budget_first([FILTER, SHAPING, LONGER], mixed) == [FILTER, SHAPING, LONGER]  # 18.3.8's order stands


def test_a_run_cut_from_its_first_step_is_advised_the_budget_first():
    # Loop 1's run in numbers: a budget of 12 tokens, every completion cut at 12 from step 1.
    rows = series(SHARE, [1.0] * 20, **{"completions/mean_length": 12.0, "reward": 0.0})
    diagnosis = diagnose(history(rows, framework="align_kit"), max_completion_length=12)
    assert "all_truncated" in {alert.rule for alert in diagnosis.counted}
    assert diagnosis.advice[0].fix == "raise_max_length"
    assert diagnosis.advice[0].text.startswith("trainer.max_completion_length=24 first:")
