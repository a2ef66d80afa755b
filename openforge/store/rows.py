"""Conversions between canonical records (`openforge.core`) and table rows."""

from __future__ import annotations

import json
import sqlite3

import numpy as np

from openforge.core import CallImage, CallRecord, Episode, SamplingParams
from openforge.store.bodies import encode_body
from openforge.store.codec import bytes_to_ids, bytes_to_logprobs, ids_array, logprobs_to_bytes, pack, unpack
from openforge.store.prompts import EncodedPrompt

EPISODE_COLUMNS = (
    "id", "key", "task", "harness", "attempt", "sample", "state", "outcome", "outcome_reason", "reward",
    "created_at", "ended_at", "metadata",
)  # fmt: skip

# Episode fields that may change after creation (the rest identify the episode).
UPDATABLE_EPISODE_FIELDS = frozenset({"state", "outcome", "outcome_reason", "reward", "ended_at", "metadata"})

CALL_COLUMNS = (
    "episode_id", "call_index", "prompt_len", "prompt_ref", "prompt_prefix_len", "prompt_depth", "prompt_tail",
    "output_len", "output_ids", "output_logprobs", "sampling", "finish_reason", "policy_version", "started_at",
    "finished_at", "timings", "dialect", "side_call", "segment", "break_reason", "call_error", "parse_error",
    "request_body", "response_body", "metadata",
)  # fmt: skip


def to_json(value: object, what: str) -> str:
    try:
        return json.dumps(value, ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{what} must be JSON-serializable: {exc}") from exc


def episode_to_row(ep: Episode) -> tuple:
    return (
        ep.id, ep.key, ep.task, ep.harness, ep.attempt, ep.sample, ep.state.value,
        ep.outcome.value if ep.outcome is not None else None, ep.outcome_reason, ep.reward,
        ep.created_at, ep.ended_at, to_json(ep.metadata, "episode metadata"),
    )  # fmt: skip


def row_to_episode(row: sqlite3.Row | tuple) -> Episode:
    values = dict(zip(EPISODE_COLUMNS, row))
    values["metadata"] = json.loads(values["metadata"])
    return Episode(**values)


class EncodedCall:
    """The parts of a call that can be encoded before taking the write lock (everything but the prompt,
    whose encoding depends on the calls stored before it)."""

    __slots__ = ("record", "prompt", "output", "columns", "body_depth", "stored_body")

    def __init__(
        self,
        record: CallRecord,
        body_ref: tuple[int, bytes, int] | None = None,
        prompt_base: np.ndarray | None = None,
        stored_body: bytes | None = None,
    ):
        """`body_ref`: (index, stored request body, depth) of an earlier call of the episode to store the request
        body as a delta of. `prompt_base`: ids the prompt is known to start with (an earlier call's prompt +
        output, `len(prompt_base)` of them), so only the rest is converted. `stored_body`: the request body as
        stored, its images cut out (`images.split_body`); the record's own body when None."""
        self.record = record
        self.stored_body = record.request_body if stored_body is None else stored_body
        if prompt_base is not None:
            self.prompt = np.concatenate([prompt_base, ids_array(record.prompt_ids[len(prompt_base) :])])
        else:
            self.prompt = ids_array(record.prompt_ids)
        self.output = ids_array(record.output_ids)
        request_body, self.body_depth = encode_body(self.stored_body, body_ref)
        self.columns = {
            "output_len": len(record.output_ids),
            "output_ids": pack(self.output.tobytes()),
            "output_logprobs": pack(logprobs_to_bytes(record.output_logprobs)),
            "sampling": record.sampling.model_dump_json(),
            "finish_reason": record.finish_reason.value,
            "policy_version": record.policy_version,
            "started_at": record.started_at,
            "finished_at": record.finished_at,
            "timings": to_json(record.timings, "call timings"),
            "dialect": record.dialect,
            "side_call": int(record.side_call),
            "segment": record.segment,
            "break_reason": record.break_reason,
            "call_error": record.call_error,
            "parse_error": record.parse_error,
            "request_body": request_body,
            "response_body": pack(record.response_body),
            "metadata": to_json(record.metadata, "call metadata"),
        }

    @property
    def sequence(self) -> np.ndarray:
        """Prompt followed by output: what the next call's prompt most likely starts with."""
        return np.concatenate([self.prompt, self.output])

    def row(self, prompt: EncodedPrompt) -> tuple:
        values = dict(self.columns)
        values.update(
            episode_id=self.record.episode_id,
            call_index=self.record.index,
            prompt_len=prompt.length,
            prompt_ref=prompt.ref,
            prompt_prefix_len=prompt.prefix_len,
            prompt_depth=prompt.depth,
            prompt_tail=prompt.tail,
        )
        return tuple(values[c] for c in CALL_COLUMNS)


def row_to_call(
    row: sqlite3.Row | tuple,
    prompt: np.ndarray,
    output: np.ndarray,
    request_body: bytes,
    images: list[CallImage] | None = None,
) -> CallRecord:
    """Build a CallRecord from a `calls` row whose prompt, output ids, request body and images have been read."""
    v = dict(zip(CALL_COLUMNS, row))
    return CallRecord(
        episode_id=v["episode_id"],
        index=v["call_index"],
        prompt_ids=prompt.tolist(),
        output_ids=output.tolist(),
        output_logprobs=bytes_to_logprobs(unpack(v["output_logprobs"])).tolist(),
        sampling=SamplingParams.model_validate_json(v["sampling"]),
        finish_reason=v["finish_reason"],
        policy_version=v["policy_version"],
        started_at=v["started_at"],
        finished_at=v["finished_at"],
        timings=json.loads(v["timings"]),
        dialect=v["dialect"],
        side_call=bool(v["side_call"]),
        segment=v["segment"],
        break_reason=v["break_reason"],
        call_error=v["call_error"],
        parse_error=v["parse_error"],
        request_body=request_body,
        response_body=unpack(v["response_body"]),
        metadata=json.loads(v["metadata"]),
        images=images or [],
    )


def decode_output(row_output_blob: bytes) -> np.ndarray:
    return bytes_to_ids(unpack(row_output_blob))
