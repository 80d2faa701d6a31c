"""The completions the doctor shows under an alert, read from a run folder's samples/."""

from __future__ import annotations

import json

from align_kit.doctor.samples import alert_samples, choose, one_line, samples_folder, shown_lines


def entry(text: str, reward: float, length: int, truncated: bool = False) -> dict:
    return {"completion": text, "reward": reward, "length": length, "truncated": truncated, "step": 3, "prompt": "p"}


def test_the_chosen_completions_show_the_failure_first_and_never_twice():
    entries = [entry("a", 0.5, 10), entry("b", 0.0, 32, truncated=True), entry("c", 1.0, 4), entry("d", 0.2, 40)]
    # cut at the budget: b; the lowest reward is b again (skipped); the highest c; the shortest is c again
    # (skipped); the longest d.
    assert [(s.why, s.completion) for s in choose(entries, count=4)] == [
        ("cut at the budget", "b"),
        ("highest reward", "c"),
        ("longest", "d"),
    ]


def test_without_truncation_the_extremes_of_reward_and_length_are_shown():
    entries = [entry("a", 0.5, 10), entry("b", 0.1, 3), entry("c", 0.9, 40)]
    # lowest reward b, highest c; the shortest (b) and the longest (c) are already shown.
    assert [(s.why, s.completion) for s in choose(entries)] == [("lowest reward", "b"), ("highest reward", "c")]
    assert [s.completion for s in choose(entries, count=1)] == ["b"]


def test_an_alert_file_is_read_by_rule_and_step_and_a_cut_file_is_passed_over(tmp_path):
    samples = tmp_path / "run" / "samples"
    samples.mkdir(parents=True)
    document = {
        "kind": "alert",
        "rule": "all_truncated",
        "step": 7,
        "groups": [{"step": 6, "prompt": "2+2=", "completions": [entry("<think>2+", 0.0, 4, True)]}],
    }
    (samples / "alert-00000007-all_truncated.json").write_text(json.dumps(document))
    (samples / "alert-00000009-entropy_drop.json").write_text('{"kind": "alert", "rule": "entr')  # cut by a crash
    found = alert_samples(samples)
    assert list(found) == [("all_truncated", 7)]
    (shown,) = found[("all_truncated", 7)].shown
    assert (shown.why, shown.step, shown.length, shown.truncated) == (
        "cut at the budget",
        6,
        4,
        True,
    )  # the group's step
    assert (
        shown_lines(found[("all_truncated", 7)])[1]
        == "  cut at the budget (step 6, reward 0, 4 tokens, cut): <think>2+"
    )
    assert samples_folder(tmp_path / "run") == samples
    assert samples_folder(tmp_path / "run" / "metrics.jsonl") == samples
    assert samples_folder(tmp_path) is None


def test_a_completion_is_shown_on_one_line():
    assert one_line("a\nb") == "a ⏎ b"
    assert one_line("x" * 200, width=10) == "xxxxxxx..."
