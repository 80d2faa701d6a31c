"""TensorBoard event files (`events.out.tfevents.*`): what TRL writes under `<output_dir>/runs/<date>_<host>/` with
its default `report_to`, and verl's tensorboard logger. Read record by record (`tfrecords`, so a damaged record is
skipped and noted where TensorBoard's own loader stops without a word) and decoded with TensorBoard's protos: the
scalars, and the scalar tensors newer writers log, every event kept in file order (a step logged again after a
restart is read from its later copy, and noted). HF's TensorBoardCallback names a metric `train/<key>`
(`eval/<key>` for evaluation) against the global step, which the key maps read as TRL's names.

One folder of event files is one run (TensorBoard's own unit); a folder holding several such folders gives one
history per run folder.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path

from align_kit.doctor.history import RunHistory
from align_kit.doctor.readers.common import (
    RawRows,
    check_folder_cap,
    history_from_rows,
    input_error,
    raise_unreadable,
)
from align_kit.doctor.readers.tfrecords import Damage, records

EVENT_MARK = "tfevents"


def is_event_file(path: Path) -> bool:
    return EVENT_MARK in path.name and path.is_file()


def event_folders(folder: Path) -> list[Path]:
    """The folders at or below `folder` that hold event files, in path order; more than the doctor reads from one
    folder is refused (see `check_folder_cap`), never cut short."""
    found = [
        Path(current)
        for current, _, files in os.walk(folder, onerror=raise_unreadable)  # a folder it cannot list is refused
        if any(EVENT_MARK in name for name in files)  # a pipe named like an event file is refused when read
    ]
    check_folder_cap(folder, len(found), "TensorBoard run folders")
    return sorted(found)


def _event_files(path: Path) -> list[Path]:
    if not path.is_dir():
        return [path]
    return sorted(item for item in path.iterdir() if EVENT_MARK in item.name and not item.is_dir())


def _rows(path: Path) -> tuple[RawRows, list[str]]:
    """The scalars of one run's event files in file order (one row per step's consecutive values), and notes: the
    non-scalar events left out and every damaged record (see `tfrecords`)."""
    try:
        from tensorboard.compat.proto import event_pb2
        from tensorboard.util import tensor_util
    except ImportError:
        raise input_error(
            path, "reading TensorBoard event files needs the tensorboard package: pip install tensorboard"
        ) from None
    from google.protobuf.message import DecodeError

    raw: RawRows = []
    notes: list[str] = []
    skipped = undecoded = 0
    for file in _event_files(path):
        damage = Damage()
        for payload in records(file, damage):
            try:
                event = event_pb2.Event.FromString(payload)
            except DecodeError:
                undecoded += 1
                continue
            for value in event.summary.value:
                kind = value.WhichOneof("value")
                if kind == "simple_value":
                    number = value.simple_value
                elif kind == "tensor":
                    array = tensor_util.make_ndarray(value.tensor)
                    if array.size != 1 or array.dtype.kind not in "fiu":
                        skipped += 1  # text summaries (the run's arguments): not a metric
                        continue
                    number = float(array.reshape(()))
                else:
                    continue  # histograms, images, audio
                if raw and raw[-1][0] == event.step and value.tag not in raw[-1][1]:
                    raw[-1][1][value.tag] = number
                else:
                    raw.append((event.step, {value.tag: number}))
        if note := damage.note(file):
            notes.append(f"damaged TensorBoard events: {note}")
    if undecoded:
        notes.append(f"{undecoded} record(s) passed their checksum but are no TensorBoard event: left out")
    if skipped:
        notes.append(f"left out {skipped} non-scalar tensor event(s) (text, histograms)")
    return raw, notes


def read_events(path: Path, key_map: Mapping[str, str] | None = None, name: str = "") -> RunHistory:
    """One run's events: an event file, or the folder holding its event files."""
    raw, notes = _rows(path)
    folder = path if path.is_dir() else path.parent
    return history_from_rows(path, "tensorboard", raw, key_map=key_map, notes=notes, name=name or folder.name)
