"""One PNG sheet per run (`--figures DIR`): the curves of the metrics the fired rules read, each firing point
marked (a red cross for a warning or failing alert, a grey circle for a note) with the rule's name. When nothing
fired, the sheet shows the run's main curves (reward, entropy, length, KL) that it logs.

Figures are written only where asked (`--figures DIR`), never into the run's own folder by default, and an existing
file is never overwritten without `--force`: every target is checked before the first one is written.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

from align_kit.doctor.diagnose import Diagnosis
from align_kit.doctor.history import DoctorInputError

MAIN_METRICS = ("reward", "entropy", "completions/mean_length", "kl")


def implicated(diagnosis: Diagnosis) -> list[str]:
    """The metrics the alerts read, in the order they fired; the main curves the run logs when none fired."""
    logged = {name for _, row in diagnosis.history.rows for name in row}
    metrics = [alert.metric for alert in diagnosis.alerts if alert.metric in logged]
    if not metrics:
        metrics = [name for name in MAIN_METRICS if name in logged]
    return list(dict.fromkeys(metrics))


def _file_name(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]+", "_", name).strip("._") or "run"


def targets(diagnoses: Sequence[Diagnosis], folder: Path, force: bool = False) -> list[Path]:
    """The sheet of each run in `folder` (names made unique); DoctorInputError when one exists and not `force`."""
    if folder.exists() and not folder.is_dir():
        raise DoctorInputError(f"--figures {folder}: is a file; expected a folder (created if missing)")
    paths: list[Path] = []
    for diagnosis in diagnoses:
        stem = _file_name(diagnosis.history.name or Path(diagnosis.history.source).name)
        path, number = folder / f"{stem}.png", 2
        while path in paths:
            path, number = folder / f"{stem}-{number}.png", number + 1
        paths.append(path)
    existing = [path for path in paths if path.exists()]
    if existing and not force:
        raise DoctorInputError(
            f"{existing[0]}: exists; expected a new file (pass --force to overwrite, or another --figures folder)"
        )
    return paths


def write_sheet(diagnosis: Diagnosis, path: Path) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = implicated(diagnosis)
    rows = diagnosis.history.rows
    count = max(len(metrics), 1)
    figure, axes = plt.subplots(count, 1, figsize=(8, 2.4 * count + 0.6), squeeze=False)
    title = f"{diagnosis.history.name or diagnosis.history.source}: {diagnosis.verdict}"
    figure.suptitle(title, fontsize=11)
    if not metrics:
        axes[0][0].text(0.5, 0.5, "no metric to plot", ha="center", va="center")
        axes[0][0].set_axis_off()
    for axis, metric in zip((row[0] for row in axes), metrics, strict=False):
        points = [(step, row[metric]) for step, row in rows if metric in row]
        axis.plot([s for s, _ in points], [v for _, v in points], lw=1.2, color="tab:blue")
        value_at = dict(points)
        for alert in diagnosis.alerts:
            if alert.metric != metric:
                continue
            y = value_at.get(alert.step)
            note = alert.action == "log"
            axis.axvline(alert.step, color="grey" if note else "tab:red", lw=0.8, ls=":")
            if y is not None:
                axis.plot([alert.step], [y], marker="o" if note else "x", ms=8, color="grey" if note else "tab:red")
            axis.annotate(
                alert.rule,
                (alert.step, 1.0),
                xycoords=("data", "axes fraction"),
                fontsize=8,
                ha="left",
                va="top",
                rotation=90,
                color="grey" if note else "tab:red",
            )
        axis.set_ylabel(metric, fontsize=8)
        axis.grid(alpha=0.3)
    axes[-1][0].set_xlabel("step")
    figure.tight_layout()
    path.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(path, dpi=90)
    plt.close(figure)
    return path


def write_figures(diagnoses: Sequence[Diagnosis], folder: Path, force: bool = False) -> list[Path]:
    paths = targets(diagnoses, folder, force)
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as error:
        raise DoctorInputError(
            f"--figures {folder}: cannot be created ({error.strerror}); expected a writable folder"
        ) from None
    return [write_sheet(diagnosis, path) for diagnosis, path in zip(diagnoses, paths, strict=True)]
