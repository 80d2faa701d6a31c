"""Read an offline W&B run (`run-<id>.wandb`) back without a server.

wandb 0.31 ships no reader for its run files. The format is a 7-byte header (`:W&B`, magic
0xBEE1, version) followed by LevelDB-log framing: 32 KiB blocks of chunks, each chunk a header of
CRC32 (over type byte + payload), length and type (1 full, 2 first, 3 middle, 4 last) and a
payload; joined payloads are `wandb_internal_pb2.Record` messages. A torn tail (killed run) ends
the read cleanly.
"""

from __future__ import annotations

import json
import struct
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_BLOCK = 32 * 1024
_HEADER = struct.Struct("<IHB")
_FILE_MAGIC = b":W&B\xe1\xbe"


def find_offline_runs(folder: str | Path) -> list[Path]:
    """Offline run folders under a run folder (WANDB_DIR), oldest first."""
    return sorted(Path(folder).glob("wandb/offline-run-*"))


def iter_records(run_folder: str | Path, stop: dict | None = None) -> Iterator[Any]:
    """The run file's records in order. A chunk whose checksum fails ends the read (a torn tail); a record whose
    checksum holds but which does not decode (damaged before it was framed, or not W&B's) is a ValueError naming it.
    `stop`, when given, receives where a failing chunk ended the read (`at`) and the bytes left unread (`unread`)."""
    from google.protobuf.message import DecodeError
    from wandb.proto import wandb_internal_pb2

    path = next(Path(run_folder).glob("run-*.wandb"))
    data = path.read_bytes()
    number = 0
    if not data.startswith(_FILE_MAGIC):
        raise ValueError(f"{run_folder}: not a W&B run file")
    position, pending = len(_FILE_MAGIC) + 1, b""
    while position + _HEADER.size <= len(data):
        room = _BLOCK - position % _BLOCK
        if room < _HEADER.size:
            position += room
            continue
        checksum, length, kind = _HEADER.unpack_from(data, position)
        if kind == 0:  # zero padding up to the end of the block
            position += room
            continue
        payload = data[position + _HEADER.size : position + _HEADER.size + length]
        if len(payload) < length or zlib.crc32(bytes([kind]) + payload) != checksum:
            if stop is not None:
                stop.update(at=position, unread=len(data) - position)
            return
        position += _HEADER.size + length
        pending = payload if kind in (1, 2) else pending + payload
        if kind in (1, 4):
            number += 1
            record = wandb_internal_pb2.Record()
            try:
                record.ParseFromString(pending)
            except DecodeError as error:
                raise ValueError(f"{path}: record {number} does not decode ({error})") from None
            yield record


def _items_to_dict(items, into: dict | None = None) -> dict:
    result = {} if into is None else into
    for item in items:
        keys = list(item.nested_key) or [item.key]
        node = result
        for key in keys[:-1]:
            node = node.setdefault(key, {})
        try:
            node[keys[-1]] = json.loads(item.value_json)
        except ValueError as error:  # JSONDecodeError and UnicodeDecodeError
            raise ValueError(f"the value of {'/'.join(keys)} is not JSON ({error})") from None
    return result


def read_history(run_folder: str | Path, stop: dict | None = None) -> list[dict]:
    """The logged rows; `stop` as for `iter_records`."""
    return [_items_to_dict(r.history.item) for r in iter_records(run_folder, stop) if r.HasField("history")]


def read_config(run_folder: str | Path) -> dict:
    config: dict = {}
    for record in iter_records(run_folder):
        if record.HasField("run"):
            _items_to_dict(record.run.config.update, config)
        elif record.HasField("config"):
            _items_to_dict(record.config.update, config)
    config.pop("_wandb", None)
    return config


def read_run_info(run_folder: str | Path) -> dict:
    for record in iter_records(run_folder):
        if record.HasField("run"):
            run = record.run
            return {
                "project": run.project,
                "group": run.run_group,
                "name": run.display_name,
                "tags": list(run.tags),
            }
    return {}
