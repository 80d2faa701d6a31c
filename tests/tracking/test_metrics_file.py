"""The one reader of metrics.jsonl, used by the trainer side (resume, monitor) and by compare."""

from __future__ import annotations

import json
from types import SimpleNamespace

from align_kit.compare import run_record, runs
from align_kit.tracking import metrics_file
from align_kit.tracking.metrics_file import MetricsFileCallback, read_metrics, read_metrics_file


def test_a_half_written_last_line_is_skipped_and_dropped_on_resume(tmp_path):
    path = tmp_path / "metrics.jsonl"
    rows = [{"step": 1, "reward": 0.5}, {"step": 2, "reward": 0.75}]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + '{"step": 3, "rew')  # killed mid-write
    assert read_metrics(path) == rows
    assert read_metrics_file(path) == ([(1.0, rows[0]), (2.0, rows[1])], 1)
    # Resuming from checkpoint-1 keeps step 1 only, instead of failing on the broken line.
    state = SimpleNamespace(is_world_process_zero=True, global_step=1)
    MetricsFileCallback(path).on_train_begin(None, state, None)
    assert path.read_text() == json.dumps(rows[0]) + "\n"


def test_compare_reads_through_the_same_reader_and_series():
    assert runs.read_metrics_file is metrics_file.read_metrics_file
    assert run_record.Series is metrics_file.Series
    assert runs.series_from_rows is metrics_file.series_from_rows


def test_resume_cuts_the_file_from_its_end_and_leaves_the_rows_it_keeps_as_written(tmp_path):
    path = tmp_path / "metrics.jsonl"
    kept = '{"step": 1, "reward": 0.5}\nnot json, from an older crash\n{"step":2,  "reward": 0.25}\n'
    redone = '{"step": 3, "reward": 1.0}\n{"step": 4, "reward": 1.0}\n{"step": 5, "rew'
    path.write_text(kept + redone)
    MetricsFileCallback(path).on_train_begin(None, SimpleNamespace(is_world_process_zero=True, global_step=2), None)
    # Byte for byte: nothing before the cut is re-read or rewritten (the unreadable middle line stays, as the
    # odd spacing does); rows after step 2 and the half-written line are gone.
    assert path.read_text() == kept
    MetricsFileCallback(path).on_train_begin(None, SimpleNamespace(is_world_process_zero=True, global_step=0), None)
    assert path.read_text() == ""
