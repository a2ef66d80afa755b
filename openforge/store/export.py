"""Export a run's calls, one record per call, as JSONL or Parquet (the format `openforge export` writes).

Each record has the call's fields — `episode_id`, `index`, `prompt_ids`, `output_ids`, `output_logprobs`
(float32 values), `finish_reason`, `policy_version`, `side_call`, `segment`, `break_reason`, `call_error`,
`parse_error`, `dialect`, `sampling`, `started_at`, `finished_at`, `timings`, `metadata` — plus, for
convenience, its episode's `task`, `harness`, `attempt`, `sample`, `reward` and `outcome`. Request/response
bodies and the episode key (a secret) are not exported.

JSONL writes `sampling`, `timings` and `metadata` as JSON objects; Parquet writes them as JSON strings and
token arrays as list<int32> / list<float32> columns. The output file is written whole or not at all (a
temporary file renamed into place).
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from openforge.core import CallRecord, Episode
from openforge.store.errors import NotARunError
from openforge.store.store import TrajectoryStore

if TYPE_CHECKING:
    import pyarrow as pa

FORMATS = ("jsonl", "parquet")
_PARQUET_BATCH = 256  # calls per row group: bounds memory on long runs


def export_calls(
    store: TrajectoryStore | str | os.PathLike[str],
    out_path: str | os.PathLike[str],
    format: Literal["jsonl", "parquet"] = "jsonl",
) -> int:
    """Write every call of the run to `out_path`; return how many were written.

    `store` is an open `TrajectoryStore` or a run directory (opened and closed here).
    """
    if format not in FORMATS:
        raise ValueError(f"unknown export format {format!r}; choose one of {', '.join(FORMATS)}")
    if not isinstance(store, TrajectoryStore):
        run_dir = Path(store)
        if not (run_dir / "trajectories.db").exists():
            raise NotARunError(f"{run_dir} is not a run directory (no trajectories.db in it)")
        with TrajectoryStore.open(run_dir) as opened:
            return export_calls(opened, out_path, format)

    out = Path(out_path)
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(f".{out.name}.{os.getpid()}.tmp")
    try:
        count = (_write_jsonl if format == "jsonl" else _write_parquet)(_records(store), tmp)
        os.replace(tmp, out)
    finally:
        tmp.unlink(missing_ok=True)
    return count


def _records(store: TrajectoryStore) -> Iterator[dict[str, Any]]:
    episodes: dict[str, Episode | None] = {}
    for call in store.iter_calls():
        if call.episode_id not in episodes:
            episodes.clear()  # calls arrive episode by episode
            episodes[call.episode_id] = store.get_episode(call.episode_id)
        yield call_record_dict(call, episodes[call.episode_id])


def call_record_dict(call: CallRecord, episode: Episode | None) -> dict[str, Any]:
    """One exported record (JSON-compatible; nested dicts for sampling, timings, metadata)."""
    return {
        "episode_id": call.episode_id,
        "index": call.index,
        "prompt_ids": call.prompt_ids,
        "output_ids": call.output_ids,
        "output_logprobs": call.output_logprobs,
        "finish_reason": call.finish_reason.value,
        "policy_version": call.policy_version,
        "side_call": call.side_call,
        "segment": call.segment,
        "break_reason": call.break_reason,
        "call_error": call.call_error,
        "parse_error": call.parse_error,
        "dialect": call.dialect,
        "sampling": call.sampling.model_dump(mode="json"),
        "started_at": call.started_at,
        "finished_at": call.finished_at,
        "timings": call.timings,
        "metadata": call.metadata,
        "task": episode.task if episode else None,
        "harness": episode.harness if episode else None,
        "attempt": episode.attempt if episode else None,
        "sample": episode.sample if episode else None,
        "reward": episode.reward if episode else None,
        "outcome": episode.outcome.value if episode and episode.outcome else None,
    }


def _write_jsonl(records: Iterator[dict[str, Any]], path: Path) -> int:
    count = 0
    with open(path, "w", encoding="utf-8") as f:
        for record in records:
            f.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")))
            f.write("\n")
            count += 1
    return count


_JSON_STRING_COLUMNS = ("sampling", "timings", "metadata")


def _parquet_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema(
        [
            ("episode_id", pa.string()),
            ("index", pa.int32()),
            ("prompt_ids", pa.list_(pa.int32())),
            ("output_ids", pa.list_(pa.int32())),
            ("output_logprobs", pa.list_(pa.float32())),
            ("finish_reason", pa.string()),
            ("policy_version", pa.int64()),
            ("side_call", pa.bool_()),
            ("segment", pa.int32()),
            ("break_reason", pa.string()),
            ("call_error", pa.string()),
            ("parse_error", pa.string()),
            ("dialect", pa.string()),
            ("sampling", pa.string()),
            ("started_at", pa.float64()),
            ("finished_at", pa.float64()),
            ("timings", pa.string()),
            ("metadata", pa.string()),
            ("task", pa.string()),
            ("harness", pa.string()),
            ("attempt", pa.int32()),
            ("sample", pa.int32()),
            ("reward", pa.float64()),
            ("outcome", pa.string()),
        ]
    )


def _write_parquet(records: Iterator[dict[str, Any]], path: Path) -> int:
    import pyarrow as pa  # only exports need pyarrow
    import pyarrow.parquet as pq

    schema = _parquet_schema()
    count = 0
    with pq.ParquetWriter(path, schema) as writer:
        batch: list[dict[str, Any]] = []

        def flush() -> None:
            columns = {name: [r[name] for r in batch] for name in schema.names}
            for name in _JSON_STRING_COLUMNS:
                columns[name] = [json.dumps(v, ensure_ascii=False) for v in columns[name]]
            writer.write_table(pa.table(columns, schema=schema))
            batch.clear()

        for record in records:
            batch.append(record)
            count += 1
            if len(batch) >= _PARQUET_BATCH:
                flush()
        if batch or count == 0:
            flush()  # an empty run still gets a file with the schema
    return count
