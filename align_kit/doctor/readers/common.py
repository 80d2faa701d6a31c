"""What every reader shares: raw logged rows (step, {key: value}) in file order -> a RunHistory keyed by concept,
and the one-line input errors."""

from __future__ import annotations

import os
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from align_kit.doctor.history import DoctorInputError, RunHistory, UnreadInput
from align_kit.doctor.keymaps import (
    ADVICE_FRAMEWORK,
    CONVERSIONS,
    NOT_METRICS,
    PER_REWARD,
    detect_framework,
    resolve,
    role_keys,
    to_float,
    unknown_concepts,
)

RawRows = list[tuple[int, dict[str, Any]]]

UNKNOWN_FORMAT = (
    "no metric rows found; expected metrics.jsonl, trainer_state.json, TRL log lines, verl step lines, a W&B run, "
    "TensorBoard events or a CSV/JSONL with --map"
)
# The flat-group shares the rules read (align_kit's, TRL's), and verl's advantage range they can be derived from.
FLAT_SHARES = ("groups/flat_fraction", "frac_reward_zero_std")
ADVANTAGE_MAX, ADVANTAGE_MIN = "critic/advantages/max", "critic/advantages/min"
# Ratios of two probabilities are never exactly 0: a 0 in these columns is a table's filler for "not logged" (the
# Trainer's progress table writes 0 before the first value of a metric logged only on some steps).
NEVER_ZERO = frozenset({"sampling/importance_sampling_ratio/mean", "policy_ratio/mean"})
# HF's end-of-training row (train_runtime, train_loss, ...) summarises the run: it is not a step.
SUMMARY_KEYS = ("train_runtime", "train_loss")


# The most the doctor reads of one file. A TRL trainer_state.json of 10,000 steps is about 5 MB and a long console
# log some hundred MB; the bound keeps /dev/zero, a disk image or a core dump named by mistake from filling memory.
READ_CAP_ENV, READ_CAP_MB = "ALIGN_KIT_DOCTOR_MAX_MB", 512  # MiB
# The most log files, or TensorBoard run folders, the doctor reads from one folder; past it the folder is refused
# (never a part read and the rest dropped: a failing run among the dropped would leave the verdict healthy).
FOLDER_CAP_ENV, FOLDER_CAP = "ALIGN_KIT_DOCTOR_MAX_RUNS", 200
_NOT_REGULAR = (
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISFIFO, "a named pipe (FIFO)"),
    (stat.S_ISSOCK, "a socket"),
)


def input_error(source: str | Path, what: str) -> DoctorInputError:
    return DoctorInputError(f"{source}: {what}")


def _whole_setting(name: str, default: int, unit: str) -> int:
    text = os.environ.get(name, "").strip()
    if not text:
        return default
    if not (text.isascii() and text.isdigit()) or int(text) < 1:
        raise DoctorInputError(f"{name}={text!r}: expected a whole number of {unit} >= 1")
    return int(text)


def read_cap_mb() -> int:
    """The read cap in MiB: READ_CAP_MB, or the whole number the environment's ALIGN_KIT_DOCTOR_MAX_MB gives."""
    return _whole_setting(READ_CAP_ENV, READ_CAP_MB, "MiB")


def check_folder_cap(folder: Path, count: int, what: str) -> None:
    """Refuse a folder holding more `what` than the doctor reads from one folder (FOLDER_CAP, or the environment's
    ALIGN_KIT_DOCTOR_MAX_RUNS), naming both numbers and the fix."""
    cap = _whole_setting(FOLDER_CAP_ENV, FOLDER_CAP, "files")
    if count > cap:
        raise UnreadInput(
            f"{folder}: holds {count} {what}, more than the {cap} the doctor reads from one folder; expected at most "
            f"{cap} (set {FOLDER_CAP_ENV}={count} to read them all, or name the ones to read)"
        )


