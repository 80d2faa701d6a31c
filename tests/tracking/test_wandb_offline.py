"""An offline W&B run file read back: a record whose checksum holds but which does not decode is named, not a
traceback (a torn tail, whose checksum fails, still ends the read quietly)."""

from __future__ import annotations

import struct
import zlib

import pytest

from align_kit.tracking.wandb_offline import read_history


def run_file(folder, *payloads: bytes):
    """A run file as wandb frames it: the 7-byte header, then one full chunk (type 1) per payload."""
    chunks = b"".join(
        struct.pack("<IHB", zlib.crc32(bytes([1]) + payload), len(payload), 1) + payload for payload in payloads
    )
    (folder / "run-x.wandb").write_bytes(b":W&B\xe1\xbe\x00" + chunks)
    return folder


def history_record(key: str, value_json: str) -> bytes:
    from wandb.proto import wandb_internal_pb2

    record = wandb_internal_pb2.Record()
    item = record.history.item.add()
    item.key, item.value_json = key, value_json
    return record.SerializeToString()


def test_a_whole_run_file_reads_back(tmp_path):
    assert read_history(run_file(tmp_path, history_record("reward", "0.5"))) == [{"reward": 0.5}]


def test_a_record_with_a_valid_checksum_that_does_not_decode_is_named(tmp_path):
    folder = run_file(tmp_path, history_record("reward", "0.5"), b"\x0a\xff\xff\xff\xff\x0f")
    with pytest.raises(ValueError, match=r"run-x.wandb: record 2 does not decode"):
        read_history(folder)


def test_a_history_value_that_is_not_json_is_named(tmp_path):
    with pytest.raises(ValueError, match=r"^the value of reward is not JSON"):
        read_history(run_file(tmp_path, history_record("reward", "{0.5")))


def test_a_torn_tail_ends_the_read(tmp_path):
    folder = run_file(tmp_path, history_record("reward", "0.5"))
    with (folder / "run-x.wandb").open("ab") as handle:
        handle.write(struct.pack("<IHB", 12345, 40, 1) + b"cut")
    assert read_history(folder) == [{"reward": 0.5}]
