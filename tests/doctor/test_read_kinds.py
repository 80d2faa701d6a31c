"""Kinds of published logs the readers once misread: a family told by one name, bare NaN in printed dicts, older
TRL reward names, abbreviated table headers. Expected values are read by hand off the fixtures in data/."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from align_kit.doctor.history import DoctorInputError
from align_kit.doctor.readers import read_runs

DATA = Path(__file__).parent / "data"


def test_trl_names_beside_one_prime_rl_name_read_in_trl_terms():
    (history,) = read_runs(str(DATA / "trl_names_with_entropy_mean.jsonl"))
    assert history.framework == "trl"
    assert [values["reward"] for _, values in history.rows] == [0.2, 0.4]
    assert [values["entropy"] for _, values in history.rows] == [0.8, 0.7]
    assert [values["frac_reward_zero_std"] for _, values in history.rows] == [0.5, 0.25]


def test_bare_non_finite_values_in_printed_dicts_are_kept_in_any_spelling():
    # Rows 1 and 2 hold a value JSON refuses (a quote inside a string, True), so they take the literal_eval path.
    (history,) = read_runs(str(DATA / "printed_dicts_bare_nan.log"))
    assert [step for step, _ in history.rows] == [1, 2, 3]
    first, second, third = (values for _, values in history.rows)
    assert math.isnan(first["kl"]) and math.isnan(first["clip_ratio/region_mean"])
    assert second["kl"] == math.inf and second["clip_ratio/region_mean"] == -math.inf
    assert third["kl"] == 0.01


def test_abbreviated_table_headers_map_when_one_concept_fits_and_rows_after_an_ellipsis_are_kept():
    (history,) = read_runs(str(DATA / "table_abbreviated_headers.txt"))
    assert history.mapping == {
        "loss": "loss",
        "reward": "reward",  # reward_mean
        "completions/clipped_ratio": "completions/clipped_ratio",  # the last part of the name
        "completions/mean_length": "completions/mean_length",  # mean_len: a cut-short last part
    }  # `rew` starts reward, reward_std, ...: too short to say which, left unmapped
    assert [step for step, _ in history.rows] == [1, 2, 12]
    assert [values["reward"] for _, values in history.rows] == [0.25, 0.5, 0.75]
    assert history.rows[2][1]["completions/mean_length"] == 260.0


def test_older_trl_reward_names_without_mean_read_as_components(tmp_path):
    path = tmp_path / "old.log"
    path.write_text(
        "{'loss': 0.01, 'reward': 0.5, 'rewards/accuracy_reward': 0.25, 'rewards/format_reward': 0.25, 'step': 1}\n"
        "{'loss': 0.02, 'reward': 0.75, 'rewards/accuracy_reward': 0.5, 'rewards/format_reward': 0.25, 'step': 2}\n"
    )
    (history,) = read_runs(str(path))
    assert history.mapping["rewards/accuracy_reward"] == "rewards/accuracy_reward/mean"
    assert [values["rewards/accuracy_reward/mean"] for _, values in history.rows] == [0.25, 0.5]


def test_a_markdown_summary_table_with_centred_rules_markup_and_worded_steps(tmp_path):
    # An author's own table: `:-:` header rules, bold and approximate cells, steps named in the first column's words,
    # a column of notes. Values read by hand: **0.59** -> 0.59, ~0.5+ -> 0.5, ~0.001 -> 0.001.
    path = tmp_path / "summary.md"
    path.write_text(
        "| stage | reward mean | reward std | loss | entropy | notes |\n"
        "| :-: | :-: | :-: | :-: | :-: | --- |\n"
        "| step 20 | 0.50 | **0.59** | 0.060 | 0.23 | healthy start |\n"
        "| step 4340 (51%) | **0.80** | 0.10 | 0.015 | 0.035 | diversity drops |\n"
        "| step 8550 (end) | ~0.5+ | ~0 | **0.0004** | ~0.001 | collapsed |\n"
    )
    (history,) = read_runs(str(path))
    assert [step for step, _ in history.rows] == [20, 4340, 8550]
    assert [values["reward"] for _, values in history.rows] == [0.5, 0.8, 0.5]
    assert [values["reward_std"] for _, values in history.rows] == [0.59, 0.1, 0.0]
    assert [values["entropy"] for _, values in history.rows] == [0.23, 0.035, 0.001]
    assert any("steps read from the column 'stage'" in note for note in history.notes)


def test_a_phase_table_reads_each_phase_at_its_last_step_and_a_qualified_name_as_the_metric(tmp_path):
    # A summary by phases of steps: `Steps 1–20 (early)` is the phase ending at step 20; the header `Typical
    # `gen_kl_error`` names NeMo-RL's gen_kl_error (the sampler-trainer KL); the range column holds no single value.
    path = tmp_path / "phases.md"
    path.write_text(
        "| Phase | Typical `gen_kl_error` | Range |\n"
        "|-------|------|-------|\n"
        "| Steps 1–20 (early) | ~0.45 | 0.32 – 0.64 |\n"
        "| Steps 21-40 (mid) | ~0.30 | 0.16 – 1.75 |\n"
        "| Steps 41 to 62 (late) | ~0.20 | 0.14 – 0.60 |\n"
    )
    (history,) = read_runs(str(path))
    assert [step for step, _ in history.rows] == [20, 40, 62]
    assert history.mapping["gen_kl_error"] == "mismatch/kl"
    assert [values["mismatch/kl"] for _, values in history.rows] == [0.45, 0.3, 0.2]


def test_stepless_key_value_lines_are_rows_in_order_and_a_second_line_of_new_names_continues_one(tmp_path):
    # A summary printed over two lines (pairs apart by runs of spaces), then a blank line and a second summary:
    # the two lines with different names are one row, the repeated names start the next; steps are their order.
    path = tmp_path / "summary.txt"
    path.write_text(
        "completions/mean_length: 256   completions/clipped_ratio: 1   mean_terminated_length: 0\n"
        "reward: 0   reward_std: 0   frac_reward_zero_std: 1   loss: 0   grad_norm: 0\n"
        "\n"
        "completions/mean_length: 180   completions/clipped_ratio: 0.25\n"
        "The run is then stopped after 2 summaries: 1 more line of words.\n"
    )
    (history,) = read_runs(str(path))
    assert history.format == "key_value_lines"
    assert [step for step, _ in history.rows] == [1, 2]
    first, second = (values for _, values in history.rows)
    assert first["completions/clipped_ratio"] == 1.0 and first["reward_std"] == 0.0 and first["grad_norm"] == 0.0
    assert second == {"completions/mean_length": 180.0, "completions/clipped_ratio": 0.25}
    assert any("steps are their order" in note for note in history.notes)


def test_an_episode_counter_with_one_averaged_reward_and_comma_separated_averages_are_read(tmp_path):
    # `Episode N/M` is a progress counter: one recognised name beside it makes a row. `Reward moyen (100 ep)` is a
    # reward averaged over a window of episodes.
    counter = tmp_path / "a2c.log"
    counter.write_text(
        "Episode  50/400 | Reward moyen (100 ep): 22.6\n"
        "Episode 100/400 | Reward moyen (100 ep): 20.3\n"
        "Entrainement termine. Reward final moyen (100 ep): 14.1\n"
    )
    (history,) = read_runs(str(counter))
    assert [(step, values["reward"]) for step, values in history.rows] == [(50, 22.6), (100, 20.3)]
    # Step-less lines of `Name value` pairs apart by commas: Avg Reward -> reward, Avg Accuracy -> accuracy; Best
    # Reward (the best so far) is no current value and stays unmapped.
    averages = tmp_path / "a3c.log"
    averages.write_text(
        "Time 08h 36m 42s, Avg Reward 0.064, Avg Accuracy 0.22, Avg Ep length 5.26, Best Reward 0.184\n"
        "Time 08h 45m 00s, Avg Reward -0.056, Avg Accuracy 0.12, Avg Ep length 5.32, Best Reward 0.184\n"
    )
    (history,) = read_runs(str(averages))
    assert [(values["reward"], values["accuracy"]) for _, values in history.rows] == [(0.064, 0.22), (-0.056, 0.12)]
    assert "best_reward" in history.unmapped


def test_pair_lines_in_names_no_map_knows_error_with_map_advice_and_read_with_it(tmp_path):
    path = tmp_path / "custom.log"
    path.write_text("score: 1.5, kl_div: 0.1\nscore: 1.7, kl_div: 0.2\n")
    with pytest.raises(DoctorInputError, match=r"names no map knows \(score, kl_div\): .* e\.g\. --map reward=score"):
        read_runs(str(path))
    # With the advice taken, the same lines are rows.
    (history,) = read_runs(str(path), key_map={"reward": "score", "kl": "kl_div"})
    assert [(values["reward"], values["kl"]) for _, values in history.rows] == [(1.5, 0.1), (1.7, 0.2)]