def not_regular(info: os.stat_result) -> str | None:
    """What a path is when it is not a regular file ("a named pipe (FIFO)", "a folder", ...), else None."""
    if stat.S_ISDIR(info.st_mode):
        return "a folder"
    return next((name for test, name in _NOT_REGULAR if test(info.st_mode)), None)


def unreadable(path: str | Path, error: OSError) -> UnreadInput:
    """The one line for a file the doctor may not or cannot read, with the fix."""
    reason = error.strerror or type(error).__name__
    if isinstance(error, PermissionError):
        fix = f"check its permissions (chmod u+r{'x' * Path(path).is_dir()} {path})"
    elif isinstance(error, FileNotFoundError):
        fix = "it is a broken link, or was removed while read: restore it"
    else:
        fix = "check the disk it is on"
    message = f"{path}: cannot be read ({reason}); expected a readable run log ({fix}, or leave it out)"
    return UnreadInput(message, lasting=not isinstance(error, FileNotFoundError))


def raise_unreadable(error: OSError) -> None:
    """An `onerror` for os.walk: a folder that cannot be listed is refused, never passed over (it may hold runs)."""
    raise unreadable(error.filename, error)


def open_regular(path: Path, expected: str = "a run's log file or folder") -> BinaryIO:
    """The file opened for reading, only when it is a regular file. Opened without blocking and checked on the open
    descriptor, so a named pipe never blocks the doctor and a file swapped after a check is still caught."""
    try:
        kind = not_regular(os.stat(path))  # a socket cannot even be opened: named before it is tried
        if kind is None:
            descriptor = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0))
            kind = not_regular(os.fstat(descriptor))  # what was opened, should the path have changed since
            if kind is not None:
                os.close(descriptor)
    except OSError as error:
        raise unreadable(path, error) from None
    if kind is not None:
        raise UnreadInput(f"{path}: is {kind}, not a regular file; expected {expected}")
    if hasattr(os, "set_blocking"):
        os.set_blocking(descriptor, True)
    return os.fdopen(descriptor, "rb")


def check_followable(path: Path) -> None:
    """Refuse at once a --follow path that exists and could never be read (a pipe, a device, no permission); one
    not written yet is waited for."""
    try:
        info = path.stat()
    except FileNotFoundError:
        return
    except OSError as error:
        raise unreadable(path, error) from None
    kind = not_regular(info)
    if kind == "a folder":
        return
    if kind is not None:
        raise UnreadInput(f"{path}: is {kind}, not a regular file; expected a run's log file or folder to follow")
    open_regular(path).close()


def read_bytes_bounded(path: Path, expected: str = "a run's log file or folder") -> bytes:
    """A file's bytes, read only when it is a regular file within the read cap: a device, a pipe or an oversized
    file is refused before a byte is read, never read without end."""
    cap_mb = read_cap_mb()
    cap = cap_mb * 1024 * 1024
    with open_regular(path, expected) as handle:
        size = os.fstat(handle.fileno()).st_size
        try:
            data = handle.read(cap + 1) if size <= cap else b""  # +1: past the cap, whatever size is reported (/proc)
        except OSError as error:
            raise unreadable(path, error) from None
    if size > cap or len(data) > cap:
        raise UnreadInput(
            f"{path}: larger than the doctor's read cap of {cap_mb} MiB; expected {expected} (set {READ_CAP_ENV}="
            f"{2 * cap_mb} to raise the cap)"
        )
    return data


def read_bounded(path: Path, expected: str = "a run's log file or folder") -> str:
    """A log file's text (undecodable bytes replaced), read by `read_bytes_bounded`; an empty file is refused."""
    data = read_bytes_bounded(path, expected)
    if not data:
        raise input_error(path, "is empty (0 bytes); expected a run's log with at least one logged step")
    return data.decode("utf-8", errors="replace")


def is_summary(row: Mapping[str, Any]) -> bool:
    return any(key in row for key in SUMMARY_KEYS)


