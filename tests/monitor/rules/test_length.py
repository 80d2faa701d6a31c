"""The length family: every completion truncated (the share, or the length at the budget), the budget read from a
hard cap, a truncation collapse over 3 rows."""

from __future__ import annotations

from align_kit.monitor.rules import RunContext
from tests.monitor.rules.helpers import fired, replay


def test_every_completion_truncated_on_two_rows_fails():
    _, alerts = replay([{"completions/clipped_ratio": 1.0}, {"completions/clipped_ratio": 1.0}])
    assert fired(alerts, "all_truncated") == [(2, "all_truncated")]
    (alert,) = [a for a in alerts if a.rule == "all_truncated"]
    assert alert.severity == "failing" and alert.fixes[0] == "raise_max_length"
    # 0.98 < 0.99 on the second row: not every completion.
    _, alerts = replay([{"completions/clipped_ratio": 1.0}, {"completions/clipped_ratio": 0.98}])
    assert fired(alerts, "all_truncated") == []


def test_a_three_row_truncation_collapse_fails():
    # Shares 0.30, 0.60, 0.995: not two rows >= 0.99, but the last is while entropy fell 1.03 -> 0.008 < 0.1 x 1.03.
    rows = [
        {"completions/clipped_ratio": 0.30, "entropy": 1.03, "grad_norm": 0.5},
        {"completions/clipped_ratio": 0.60, "entropy": 0.5, "grad_norm": 0.2},
        {"completions/clipped_ratio": 0.995, "entropy": 0.008, "grad_norm": 0.0},
    ]
    _, alerts = replay(rows)
    assert fired(alerts, "all_truncated") == [(3, "all_truncated")]
    (alert,) = [a for a in alerts if a.rule == "all_truncated"]
    assert "reached 0.995 while entropy fell from 1.03 to 0.008" in alert.message


def test_the_mean_length_at_a_stated_budget_is_every_completion_truncated():
    rows = [{"completions/mean_length": 256.0}] * 2
    _, alerts = replay(rows, RunContext(max_completion_length=256))
    assert ("all_truncated", 2) in {(a.rule, a.step) for a in alerts}
    # 255.4 < 256 - 0.5: some answers ended.
    _, alerts = replay([{"completions/mean_length": 256.0}, {"completions/mean_length": 255.4}],
                       RunContext(max_completion_length=256))  # fmt: skip
    assert fired(alerts, "all_truncated") == []


def test_a_hard_cap_in_the_longest_completion_is_the_budget():
    # No budget stated; the longest completion is 512 on both rows: the cap. Mean 500 >= 0.95 x 512 = 486.4.
    rows = [{"completions/max_length": 512.0, "completions/mean_length": 500.0}] * 2
    _, alerts = replay(rows)
    assert fired(alerts, "length_near_max") == [(2, "length_near_max")]
    assert alerts[0].values["max_completion_length"] == 512.0
    # Longest 512 then 498: no cap, no budget, length_near_max cannot judge.
    rows = [{"completions/max_length": 512.0, "completions/mean_length": 500.0},
            {"completions/max_length": 498.0, "completions/mean_length": 480.0}]  # fmt: skip
    assert fired(replay(rows)[1], "length_near_max") == []


def test_most_completions_truncated_is_length_near_max_whatever_the_budget():
    # No budget stated and no cap: one row with 75% of completions cut (>= 0.5), judged at the end on that row.
    _, alerts = replay([{"completions/clipped_ratio": 0.75, "completions/mean_length": 2362.0}])
    (alert,) = [a for a in alerts if a.rule == "length_near_max"]
    assert alert.severity == "warning" and alert.values == {"clipped_mean": 0.75, "clipped": 0.5}
    assert alert.message.startswith("truncated share (completions/clipped_ratio) mean 0.750 >= 0.5")
    # 40% cut (< 0.5), the mean length far below the stated budget 4096: no alert.
    rows = [{"completions/clipped_ratio": 0.4, "completions/mean_length": 2000.0}]
    assert fired(replay(rows, RunContext(max_completion_length=4096))[1], "length_near_max") == []
