"""The completions the doctor shows under an alert, read from a run folder's samples/."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from align_kit.doctor.samples import (
    RunSamples,
    alert_samples,
    changed_lines,
    choose,
    one_line,
    samples_folder,
    shown_lines,
    what_changed,
)


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


def periodic(folder, step: int, completions: list[dict]) -> None:
    document = {
        "kind": "periodic",
        "step": step,
        "groups": [{"step": step - 1, "prompt": "p", "completions": completions}],
    }
    (folder / f"step-{step:08d}.json").write_text(json.dumps(document))


def healthy() -> list[dict]:
    return [
        {"completion": "<think>2+2=4</think>4", "reward": 1.0, "length": 20, "truncated": False, "entropy": 0.5},
        {"completion": "<think>2+2=5</think>5", "reward": 0.0, "length": 22, "truncated": False, "entropy": 0.7},
    ]


def sick() -> list[dict]:
    return [
        {"completion": "</think>7666666", "reward": 0.0, "length": 32, "truncated": True, "entropy": 2.0},
        {"completion": "</think>6676", "reward": 0.0, "length": 32, "truncated": True, "entropy": None},
    ]


def alert(rule: str, step: int, first_step: int, severity: str, action: str = "warn"):
    return SimpleNamespace(rule=rule, step=step, first_step=first_step, severity=severity, action=action)


def test_what_changed_sets_the_first_samples_beside_those_where_the_worst_alert_fired(tmp_path):
    for step in (10, 20, 30, 40):
        periodic(tmp_path, step, healthy())
    for step in (120, 130):
        periodic(tmp_path, step, sick())
    alerts = [
        alert("policy_ratio_noise", 5, 1, "warning"),
        alert("grad_norm_vanishing", 60, 50, "warning", action="log"),
        alert("all_truncated", 130, 115, "failing"),
    ]
    changed, missing = what_changed(tmp_path, alerts)
    assert missing is None and (changed.rule, changed.first_step, changed.inside) == ("all_truncated", 115, True)
    before, during = changed.before, changed.during
    # Before the window: the first three files (10, 20, 30), 6 completions: rewards 1, 0 three times -> 0.5; lengths
    # 20, 22 -> 21; none cut; entropies 0.5, 0.7 -> 0.6; no group flat. The median length of [20 x3, 22 x3] is 20.
    assert (before.steps, before.completions) == ([10, 20, 30], 6)
    assert (before.reward, before.length, before.cut, before.flat_groups) == (0.5, 21.0, 0.0, 0.0)
    assert before.entropy == pytest.approx(0.6)
    assert (before.typical.length, before.typical.completion) == (20, "<think>2+2=4</think>4")
    # Inside it (115-130): 120 and 130, every completion cut at 32, both groups flat at 0; one entropy recorded: 2.0.
    assert (during.steps, during.completions) == ([120, 130], 4)
    assert (during.reward, during.length, during.cut, during.entropy, during.flat_groups) == (0.0, 32.0, 1.0, 2.0, 1.0)
    lines = changed_lines(RunSamples(tmp_path, tmp_path, changed=changed))
    assert lines[0] == "what changed (periodic samples; all_truncated's window is steps 115-130):"
    assert lines[4].split() == ["cut", "at", "the", "budget", "0%", "100%"]
    # Four completions of 32 tokens: the median is the second in file order, 6676 of step 120 (its group at 119).
    assert lines[-1] == "  where it fired, typical (median length) (step 119): </think>6676"


def test_what_changed_says_why_it_has_nothing_to_compare(tmp_path):
    failing = [alert("all_truncated", 30, 3, "failing")]
    assert what_changed(tmp_path, []) == (None, None)  # nothing fired: no sick stretch
    changed, missing = what_changed(tmp_path, failing)
    assert changed is None and missing.startswith("what changed: no periodic samples (monitor.samples.every is 0)")
    periodic(tmp_path, 10, sick())  # the first periodic sample is already inside the window (3-30)
    changed, missing = what_changed(tmp_path, failing)
    assert changed is None and missing.startswith("what changed: no periodic sample before step 3,")
    # Thinned away from the window: the nearest file after it stands in, and the earlier ones are before it.
    periodic(tmp_path, 2, healthy())
    periodic(tmp_path, 64, sick())
    changed, _ = what_changed(tmp_path, [alert("all_truncated", 50, 45, "failing")])
    assert (changed.before.steps, changed.during.steps, changed.inside) == ([2, 10], [64], False)
    title = changed_lines(RunSamples(tmp_path, tmp_path, changed=changed))[1]
    assert "nearest all_truncated's window (none inside): step 64 (2 completions)" in title
    assert changed_lines(RunSamples(tmp_path, tmp_path, changed=changed))[-1].startswith(
        "  nearest its window, typical"
    )