def history_from_rows(
    source: str | Path,
    format: str,
    raw: RawRows,
    *,
    framework: str | None = None,
    key_map: Mapping[str, str] | None = None,
    notes: list[str] | None = None,
    context: dict[str, Any] | None = None,
    name: str = "",
    null_is_nan: bool = False,
    advice_framework: str | None = None,
) -> RunHistory:
    """The history of raw rows: each key mapped once to its concept, values as floats, rows of one step merged (a
    resumed run redoes steps: the later value wins), in step order. `framework` names the keys' family (detected
    from the keys when None); `advice_framework` whose terms the advice uses, when that differs (an align_kit run
    logs TRL's names). Raises the input errors: no rows, or no key that maps to a concept."""
    notes = list(notes or [])
    if not raw:
        raise input_error(source, f"the {format} input holds no logged rows; expected at least one logged step")
    seen: dict[str, None] = {}
    for _, row in raw:
        if not row.keys() <= seen.keys():  # a set comparison in C: the common row adds no key
            seen.update(dict.fromkeys(row))
    keys = [key for key in seen if key not in NOT_METRICS]
    family = framework or detect_framework(keys)
    if key_map:
        unknown = unknown_concepts(key_map)
        if unknown:
            notes.append(f"--map names {', '.join(unknown)}, which no rule reads")
        missing = [column for column in key_map.values() if column not in seen]
        if missing:
            notes.append(f"--map columns not in the log: {', '.join(missing)}")
    mapping, conflict_notes = resolve(keys, family, key_map)
    notes += conflict_notes
    if not mapping:
        shown = ", ".join(keys[:8]) + (f", ... ({len(keys)} keys)" if len(keys) > 8 else "")
        raise input_error(
            source,
            f"{len(raw)} rows found but no key maps to a metric the rules read (keys: {shown or 'none'}); "
            "pass --map concept=column, e.g. --map reward=<column>",
        )
    components = [key for key, concept in mapping.items() if PER_REWARD.match(concept)]
    roles, role_notes = role_keys(mapping, key_map, _flat(raw, components))
    notes += role_notes
    items = list(mapping.items()) + list(roles.items())  # a role's component is read under both names
    conversions = {
        key: CONVERSIONS[key.removeprefix("train/")] for key in mapping if key.removeprefix("train/") in CONVERSIONS
    }
    for key in conversions:
        notes.append(f"{key} read through its conversion to {mapping[key]} (see the key maps)")
    by_step: dict[int, dict[str, float]] = {}
    nulls = fillers = 0
    not_numbers: list[tuple[int, str, object]] = []  # (step, key, value) of metric values that are no number
    repeated: dict[int, None] = {}  # steps whose values some later row logs again
    special = {key for key, concept in items if key in conversions or concept in NEVER_ZERO}
    for step, row in raw:
        values = by_step.get(step)
        if values is None:
            values = by_step[step] = {}
        for key, concept in items:
            if key in row:
                value = row[key]
                if type(value) is float and key not in special:  # most values: a float read as it is, at once
                    number = value
                else:
                    number = to_float(value)
                    if number is None:
                        if value is None and null_is_nan:
                            number = float("nan")
                            nulls += 1
                        else:
                            if value is not None:  # text, a list, a mapping: a metric that is no number is said
                                not_numbers.append((step, key, value))
                            continue
                    if conversions and key in conversions:
                        number = conversions[key](number)
                    if number == 0.0 and concept in NEVER_ZERO:
                        fillers += 1
                        continue
                if concept in values:
                    repeated[step] = None
                values[concept] = number
    if repeated:
        notes.append(_repeated_note(list(repeated)))
    if not_numbers:
        notes.append(_not_numbers_note(not_numbers))
    if nulls:
        notes.append(f"{nulls} null value(s) read as NaN (the file writes non-finite values as null)")
    if fillers:
        notes.append(f"{fillers} value(s) of exactly 0 in a probability-ratio column read as not logged")
    if not set(FLAT_SHARES) & set(mapping.values()):
        notes += _flat_from_advantages(raw, by_step)
    rows = [(step, values) for step, values in sorted(by_step.items()) if values]
    if not rows:
        raise input_error(source, f"the {format} input holds no numeric value of {', '.join(mapping)}")
    unmapped = [key for key in keys if key not in mapping and _numeric_somewhere(raw, key)]
    return RunHistory(
        source=str(source),
        format=format,
        framework=advice_framework or ADVICE_FRAMEWORK.get(family, family),
        rows=rows,
        mapping=mapping,
        unmapped=unmapped,
        notes=notes,
        context=context or {},
        name=name,
        roles={role: key for key, role in roles.items()},
    )


