"""Read a wandb offline run's transaction log (`run-*.wandb`): the records wandb-core wrote, as wandb's
protobuf `Record`s. The file is a LevelDB-style log: a 7-byte header (`:W&B`, magic, version), then 32 KiB
blocks of chunks, each with a 7-byte header (crc32, length, type: full / first / middle / last)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

BLOCK = 32768


def _chunks(data: bytes):
    if data[:4] != b":W&B":
        raise ValueError("not a wandb transaction log")
    pos, pending = 7, b""
    while pos + 7 <= len(data):
        if BLOCK - pos % BLOCK < 7:  # a block's tail too short for a header is padding
            pos += BLOCK - pos % BLOCK
            continue
        _crc, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        chunk, pos = data[pos + 7 : pos + 7 + length], pos + 7 + length
        if kind == 1:
            yield chunk
        elif kind == 2:
            pending = chunk
        elif kind == 3:
            pending += chunk
        elif kind == 4:
            yield pending + chunk


def history(run_file: Path) -> list[dict]:
    """Each `run.log` row: its metrics (wandb's own `_step`, `_runtime`, `_timestamp` included)."""
    from wandb.proto import wandb_internal_pb2

    rows = []
    for raw in _chunks(run_file.read_bytes()):
        record = wandb_internal_pb2.Record()
        record.ParseFromString(raw)
        if record.WhichOneof("record_type") == "history":
            rows.append({(i.key or "/".join(i.nested_key)): json.loads(i.value_json) for i in record.history.item})
    return rows
