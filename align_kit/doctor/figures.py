"""One PNG sheet per run (`--figures DIR`): the curves of the metrics the fired rules read, each firing point
marked (a red cross for a warning or failing alert, a grey circle for a note) with the rule's name. When nothing
fired, the sheet shows the run's main curves (reward, entropy, length, KL) that it logs.

Figures are written only where asked (`--figures DIR`), never into the run's own folder by default, and an existing
file is never overwritten without `--force`: every target is checked before the first one is written. The folder
is checked writable before the logs are read (`check_folder`), each sheet goes to a temporary file renamed into
place, and a write that fails (a full disk, a read-only folder) removes what this call wrote: one line, no half
sheet, no sheet replaced by a broken one.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from align_kit.doctor.diagnose import Diagnosis
from align_kit.doctor.history import DoctorInputError
from align_kit.doctor.report import printable

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


def check_folder(folder: Path) -> None:
    """Refuse a --figures folder that cannot hold the sheets, before anything is read or written: a file, a folder
    under a file, one whose nearest existing folder refuses a new file, or one under /proc or /sys (the train
    command's check of its own folders)."""
    from align_kit.core.errors import ConfigError
    from align_kit.runs.preflight import check_writable

    if folder.exists() and not folder.is_dir():
        raise DoctorInputError(f"--figures {folder}: is a file; expected a folder (created if missing)")
    try:
        check_writable("--figures", str(folder))
    except ConfigError as error:
        raise DoctorInputError(str(error)) from None


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


def write_sheet(diagnosis: Diagnosis, path: Path | BinaryIO) -> Path | BinaryIO:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    metrics = implicated(diagnosis)
    rows = diagnosis.history.rows
    count = max(len(metrics), 1)
    figure, axes = plt.subplots(count, 1, figsize=(8, 2.4 * count + 0.6), squeeze=False)
    title = printable(f"{diagnosis.history.name or diagnosis.history.source}: {diagnosis.verdict}")  # a surrogate fails
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
    try:
        figure.savefig(path, dpi=90, format="png")
    finally:
        plt.close(figure)
    return path


def write_figures(diagnoses: Sequence[Diagnosis], folder: Path, force: bool = False) -> list[Path]:
    paths = targets(diagnoses, folder, force)
    check_folder(folder)
    made = [parent for parent in (folder, *folder.parents) if not parent.exists()]
    written: list[Path] = []
    replaced: list[Path] = []  # with --force: the old sheets are gone once replaced; the line says so
    try:
        folder.mkdir(parents=True, exist_ok=True)
        for diagnosis, path in zip(diagnoses, paths, strict=True):
            new = not path.exists()
            _write_atomically(diagnosis, path)
            (written if new else replaced).append(path)
    except OSError as error:
        # Undo this call's writes: the report is not printed, so sheets without it would be left unexplained.
        for path in written:
            path.unlink(missing_ok=True)
        for parent in made:  # the deepest first
            try:
                parent.rmdir()
            except OSError:
                break
        kept = f"{len(replaced)} existing sheet(s) already replaced" if replaced else "nothing was written"
        raise DoctorInputError(
            f"--figures {folder}: cannot write a sheet ({error.strerror or error}); expected a writable folder with "
            f"free space ({kept})"
        ) from None
    return paths


def _write_atomically(diagnosis: Diagnosis, path: Path) -> None:
    """The sheet drawn into a temporary file beside `path`, then renamed over it: a failed write leaves `path` as
    it was."""
    handle = tempfile.NamedTemporaryFile(dir=path.parent, prefix=f".{path.stem}.", suffix=".png.part", delete=False)
    try:
        with handle:
            write_sheet(diagnosis, handle)
        os.replace(handle.name, path)
    except BaseException:
        Path(handle.name).unlink(missing_ok=True)
        raise
