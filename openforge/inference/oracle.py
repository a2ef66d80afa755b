"""`oracle`: the teacher that knows the answer. It solves each episode's task by sending the task's reference
solution through the harness's own shell tool — after a look around and before a check of its result, when
the task has them (`solution/look.sh`, `solution/check.sh`: `TaskPayload.look`, `.check`) — and finishes with
a short answer. A GUI task's oracle instead sends its demonstration (`solution/actions.json`) step by step
through the harness's GUI tools (`openforge.inference.gui_oracle`): a shell cannot stand in for the GUI. It
validates tasks end to end and records teacher trajectories for SFT.

It needs the episode's task payload (`openforge.core.TaskPayload`, as the episode runners create episodes)
with its `solution` — `openforge.tasks.solution`'s script: `solve.sh` with the files of `solution/` beside it,
exactly what `openforge tasks validate --run` runs; it answers through the payload's `shell_tool` (tool name,
argument name), or without one the offered tool whose schema takes a `command` or `cmd` string.

Its reply is never cut at the `max_tokens` a harness asks for (react: the run's `max_new_tokens`; Claude Code:
32,000, clamped by the proxy): the reply is the task's fixed reference solution, not a sample, and a demonstration
cut short is worth nothing — it would only fail, silently, as an agent failure. Raising the cap instead would
not reach every harness (each asks for its own). Only the context window bounds it; a reply cut there is
recorded with finish_reason `length` and shows in the evaluation report.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from openforge.core import Conversation, TaskPayload
from openforge.inference.gui_oracle import FINAL_ANSWER, gui_reply
from openforge.inference.scripted import ScriptedBackend, ScriptError, _Policy

if TYPE_CHECKING:
    from openforge.models import ModelDir

SHELL_ARGUMENTS = ("command", "cmd")


class OraclePolicy(_Policy):
    def respond(self, conversation: Conversation | None, call_index: int, task: object) -> str:
        payload = TaskPayload.from_json(task)
        if payload is not None and payload.actions is not None:  # a GUI task: its steps through the GUI tools
            move = gui_reply(conversation, payload)
            return move if isinstance(move, str) else tool_call_text(move)
        if payload is None or payload.solution is None:
            raise ScriptError(
                "the oracle needs the episode's task payload with its reference solution "
                "(TaskPayload.solution): create episodes with the orchestrator, from a task "
                "whose solution/solve.sh `openforge tasks validate` accepts"
            )
        results = 0 if conversation is None else sum(m.role == "tool" for m in conversation.messages)
        commands = [c for c in (payload.look, payload.solution, payload.check) if c]
        if conversation is None or results >= len(commands):
            return FINAL_ANSWER
        command = commands[results]
        name, argument = shell_tool(conversation, payload)
        return tool_call_text({"name": name, "arguments": {argument: command}})

    def side(self, conversation: Conversation | None, task: object) -> str:
        return "Task"


def tool_call_text(call: dict[str, object]) -> str:
    """A tool call as the model writes it: the same text the chat template renders for this call, so
    continuity holds from scratch too."""
    return "<tool_call>\n" + json.dumps(call, ensure_ascii=False) + "\n</tool_call>"


def shell_tool(conversation: Conversation, task: TaskPayload) -> tuple[str, str]:
    offered = {t.name: t for t in conversation.tools}
    named = task.shell_tool
    if named and named[0] in offered:
        return named[0], named[1]
    for tool in conversation.tools:
        properties = (tool.parameters or {}).get("properties", {})
        for argument in SHELL_ARGUMENTS:
            if properties.get(argument, {}).get("type") == "string":
                return tool.name, argument
    raise ScriptError(f"no shell tool among the offered tools {sorted(offered)}")


class OracleBackend(ScriptedBackend):
    honours_max_tokens = False  # the module docstring says why

    def __init__(self, model_dir: str | Path | ModelDir):
        super().__init__(None, model_dir, policy=OraclePolicy())
