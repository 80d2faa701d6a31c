"""The length budget from a file's evidence: stated in a notebook cell or a printed config, else inferred from
lengths sitting at one repeated maximum; and the truncation rules judging from it."""

from __future__ import annotations

from align_kit.doctor.budget import inferred_budget, stated_budget
from align_kit.doctor.diagnose import diagnose
from tests.doctor.histories import history


def test_a_budget_stated_in_a_notebook_cell_or_a_printed_config():
    assert stated_budget("training_args = GRPOConfig(\\n    max_completion_length = 200,\\n") == (
        200,
        "max_completion_length = 200",
    )
    assert stated_budget("{'max_completion_length': 1024, 'beta': 0.0}") == (1024, "max_completion_length': 1024")
    # Unsloth's difference, with both values set in the file: 1024 - 256.
    cell = (
        "max_seq_length = 1024\\nmax_prompt_length = 256\\nmax_completion_length = max_seq_length - max_prompt_length"
    )
    assert stated_budget(cell)[0] == 768
    # A difference of values computed from the data, or another setting's name: nothing stated.
    assert stated_budget("max_prompt_length = maximum_length + 1\\nmax_completion_length = max_seq_length - "
                         "max_prompt_length") is None  # fmt: skip
    assert stated_budget("my_max_completion_length = 64") is None


def test_a_budget_inferred_from_lengths_at_one_repeated_maximum():
    # 20 rows, the longest completion 200 on 6 of them (>= 5 and >= 10 % of 20): the budget, inferred.
    rows = [(i, {"completions/max_length": 200.0 if i % 3 == 0 else 150.0 + i}) for i in range(1, 21)]
    assert inferred_budget(rows) == (200, "completions/max_length sits exactly at 200 on 6 of its 20 rows")
    # At its maximum on 4 rows only: no cap shown.
    assert inferred_budget(rows[:14]) is None
    # No max_length logged: the mean length at 200 on 5 of 8 rows.
    means = [(i, {"completions/mean_length": 200.0 if i < 6 else 180.0}) for i in range(1, 9)]
    assert inferred_budget(means)[0] == 200


def test_the_truncation_rules_judge_from_the_inferred_budget_and_a_learning_run_is_a_note():
    # 40 rows at a mean length of exactly 200 (no clipped_ratio, no budget stated) with a flat reward: the budget is
    # inferred as 200, the length rules judge and fire, and the notes say it was inferred.
    flat = [{"reward": 0.1 + 0.01 * (i % 2), "completions/mean_length": 200.0} for i in range(40)]
    diagnosis = diagnose(history(flat))
    assert "length budget not stated: inferred as 200 (completions/mean_length sits exactly at 200 on 40 of its 40 " \
        "rows)" in diagnosis.notes  # fmt: skip
    assert {"length_near_max", "all_truncated"} <= {alert.rule for alert in diagnosis.counted}
    # The reward climbing 0.1 -> 2.05 while the lengths come down from 200 (10 rows) to 195, still >= 0.95 x 200:
    # length_near_max holds to the end, but the cut did not stop the run learning: the truncation alerts are notes.
    learning = [{"reward": 0.1 + 0.05 * i, "completions/mean_length": 195.0 if i >= 10 else 200.0} for i in range(40)]
    diagnosis = diagnose(history(learning))
    cut = [alert for alert in diagnosis.alerts if alert.rule in ("length_near_max", "all_truncated", "length_pinned")]
    assert cut and all(alert.action == "log" for alert in cut)
    assert any("cut while it learns" in alert.message for alert in cut)
    assert diagnosis.verdict == "healthy"
