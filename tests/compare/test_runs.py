"""Reading run folders: malformed metric lines skipped and counted, job folders in number order."""

from __future__ import annotations

from align_kit.compare.command import compare
from align_kit.compare.runs import find_run_folders
from tests.compare.sweep_by_hand import LAST_K, assert_expected_statistics


def test_malformed_lines_are_skipped_and_counted(sweep, tmp_path):
    metrics = sweep / "0" / "metrics.jsonl"
    lines = metrics.read_text().splitlines()
    # Not JSON, not an object, and an object without a step: three skipped lines; the blank line is not counted.
    metrics.write_text("\n".join([lines[0], "{not json", "[1, 2]", '{"reward": 9.0}', "", *lines[1:]]) + "\n")

    result = compare([str(sweep)], last_k=LAST_K, out=tmp_path / "out")

    assert_expected_statistics(result)  # the skipped lines change nothing
    assert result.arms[0].runs[0].skipped_lines == 3
    assert any("skipped 3 malformed line(s)" in note for note in result.notes)
    assert "skipped 3 malformed line(s)" in result.report.read_text()


def test_job_folders_sort_by_number(tmp_path):
    for name in ("10", "2"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "metrics.jsonl").write_text("")
    assert [folder.name for folder in find_run_folders(tmp_path)] == ["2", "10"]
