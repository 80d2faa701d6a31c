"""TensorBoard event files (`events.out.tfevents.*`): what TRL writes under `<output_dir>/runs/<date>_<host>/` with
its default `report_to`, and verl's tensorboard logger. Read with TensorBoard's own reader (`EventAccumulator`): the
scalars, and the scalar tensors newer writers log, every event kept. HF's TensorBoardCallback names a metric
`train/<key>` (`eval/<key>` for evaluation) against the global step, which the key maps read as TRL's names.

One folder of event files is one run (TensorBoard's own unit); a folder holding several such folders gives one
history per run folder.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from align_kit.doctor.history import RunHistory
from align_kit.doctor.readers.common import RawRows, history_from_rows, input_error

EVENT_MARK = "tfevents"


def is_event_file(path: Path) -> bool:
    return EVENT_MARK in path.name and path.is_file()


def event_folders(folder: Path, limit: int = 200) -> list[Path]:
    """The folders at or below `folder` that hold event files, in path order."""
    found: dict[Path, None] = {}
    for path in sorted(folder.rglob(f"*{EVENT_MARK}*")):
        if path.is_file():
            found[path.parent] = None
            if len(found) >= limit:
                break
    return list(found)


def _rows(path: Path) -> tuple[RawRows, list[str]]:
    try:
        from tensorboard.backend.event_processing import event_accumulator
        from tensorboard.util import tensor_util
    except ImportError:
        raise input_error(
            path, "reading TensorBoard event files needs the tensorboard package: pip install tensorboard"
        ) from None
    keep_all = {event_accumulator.SCALARS: 0, event_accumulator.TENSORS: 0}
    accumulator = event_accumulator.EventAccumulator(str(path), size_guidance=keep_all)
    try:
        accumulator.Reload()
    except Exception as error:  # a corrupt record: TensorBoard raises its own types (DataLossError, ...)
        raise input_error(path, f"cannot read the TensorBoard events ({type(error).__name__}: {error})") from None
    tags = accumulator.Tags()
    by_step: dict[int, dict[str, float]] = {}
    for tag in tags.get(event_accumulator.SCALARS, []):
        for event in accumulator.Scalars(tag):
            by_step.setdefault(event.step, {})[tag] = event.value
    skipped = 0
    for tag in tags.get(event_accumulator.TENSORS, []):
        for event in accumulator.Tensors(tag):
            value = tensor_util.make_ndarray(event.tensor_proto)
            if value.size != 1 or value.dtype.kind not in "fiu":
                skipped += 1  # text summaries (the run's arguments) and histograms: not a metric
                continue
            by_step.setdefault(event.step, {})[tag] = float(value.reshape(()))
    notes = [f"left out {skipped} non-scalar tensor event(s) (text, histograms)"] if skipped else []
    return sorted(by_step.items()), notes


def read_events(path: Path, key_map: Mapping[str, str] | None = None, name: str = "") -> RunHistory:
    """One run's events: an event file, or the folder holding its event files."""
    raw, notes = _rows(path)
    folder = path if path.is_dir() else path.parent
    return history_from_rows(path, "tensorboard", raw, key_map=key_map, notes=notes, name=name or folder.name)
