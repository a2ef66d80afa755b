"""An episode's tool steps, rebuilt from its recorded model calls alone.

Each non-side call's request body is decoded with its dialect into the canonical conversation the harness
sent: it holds every earlier tool call of the policy and the result the harness sent back for it. The tool
calls of a call's own reply are read from the call's record (`metadata["tool_calls"]`, written by the proxy),
so the last reply's calls count too (their results never reach the model: the episode ended). Steps are
ordered by first appearance and keyed by tool-call id, so a harness that rewrites or compacts its history
(OpenClaw) loses none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from openforge.analysis.shell import CommandPart, classify_command
from openforge.core import CallRecord, Conversation
from openforge.dialects import DIALECTS, DialectError
from openforge.harness.base import HarnessAdapter
from openforge.harness.tools import ToolKind


@dataclass
class ToolStep:
    """One tool call the policy made, and what the harness answered (None: never sent back)."""

    id: str
    name: str
    kind: ToolKind
    arguments: dict[str, Any]
    result: str | None = None
    failed: bool = False
    command: str | None = None  # the command line, for shell tools
    parts: list[CommandPart] = field(default_factory=list)

    @property
    def writes(self) -> bool:
        return self.kind.changes_state or any(p.writes for p in self.parts)

    @property
    def checks(self) -> bool:
        return self.kind.checks or any(p.checks for p in self.parts)


@dataclass
class EpisodeTrace:
    steps: list[ToolStep]
    calls: int  # non-side model calls
    sampled_tokens: int
    parse_errors: int  # calls whose reply held tool-call markup that could not be parsed
    last_call_parse_error: bool
    length_capped: int  # calls cut off by their token limit
    breaks: int  # calls that opened a new continuity segment
    undecodable: int  # calls whose request body could not be decoded (left out of the steps)
    seconds: float


def _decode(call: CallRecord) -> Conversation | None:
    dialect = DIALECTS.get(call.dialect)
    if dialect is None or not call.request_body:
        return None
    try:
        return dialect.decode(call.request_body).conversation
    except (DialectError, ValueError):
        return None


def trace_calls(calls: list[CallRecord], adapter: HarnessAdapter) -> EpisodeTrace:
    """The tool steps of one episode's calls, classified with the harness's own taxonomy."""
    main = sorted((c for c in calls if not c.side_call), key=lambda c: c.index)
    steps: dict[str, ToolStep] = {}
    undecodable = 0

    def add_call(tool_id: str, name: str, arguments: dict[str, Any]) -> None:
        if tool_id in steps:
            return
        kind = adapter.tool_kind(name, arguments)
        step = ToolStep(tool_id, name, kind, dict(arguments))
        if kind is ToolKind.shell and adapter.shell_tool is not None:
            command = arguments.get(adapter.shell_tool[1])
            if isinstance(command, str):
                step.command = command
                step.parts = classify_command(command)
        steps[tool_id] = step

    for call in main:
        conversation = _decode(call)
        if conversation is None:
            undecodable += 1
        else:
            for message in conversation.messages:
                for tc in message.tool_calls:
                    add_call(tc.id, tc.name, tc.arguments)
                if message.role == "tool" and message.tool_call_id in steps:
                    step = steps[message.tool_call_id]
                    if step.result is None:
                        step.result = message.content
                        step.failed = adapter.tool_failed(message.content, message.is_error)
    # the last reply's tool calls reach no later request; earlier replies' are read from the requests that
    # carry them back (some harnesses re-id tool calls: OpenClaw's ids differ from the ones the proxy sent)
    if main:
        for tc in main[-1].metadata.get("tool_calls") or []:
            add_call(str(tc.get("id")), str(tc.get("name")), tc.get("arguments") or {})

    started = min((c.started_at for c in main), default=0.0)
    finished = max((c.finished_at or c.started_at for c in main), default=0.0)
    return EpisodeTrace(
        steps=list(steps.values()),
        calls=len(main),
        sampled_tokens=sum(len(c.output_ids) for c in main),
        parse_errors=sum(1 for c in main if c.parse_error),
        last_call_parse_error=bool(main and main[-1].parse_error),
        length_capped=sum(1 for c in main if c.finish_reason.value == "length"),
        breaks=sum(1 for c in main if c.break_reason),
        undecodable=undecodable,
        seconds=max(0.0, finished - started),
    )


__all__ = ["EpisodeTrace", "ToolStep", "trace_calls"]
