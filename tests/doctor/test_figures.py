"""One PNG sheet per run, written only where asked and never over an existing file without force."""

from __future__ import annotations

import pytest

from align_kit.doctor.diagnose import diagnose
from align_kit.doctor.figures import implicated, targets, write_figures
from align_kit.doctor.history import DoctorInputError
from tests.doctor.histories import history, series

PNG = b"\x89PNG\r\n\x1a\n"


def test_a_sheet_is_written_with_the_implicated_metrics(tmp_path):
    # The reward held at 0.6: stalled (entropy_collapse, not convergence) but in the upper half of the stated [0, 1]
    # (no reward_plateau).
    rows = series("entropy", [1.0] * 10 + [0.3] * 10, loss=0.1, reward=0.6)
    diagnosis = diagnose(history(rows, name="job/0", context={"reward_max": 1.0, "reward_min": 0.0}))
    assert implicated(diagnosis) == ["entropy"]  # every alert read entropy
    [path] = write_figures([diagnosis], tmp_path / "figs")
    assert path == tmp_path / "figs" / "job_0.png"
    assert path.read_bytes()[:8] == PNG


def test_nothing_fired_shows_the_main_curves():
    diagnosis = diagnose(history([{"reward": 0.5, "entropy": 1.0, "loss": 0.1}] * 3))
    assert implicated(diagnosis) == ["reward", "entropy"]


def test_an_existing_file_is_kept_unless_forced(tmp_path):
    diagnosis = diagnose(history([{"reward": 0.5, "loss": 0.1}] * 3, name="run"))
    (tmp_path / "run.png").write_bytes(b"mine")
    with pytest.raises(DoctorInputError, match="run.png: exists; expected a new file"):
        write_figures([diagnosis], tmp_path)
    assert (tmp_path / "run.png").read_bytes() == b"mine"
    write_figures([diagnosis], tmp_path, force=True)
    assert (tmp_path / "run.png").read_bytes()[:8] == PNG


def test_runs_with_the_same_name_get_their_own_sheet(tmp_path):
    runs = [diagnose(history([{"reward": 0.5}], name="run")) for _ in range(3)]
    assert [p.name for p in targets(runs, tmp_path)] == ["run.png", "run-2.png", "run-3.png"]


def test_a_file_given_as_the_folder_is_refused(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(DoctorInputError, match="is a file; expected a folder"):
        targets([diagnose(history([{"reward": 0.5}]))], tmp_path / "f")
