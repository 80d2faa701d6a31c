"""The completions kept for the alerts: the ring, the files' caps and names, and a trained run's alert file."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from align_kit.core.hooks import LossState
from align_kit.monitor.samples import (
    CUT_MARK,
    FROM_LOSS,
    SAMPLE_ROW,
    Generation,
    SampleBook,
    SampleRecorder,
    SampleRing,
    SampleSettings,
    sample_document,
    spread,
    write_new,
)


def generation(step: int, rows: int = 4, group_size: int = 2, text: str = "abc") -> Generation:
    return Generation(
        step=step,
        group_size=group_size,
        prompts=[f"p{row // group_size}" for row in range(rows)],
        completions=[f"{text}{row}" for row in range(rows)],
        rewards={"correctness": [1.0, 0.0, 0.0, 1.0][:rows], "format": [0.5] * rows},
        advantages=[0.7, -0.7, -0.7, 0.7][:rows],
        lengths=[3, 9, 4, 2][:rows],
        truncated=[False, True, False, False][:rows],
        weights={"correctness": 0.8, "format": 0.2},
    )


def alert(rule: str, step: int, first_step: int | None = None):
    return SimpleNamespace(rule=rule, step=step, first_step=first_step, severity="warning", message="m")


def test_the_ring_keeps_the_newest_rounds_and_finds_a_window():
    ring = SampleRing(3)
    for step in (0, 2, 4, 6):
        ring.add(generation(step))
    assert [gen.step for gen in ring.rounds] == [2, 4, 6]
    # Rounds generated at 4 and 6 train steps 5-8; an alert at step 7 that read steps 5-7 sees the round of 4 only
    # (the round of 6 trains from step 7 on: generated at 6 < 7 counts) -> 4 and 6.
    assert [gen.step for gen in ring.within(5, 7)] == [4, 6]
    # A window older than every kept round: the newest round before the alert stands in.
    assert [gen.step for gen in ring.within(0, 3)] == [2]
    assert [gen.step for gen in ring.within(None, 5)] == [2, 4]


def test_spread_takes_the_first_the_last_and_evenly_between():
    assert spread(list(range(10)), 4) == [0, 3, 6, 9]  # round(k * 9 / 3)
    assert spread([1, 2], 4) == [1, 2]
    assert spread([5, 6, 7], 1) == [7]


def test_a_group_records_each_completion_with_the_weighted_reward():
    document = sample_document([generation(0)], SampleSettings(groups_per_file=2), {"kind": "periodic"})
    group, other = document["groups"]
    assert (group["prompt"], other["prompt"]) == ("p0", "p1")
    first, second = group["completions"]
    assert first["reward"] == pytest.approx(0.8 * 1.0 + 0.2 * 0.5)
    assert second["reward"] == pytest.approx(0.8 * 0.0 + 0.2 * 0.5)
    assert (second["length"], second["truncated"], second["advantage"]) == (9, True, -0.7)


def test_a_file_stays_under_its_byte_cap_by_cutting_the_texts():
    long = generation(0, text="x" * 50_000)
    settings = SampleSettings(groups_per_file=2, max_bytes=8192)
    document = sample_document([long], settings, {"kind": "periodic"})
    assert len(json.dumps(document).encode()) <= 8192
    completion = document["groups"][0]["completions"][0]["completion"]
    assert completion.endswith(CUT_MARK) and len(completion) < 50_000


def test_the_written_file_not_only_its_compact_form_stays_under_the_cap(tmp_path):
    # 64 completions of 50,000 characters, 4 groups of 8 a file: texts cut to 1,000 characters give 37,171 bytes in
    # compact JSON and 39,318 as written (indented); a cap of 38,000 lies between, so the texts must be cut further.
    rows = 64
    long = generation(0, rows=rows, group_size=8, text="x" * 50_000)
    long.rewards = {"correctness": [1.0] * rows, "format": [0.5] * rows}
    long.advantages, long.lengths, long.truncated = [0.1] * rows, [3] * rows, [False] * rows
    document = sample_document([long], SampleSettings(groups_per_file=4, max_bytes=38_000), {"kind": "periodic"})
    path = write_new(tmp_path / "a.json", document)
    assert path.stat().st_size <= 38_000 and len(document["groups"]) == 4


def test_groups_too_many_for_the_cap_at_the_shortest_texts_are_fewer(tmp_path):
    # 4 groups of 64 completions: even 16-character texts leave about 60 KB of numbers; the cap of 16 KiB keeps 1.
    rows = 256
    wide = generation(0, rows=rows, group_size=64)
    wide.rewards = {"correctness": [1.0] * rows, "format": [0.5] * rows}
    wide.advantages, wide.lengths, wide.truncated = [0.1] * rows, [3] * rows, [False] * rows
    document = sample_document([wide], SampleSettings(groups_per_file=4, max_bytes=16_384), {"kind": "periodic"})
    assert write_new(tmp_path / "a.json", document).stat().st_size <= 16_384
    assert [group["prompt"] for group in document["groups"]] == ["p3"]  # spread(.., 1) keeps the newest


def test_an_existing_file_is_never_replaced(tmp_path):
    first = write_new(tmp_path / "a.json", {"n": 1})
    second = write_new(tmp_path / "a.json", {"n": 2})
    assert (first.name, second.name) == ("a.json", "a-2.json")
    assert json.loads(first.read_text()) == {"n": 1}
    assert not list(tmp_path.glob(".*.tmp"))  # no temporary left behind


def test_alert_files_per_rule_are_capped_and_counted_again_after_a_resume(tmp_path):
    book = SampleBook(SampleSettings(files_per_rule=2), tmp_path, wandb_log=lambda name, doc: None)
    book.ring.add(generation(0))
    written = [book.on_alert(alert("entropy_drop", step)) for step in (1, 2, 3)]
    assert [path.name if path else None for path in written] == [
        "alert-00000001-entropy_drop.json",
        "alert-00000002-entropy_drop.json",
        None,
    ]
    assert book.on_alert(alert("length_pinned", 3)) is not None  # another rule has its own cap
    resumed = SampleBook(SampleSettings(files_per_rule=2), tmp_path, wandb_log=lambda name, doc: None)
    resumed.ring.add(generation(2))
    assert resumed.on_alert(alert("entropy_drop", 4)) is None  # the two from before the resume count


def test_no_round_yet_writes_nothing(tmp_path):
    book = SampleBook(SampleSettings(), tmp_path, wandb_log=lambda name, doc: None)
    assert book.on_alert(alert("entropy_drop", 1)) is None
    assert not (tmp_path / "samples").exists()


def test_periodic_files_are_thinned_and_the_period_doubles(tmp_path):
    book = SampleBook(SampleSettings(every=1, periodic_files=4), tmp_path, wandb_log=lambda name, doc: None)
    for step in range(1, 21):
        book.ring.add(generation(step - 1))
        book.on_step(step)
    # Steps 1-4 written; at 4 files, 2 goes (every other of [1, 2, 3]: index 1) -> [1, 3, 4], period 2.
    # Then step 6 -> [1, 3, 4, 6] -> 3 goes -> [1, 4, 6], period 4; step 8 -> [1, 4, 6, 8] -> 4 goes ->
    # [1, 6, 8], period 8; step 16 -> [1, 6, 8, 16] -> 6 goes -> [1, 8, 16], period 16.
    steps = sorted(int(path.stem.split("-")[1]) for path in (tmp_path / "samples").glob("step-*.json"))
    assert steps == [1, 8, 16]
    assert book.period == 16


def test_the_samples_go_to_a_wandb_table_when_a_run_logs_there(tmp_path, monkeypatch):
    import sys

    from align_kit.monitor.samples import TABLE_COLUMNS, log_to_wandb

    logged = []

    class Table:
        def __init__(self, columns, data):
            self.columns, self.data = columns, data

    run = SimpleNamespace(log=lambda values, commit: logged.append((values, commit)))
    monkeypatch.setitem(sys.modules, "wandb", SimpleNamespace(run=run, Table=Table))
    document = sample_document([generation(5)], SampleSettings(groups_per_file=1), {"kind": "periodic"})
    log_to_wandb("step-00000006", document)
    ((values, commit),) = logged
    table = values["samples/step-00000006"]
    assert commit is False and table.columns == TABLE_COLUMNS
    # One group per file: the newest, p1 (rows 2 and 3); no loss ran, so no entropy.
    assert table.data[1] == [5, "p1", "abc3", pytest.approx(0.8 * 1.0 + 0.2 * 0.5), 0.7, 2, False, None]


def loss_call(rows: list[int], entropies: list[list[float]], mask: list[list[int]], mode: str = "train") -> LossState:
    import torch

    inputs = {SAMPLE_ROW: torch.tensor(rows), "completion_mask": torch.tensor(mask)}
    logps = torch.zeros(len(rows), len(mask[0]))
    return LossState(inputs=inputs, mode=mode, forward=(logps, torch.tensor(entropies), None))


def test_each_completion_gets_the_mean_entropy_of_its_tokens_in_the_loss():
    ring = SampleRing(4)
    first, second = generation(0), generation(2)  # 4 rows each: ring rows 0-3 and 4-7
    ring.add(first)
    ring.add(second)
    recorder = SampleRecorder(ring)
    # A shuffled micro-batch: ring rows 5 and 1. Row 5's tokens 0.2 and 0.4 (the third is padding); row 1's 1.5.
    recorder.on_loss(None, loss_call([5, 1], [[0.2, 0.4, 9.0], [1.5, 7.0, 7.0]], [[1, 1, 0], [1, 0, 0]]))
    # Row 5 again (a second iteration on the round): the first value stays. Row 6 has no token: no entropy.
    recorder.on_loss(None, loss_call([5, 6], [[3.0, 3.0, 3.0], [1.0, 1.0, 1.0]], [[1, 1, 1], [0, 0, 0]]))
    recorder.on_loss(None, loss_call([7], [[2.0, 2.0, 2.0]], [[1, 1, 1]], mode="eval"))  # eval: not recorded
    ring.resolve_entropies()
    assert first.entropies == [None, pytest.approx(1.5), None, None]
    assert second.entropies == [None, pytest.approx(0.3), None, None]  # (0.2 + 0.4) / 2
    assert ring.pending == []
    second.entropy_source = FROM_LOSS
    document = sample_document([second], SampleSettings(groups_per_file=2), {"kind": "periodic"})
    assert [entry["entropy"] for entry in document["groups"][0]["completions"]] == [None, pytest.approx(0.3)]
    assert document["entropy_from"] == [FROM_LOSS]


def test_entropies_of_rounds_that_left_the_ring_are_dropped_unread():
    ring = SampleRing(1)
    ring.add(generation(0))
    SampleRecorder(ring).on_loss(None, loss_call([0], [[1.0]], [[1]]))
    ring.add(generation(2))  # round 0 leaves: what its loss recorded goes with it
    assert ring.pending == []
    ring.resolve_entropies()
    assert ring.rounds[0].entropies is None


def test_a_run_whose_completions_hit_the_budget_writes_the_alerts_samples(tmp_path, train_once):
    # A budget of 4 tokens: the warm-started policy's answers are longer (`<think>...`), so every completion is cut
    # and length_near_max fires at step 1 (mean length 4 >= 0.95 x 4).
    run = tmp_path / "run"
    train_once(run, "trainer.max_completion_length=4", "trainer.max_steps=3")
    alerts = [json.loads(line) for line in (run / "alerts.jsonl").read_text().splitlines()]
    fired = next(a for a in alerts if a["rule"] == "length_near_max")
    path = run / "samples" / f"alert-{fired['step']:08d}-length_near_max.json"
    document = json.loads(path.read_text())
    assert (document["rule"], document["step"]) == ("length_near_max", fired["step"])
    completions = [entry for group in document["groups"] for entry in group["completions"]]
    assert completions and document["lengths_from"] == ["generated ids"]
    # Every completion was cut at 4 tokens: none ended with a stop token within the budget.
    assert {(entry["length"], entry["truncated"]) for entry in completions} == {(4, True)}
    assert all(len(group["completions"]) == 8 for group in document["groups"])  # the default group size
    assert Path(path).stat().st_size <= SampleSettings().max_bytes


def test_a_trained_runs_entropies_average_to_the_entropy_trl_logged(tmp_path, train_once):
    # One step of 32 rows from a round of 64 (8 prompts x 8; steps_per_generation 2): the alert at step 1 writes all
    # 8 groups. The 32 rows the loss trained carry an entropy, the others none; their token-weighted mean is TRL's
    # own `entropy` for the step (its loss averages the same per-token entropies over the same tokens).
    run = tmp_path / "run"
    train_once(run, "trainer.max_completion_length=4", "trainer.max_steps=1", "monitor.samples.groups_per_file=8")
    document = json.loads((run / "samples" / "alert-00000001-length_near_max.json").read_text())
    entries = [entry for group in document["groups"] for entry in group["completions"]]
    measured = [entry for entry in entries if entry["entropy"] is not None]
    assert (len(entries), len(measured)) == (64, 32)
    assert document["entropy_from"] == [FROM_LOSS]
    logged = json.loads((run / "metrics.jsonl").read_text().splitlines()[0])
    weighted = sum(entry["entropy"] * entry["length"] for entry in measured) / sum(e["length"] for e in measured)
    assert weighted == pytest.approx(logged["entropy"], rel=1e-4)
