"""The records of a TensorBoard event file, every damaged one accounted for. The file is TFRecord framing: each
record is its payload's length (8 bytes, little-endian), that length's masked CRC-32C (4), the payload, the
payload's masked CRC-32C (4). TensorBoard's own loader stops silently at the first record that fails a check; here a
record whose payload fails its checksum is skipped and counted (its length was checked, so the next record is found),
and a damaged length or a cut tail ends the file with the bytes left unread counted.

The checksum is TensorBoard's own (`masked_crc32c`, from the reader it uses when TensorFlow is not installed).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from align_kit.doctor.readers.common import read_bytes_bounded

_LENGTH = struct.Struct("<Q")
_CRC = struct.Struct("<I")


@dataclass
class Damage:
    """What one event file lost: payloads that failed their checksum, and the bytes after the last readable record."""

    bad_records: list[int] = field(default_factory=list)  # byte offsets of records skipped for their checksum
    unread_bytes: int = 0  # bytes after the point where the framing could not be followed
    unread_at: int | None = None  # where those bytes start
    why: str = ""  # why the framing ended early: "a cut record", "a damaged length"

    def note(self, path: Path) -> str:
        """The report's note on what was lost, "" when nothing was."""
        parts = []
        if self.bad_records:
            parts.append(
                f"{len(self.bad_records)} record(s) failed their checksum and were skipped (first at byte "
                f"{self.bad_records[0]})"
            )
        if self.unread_bytes:
            parts.append(f"{self.why} at byte {self.unread_at}: the {self.unread_bytes} byte(s) after it were not read")
        return f"{path.name}: {'; '.join(parts)}" if parts else ""


def records(path: Path, damage: Damage) -> Iterator[bytes]:
    """The payloads of the event file's intact records, in file order; `damage` is filled in as they are read."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import masked_crc32c

    data = read_bytes_bounded(path, "a TensorBoard event file")
    position, end = 0, len(data)
    while position < end:
        header = data[position : position + 12]
        if len(header) < 12:
            damage.why = "a cut record"
            break
        (length,) = _LENGTH.unpack_from(header)
        if masked_crc32c(header[:8]) != _CRC.unpack_from(header, 8)[0]:
            damage.why = "a damaged record length"
            break
        payload = data[position + 12 : position + 12 + length]
        trailer = data[position + 12 + length : position + 16 + length]
        if len(payload) < length or len(trailer) < 4:
            damage.why = "a cut record"
            break
        if masked_crc32c(payload) != _CRC.unpack(trailer)[0]:
            damage.bad_records.append(position)
        else:
            yield payload
        position += 16 + length
    if position < end:
        damage.unread_at, damage.unread_bytes = position, end - position
