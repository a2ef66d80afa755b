"""`openforge export RUN_DIR --format atif --out DIR`: one ATIF `trajectory.json` per episode.

ATIF is Harbor's Agent Trajectory Interchange Format; this writes its version `ATIF_VERSION`. An episode becomes
one trajectory, its calls read back as the conversation the harness sent (`conversation.read_turns`, as the
viewer shows them):

- the system prompt and the messages a call adds to its segment become `system` / `user` steps; messages a
  harness re-sent after a continuity break (a compaction summary, a sub-agent's history) too, assistant ones
  marked `is_copied_context`;
- each model call becomes one `agent` step: the sampled reply (text, reasoning, tool calls with the ids the
  harness saw), and `metrics` with the exact `prompt_token_ids`, `completion_token_ids` and rollout `logprobs`;
  OpenForge's own facts about the call (index, segment, break reason, policy version, finish reason, timings,
  sampling, parse and call errors) go in the step's `extra.openforge`;
- tool results become the `observation` of the agent step whose tool call they answer (`source_call_id`);
- reward, outcome, the verifier's output and the continuity breaks go in the trajectory's `extra.openforge`
  (ATIF has no reward field), with totals in `final_metrics`.

Layout: `DIR/<store>/<episode id>/trajectory.json` (`<store>` left out for a run directory holding its store
itself) and `DIR/index.jsonl`, one line per episode.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import openforge
from openforge.core import CallRecord, Episode, Message, ParsedOutput, ToolCall
from openforge.store import TrajectoryStore, is_final
from openforge.view.conversation import Turn, read_turns, reply_of
from openforge.view.discover import discover
from openforge.view.library import find_model_dir
from openforge.view.tokentext import TokenText

ATIF_VERSION = "ATIF-v1.8"
INDEX_FILE = "index.jsonl"


def _iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return dt.datetime.fromtimestamp(timestamp, tz=dt.UTC).isoformat()


def _drop_none(value: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in value.items() if v is not None}


class _Builder:
    """Steps in order, with the tool calls they made (to attach results to)."""

    def __init__(self) -> None:
        self.steps: list[dict[str, Any]] = []
        self.calls_by_id: dict[str, dict[str, Any]] = {}

    def add(self, step: dict[str, Any]) -> dict[str, Any]:
        step = {"step_id": len(self.steps) + 1, **_drop_none(step)}
        self.steps.append(step)
        for tc in step.get("tool_calls", []):
            self.calls_by_id[tc["tool_call_id"]] = step
        return step

    def observe(self, message: Message, context: dict[str, Any]) -> None:
        facts = _drop_none({"is_error": message.is_error or None, "name": message.name})
        owner = self.calls_by_id.get(message.tool_call_id or "")
        if owner is not None:
            result = _drop_none(
                {
                    "source_call_id": message.tool_call_id,
                    "content": message.content,
                    "extra": {"openforge": facts} if facts else None,
                }
            )
            owner.setdefault("observation", {"results": []})["results"].append(result)
            return
        # a result for a call this trajectory does not hold (e.g. made before a compaction): kept, unattached
        result = {"content": message.content, "extra": {"openforge": {**facts, "tool_call_id": message.tool_call_id}}}
        self.add(
            {"source": "system", "message": "", "observation": {"results": [result]}, "extra": {"openforge": context}}
        )

    def message(self, message: Message, context: dict[str, Any], copied: bool) -> None:
        if message.role == "tool":
            self.observe(message, context)
        elif message.role == "assistant":
            self.add(
                {
                    "source": "agent",
                    "message": message.content,
                    "reasoning_content": message.reasoning,
                    "tool_calls": _tool_calls(message.tool_calls) or None,
                    "is_copied_context": True if copied else None,
                    "extra": {"openforge": context},
                }
            )
        else:
            self.add(
                {
                    "source": "system" if message.role == "system" else "user",
                    "message": message.content,
                    "is_copied_context": True if copied else None,
                    "extra": {"openforge": context},
                }
            )


def _tool_calls(calls: list[ToolCall]) -> list[dict[str, Any]]:
    return [{"tool_call_id": tc.id, "function_name": tc.name, "arguments": tc.arguments} for tc in calls]


def _call_facts(call: CallRecord) -> dict[str, Any]:
    return _drop_none(
        {
            "call_index": call.index,
            "segment": call.segment,
            "break_reason": call.break_reason,
            "side_call": call.side_call or None,
            "policy_version": call.policy_version,
            "finish_reason": call.finish_reason.value,
            "dialect": call.dialect,
            "timings": call.timings or None,
            "sampling": call.sampling.model_dump(mode="json"),
            "parse_error": call.parse_error,
            "call_error": call.call_error,
            "started_at": _iso(call.started_at),
            "finished_at": _iso(call.finished_at),
        }
    )


def _agent_step(turn: Turn, reply: ParsedOutput | None) -> dict[str, Any]:
    call = turn.call
    facts = _call_facts(call)
    if reply is None and call.output_ids:
        facts["reply_unavailable"] = "no tokenizer for this run and no echo of the reply: see completion_token_ids"
    metrics = _drop_none(
        {
            "prompt_tokens": len(call.prompt_ids),
            "completion_tokens": len(call.output_ids),
            "prompt_token_ids": call.prompt_ids,
            "completion_token_ids": call.output_ids,
            "logprobs": call.output_logprobs or None,
        }
    )
    return {
        "source": "agent",
        "timestamp": _iso(call.started_at),
        "message": reply.content if reply else "",
        "reasoning_content": reply.reasoning if reply and reply.reasoning else None,
        "tool_calls": _tool_calls(reply.tool_calls) if reply and reply.tool_calls else None,
        "metrics": metrics,
        "llm_call_count": 1,
        "extra": {"openforge": facts},
    }


def trajectory(
    episode: Episode,
    calls: list[CallRecord],
    verifier: dict[str, Any] | None,
    tokens: TokenText | None = None,
    store_label: str = ".",
) -> dict[str, Any]:
    """One episode as an ATIF trajectory (a JSON-ready dict)."""
    turns = read_turns(calls, tokens)
    build = _Builder()
    for turn in turns:
        call = turn.call
        context = {"call_index": call.index, "segment": call.segment}
        if turn.opens_segment and turn.system:
            build.add(
                {
                    "source": "system",
                    "timestamp": _iso(call.started_at),
                    "message": turn.system,
                    "extra": {"openforge": context},
                }
            )
        copied = turn.opens_segment and call.index > 0 and not call.side_call
        for message in turn.new_messages:
            build.message(message, context, copied and message.role == "assistant")
        build.add(_agent_step(turn, reply_of(turn)))
    if not build.steps:
        build.add({"source": "system", "message": "no model call was recorded for this episode"})
    first = next((t.request for t in turns if t.request is not None and not t.call.side_call), None)
    meta = episode.metadata
    breaks = [
        {"call_index": c.index, "segment": c.segment, "reason": c.break_reason}
        for c in sorted(calls, key=lambda c: c.index)
        if c.break_reason
    ]
    task = meta.get("task")  # the task as the runner posted it (a mapping), if it did
    return _drop_none(
        {
            "schema_version": ATIF_VERSION,
            "session_id": episode.id,
            "trajectory_id": episode.id,
            "agent": _drop_none(
                {
                    "name": episode.harness or "unknown",
                    "version": str(meta.get("harness_version") or "unknown"),
                    "model_name": tokens.name if tokens is not None else None,
                    "tool_definitions": [
                        {
                            "type": "function",
                            "function": {"name": t.name, "description": t.description, "parameters": t.parameters},
                        }
                        for t in first.tools
                    ]
                    if first and first.tools
                    else None,
                    "extra": {"openforge_version": openforge.__version__},
                }
            ),
            "steps": build.steps,
            "notes": "Exported by OpenForge: every agent step is one model call recorded token-exactly by its proxy.",
            "final_metrics": {
                "total_prompt_tokens": sum(len(c.prompt_ids) for c in calls),
                "total_completion_tokens": sum(len(c.output_ids) for c in calls),
                "total_steps": len(build.steps),
                "extra": _drop_none(
                    {
                        "reward": episode.reward,
                        "outcome": episode.outcome.value if episode.outcome else None,
                        "calls": len(calls),
                        "segments": len({c.segment for c in calls}) or None,
                    }
                ),
            },
            "extra": {
                "openforge": _drop_none(
                    {
                        "episode_id": episode.id,
                        "store": store_label,
                        "task": episode.task,
                        "harness": episode.harness,
                        "sample": episode.sample,
                        "attempt": episode.attempt,
                        "step": meta.get("step"),
                        "final": is_final(episode),
                        "state": episode.state.value,
                        "reward": episode.reward,
                        "outcome": episode.outcome.value if episode.outcome else None,
                        "outcome_reason": episode.outcome_reason,
                        "instruction": task.get("instruction") if isinstance(task, dict) else None,
                        "created_at": _iso(episode.created_at),
                        "ended_at": _iso(episode.ended_at),
                        "verifier": verifier,
                        "continuity_breaks": breaks,
                        "policy_versions": sorted({c.policy_version for c in calls}),
                    }
                )
            },
        }
    )


@dataclass
class AtifExport:
    episodes: int
    stores: list[str]
    out: Path


def _write(path: Path, data: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        tmp.write_text(json.dumps(data, ensure_ascii=False, indent=1), encoding="utf-8")
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def export_atif(
    run_dir: str | os.PathLike[str], out_dir: str | os.PathLike[str], model: Path | None = None
) -> AtifExport:
    """Every episode of every store under `run_dir` as `out_dir/[store/]<episode id>/trajectory.json`."""
    run = discover(run_dir)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    count = 0
    index_lines = []
    for ref in run.stores:
        with TrajectoryStore.open(ref.path, readonly=True) as store:
            model_dir = model or find_model_dir(ref.path, run.path, store.get_run_info())
            tokens = TokenText.load(model_dir) if model_dir else None
            base = out if ref.label == "." else out / ref.label
            for episode in store.list_episodes():
                data = trajectory(
                    episode, store.list_calls(episode.id), store.get_verifier_result(episode.id), tokens, ref.label
                )
                path = base / episode.id / "trajectory.json"
                _write(path, data)
                count += 1
                index_lines.append(
                    json.dumps(
                        {
                            "episode_id": episode.id,
                            "store": ref.label,
                            "task": episode.task,
                            "harness": episode.harness,
                            "sample": episode.sample,
                            "attempt": episode.attempt,
                            "reward": episode.reward,
                            "outcome": episode.outcome.value if episode.outcome else None,
                            "final": is_final(episode),
                            "path": path.relative_to(out).as_posix(),
                        },
                        ensure_ascii=False,
                    )
                )
    (out / INDEX_FILE).write_text("".join(line + "\n" for line in index_lines), encoding="utf-8")
    return AtifExport(count, [s.label for s in run.stores], out)