def _repeated_note(steps: list[int]) -> str:
    shown = ", ".join(str(step) for step in steps[:5]) + (f", ... ({len(steps)} steps)" if len(steps) > 5 else "")
    return (
        f"{len(steps)} step(s) logged more than once ({shown}): each is read from its later copy in the file, "
        "as a resumed run redoes steps"
    )


def _flat_from_advantages(raw: RawRows, by_step: dict[int, dict[str, float]]) -> list[str]:
    """verl logs no share of flat groups, only the batch's advantage range. A group-normalised advantage is 0 for
    every completion only when every group's rewards are equal, so a run whose every logged range is exactly 0
    had every group flat: its flat share is 1.0 on those rows. A run where any range is not 0 says nothing of the
    share (a mix of flat and informative groups), so nothing is derived: deriving it only on the all-zero rows would
    make the rules' means read 1.0 where the run was in fact mixed."""
    ranges = [
        (step, to_float(row.get(ADVANTAGE_MAX)), to_float(row.get(ADVANTAGE_MIN)))
        for step, row in raw
        if ADVANTAGE_MAX in row or ADVANTAGE_MIN in row
    ]
    if not ranges or any(high != 0.0 or low != 0.0 for _, high, low in ranges):
        return []
    for step, _, _ in ranges:
        by_step[step][FLAT_SHARES[1]] = 1.0
    return [
        f"{ADVANTAGE_MAX} and {ADVANTAGE_MIN} are exactly 0 on all {len(ranges)} rows that log them: every advantage "
        "is 0, so every group was flat; read as frac_reward_zero_std = 1.0 on those rows"
    ]


def _flat(raw: RawRows, keys: list[str]) -> list[str]:
    """The keys among `keys` whose logged value never changes."""
    values: dict[str, set] = {key: set() for key in keys}
    for _, row in raw:
        for key in keys:
            if key in row and len(values[key]) < 2:
                values[key].add(row[key])
    return [key for key, seen in values.items() if len(seen) < 2]


def _numeric_somewhere(raw: RawRows, key: str) -> bool:
    """Whether a key holds a number in some row (stops at the first: a metric's first row is almost always one)."""
    for _, row in raw:
        if key in row and to_float(row[key]) is not None:
            return True
    return False


def as_step(value: Any) -> int | None:
    """A logged step as an int: 12, 12.0, "12", or ms-swift's "12/400" (step/max_steps). A whole number, as an int
    or as digits, is kept exact (a float holds whole numbers only to 2**53: larger steps would merge)."""
    if isinstance(value, str):
        value = value.split("/", 1)[0].strip() if "/" in value else value.strip()
        digits = value.lstrip("+-")
        if digits.isascii() and digits.isdigit():
            return int(value)
    elif type(value) is int:
        return value
    number = to_float(value)
    if number is None or number != number or number in (float("inf"), float("-inf")):
        return None
    return int(number)


def _not_numbers_note(found: list[tuple[int, str, object]]) -> str:
    """One note for the values of read metrics that are no number (left out of the rules), with the first one shown
    escaped (a shared log's text must not reach the terminal raw)."""
    step, key, value = found[0]
    shown = ascii(value) if len(ascii(value)) <= 40 else ascii(value)[:37] + "..."
    more = f" and {len(found) - 1} more" if len(found) > 1 else ""
    return f"{len(found)} value(s) of the metrics read are not numbers, left out: {key}={shown} at step {step}{more}"
