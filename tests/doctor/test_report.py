"""The text report, the summary table and the --json document, on diagnoses of histories built by hand."""

from __future__ import annotations

import json
import math

from align_kit.doctor.diagnose import diagnose
from align_kit.doctor.report import render, summary_table, to_json
from tests.doctor.histories import history, series

# Entropy 1.0 x 10 then 0.3 x 10 (see test_diagnose: decline note at 16, drop at 18, collapse at 20).
COLLAPSE = series("entropy", [1.0] * 10 + [0.3] * 10, loss=0.1)


def test_the_text_report_states_verdict_source_mapping_timeline_coverage_and_advice():
    run = history(COLLAPSE, context={"learning_rate": 1e-6}, name="collapse")
    run.mapping = {"entropy": "entropy", "loss": "loss"}
    run.unmapped = ["step_time"]
    run.notes = ["steps from --logging-steps 1"]
    text = render(diagnose(run))
    lines = text.splitlines()
    assert lines[0] == "== collapse"
    assert lines[1] == (
        "verdict: failing: entropy_collapse; warnings: entropy_drop; answered: is entropy collapsing, is it stable; "
        "not answered: does it learn, is there signal, is it truncated"
    )
    assert "20 logged rows, steps 1-20" in lines[2] and "as trl_state" in lines[2]
    assert "  - steps from --logging-steps 1" in lines
    assert "  entropy -> entropy" in lines and "  not mapped (no rule reads them): step_time" in lines
    timeline = [line for line in lines if line.startswith("  step ")]
    assert [line.split()[1:4] for line in timeline] == [
        ["16", "note", "entropy_decline:"],
        ["18", "warning", "entropy_drop:"],
        ["20", "failing", "entropy_collapse:"],
    ]
    # entropy_collapse read the first 10 and the last 10 points: 20 points from step 1 to step 20.
    assert any("read 20 logged points, steps 1-20" in line for line in lines)
    assert "  reward_decline: lacks reward" in lines
    advice = [line for line in lines if line.startswith("  1. ") or line.startswith("  2. ")]
    assert advice == [
        "  1. [clipping] epsilon_high=0.28 (Clip-Higher; epsilon stays 0.2)  (answers entropy_drop, entropy_collapse)",
        "  2. [KL and learning rate] learning_rate=5e-07 (now 1e-06)  (answers entropy_drop, entropy_collapse)",
    ]


def test_the_summary_table_has_one_line_per_run():
    runs = [
        diagnose(history(COLLAPSE, name="a")),
        diagnose(history([{"loss": 0.1, "grad_norm": 0.5}], name="b")),
    ]
    table = summary_table(runs).splitlines()
    assert table[0].split() == ["run", "format", "rows", "verdict", "fired", "judged"]
    assert table[2].split()[:4] == ["a", "trl_state", "20", "failing"]
    assert "entropy_collapse, entropy_drop" in table[2]
    assert table[3].split()[:5] == ["b", "trl_state", "1", "unjudged", "-"]  # no reward: learning not judged


def test_json_is_one_strict_document_with_stable_keys():
    runs = [diagnose(history([{"loss": math.nan, "grad_norm": 0.5}], name="nan")), diagnose(history(COLLAPSE))]
    document = json.loads(to_json(runs, {0: "doctor/nan.png"}))
    assert document["schema"] == 1 and document["verdict"] == "failing" and document["exit_code"] == 3
    first = document["runs"][0]
    assert set(first) == {
        "name", "source", "format", "framework", "rows", "steps", "verdict", "summary", "questions", "alerts",
        "coverage", "advice", "mapping", "unmapped", "notes", "artefacts", "figure", "samples",
    }  # fmt: skip
    assert first["samples"] is None  # read from no run folder: nowhere samples could be
    # loss and grad_norm only: stable (non_finite) and signal (grad_norm_vanishing) can judge, the rest cannot.
    assert first["questions"] == {
        "does it learn": False,
        "is there signal": True,
        "is it truncated": False,
        "is entropy collapsing": False,
        "is it stable": True,
    }
    assert first["figure"] == "doctor/nan.png" and document["runs"][1]["figure"] is None
    assert first["steps"] == [1, 1] and first["rows"] == 1
    alert = first["alerts"][0]
    assert (alert["rule"], alert["severity"], alert["step"], alert["points"]) == ("non_finite", "failing", 1, 1)
    assert set(alert) == {"step", "rule", "severity", "action", "metric", "first_step", "points", "values",
                          "message", "fixes"}  # fmt: skip
    assert [a["fix"] for a in first["advice"]] == ["fix_reward", "lower_lr"]
    assert set(first["coverage"][0]) == {"rule", "judged", "fired", "reason", "missing"}
