"""benchmarks/doctor_calibration.py's three counts per split (as labelled, unjudged, wrong): `unjudged` is never a
match for a label, counted apart; the expected counts are worked out by hand from the outcomes below."""

from __future__ import annotations

from benchmarks import doctor_calibration as calibration
from benchmarks.doctor_calibration import LabelledRun, Outcome, three

LABELS = {
    "h1": ("healthy", ()),
    "h2": ("healthy", ()),
    "h3": ("healthy", ()),
    "f1": ("failing", ("reward_plateau",)),
    "f2": ("failing", ("reward_decline",)),
    "f3": ("failing", ("no_signal",)),
    "f4": ("failing", ("non_finite",)),
    "u1": ("unlabelled", ()),
}
RUNS = [LabelledRun(name, f"benchmarks/doctor_runs/published/{name}.log", "trl", *LABELS[name]) for name in LABELS]
OUTCOMES = {
    "h1": Outcome("healthy"),  # as labelled
    "h2": Outcome("unjudged"),  # a healthy excerpt not judged: unjudged, not a match
    "h3": Outcome("warning", ("reward_plateau",)),  # a false alarm: wrong
    "f1": Outcome("warning", ("reward_plateau",)),  # as labelled
    "f2": Outcome("healthy"),  # wrong, a failing run called healthy
    "f3": Outcome("unjudged"),  # unjudged
    "f4": Outcome(None, note="bad input"),  # not read
    "u1": Outcome("failing", ("non_finite",)),  # not labelled: not counted
}


def test_three_counts_by_hand():
    counts = three(RUNS, OUTCOMES, fitting=True)
    assert counts == calibration.Three(
        labelled=7, as_labelled=2, unjudged=2, unjudged_healthy=1, wrong=2, failing_called_healthy=1, not_read=1
    )
    # Every labelled run is in exactly one of the four.
    assert counts.as_labelled + counts.unjudged + counts.wrong + counts.not_read == counts.labelled


def test_the_report_has_the_three_per_split():
    report = calibration.markdown(RUNS, {"doctor": OUTCOMES}, frozenset({"h2", "f2"}))
    assert "| doctor | all | 7 | 2 | 2 (1) | 2 (1) | 1 | 2/4 (50 %) |" in report
    # held back: h2 (unjudged, labelled healthy) and f2 (a failing run called healthy)
    assert "| doctor | held back | 2 | 0 | 1 (1) | 1 (1) | 0 | 0/1 (0 %) |" in report
    assert "| doctor | development | 5 | 2 | 1 (0) | 1 (0) | 1 | 2/3 (67 %) |" in report
