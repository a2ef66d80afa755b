"""Scripted policy for assembly tests and `benchmarks/assembly.py`: N model calls per episode.

The episode's task names N (`"calls-20"`, or a dict task with `"calls": 20`): the first N-1 calls each run
`echo step-<i>` with the harness's own shell tool (Claude Code's Bash, Codex's exec_command, OpenClaw's exec,
...), the N-th answers in plain text. Default N = 3. Side calls get a short title.
"""

import json
import re

from openforge.harness import ADAPTERS

DEFAULT_CALLS = 3


def _calls_wanted(task) -> int:
    if isinstance(task, dict):
        return int(task.get("calls", DEFAULT_CALLS))
    found = re.search(r"calls-(\d+)", str(task or ""))
    return int(found.group(1)) if found else DEFAULT_CALLS


def _shell_tool(conversation):
    offered = {t.name for t in conversation.tools}
    for adapter in ADAPTERS.values():
        if adapter.shell_tool and adapter.shell_tool[0] in offered:
            return adapter.shell_tool
    if conversation.tools:  # a test's own tool list: its first tool, argument "command"
        return conversation.tools[0].name, "command"
    raise RuntimeError("no tools offered")


def respond(conversation, call_index, task=None):
    done = sum(1 for m in conversation.messages if m.role == "tool")
    if done < _calls_wanted(task) - 1:
        name, arg = _shell_tool(conversation)
        call = {"name": name, "arguments": {arg: f"echo step-{done}"}}
        return "<tool_call>\n" + json.dumps(call) + "\n</tool_call>"
    return f"All {done} steps ran."


def respond_side(conversation):
    return "Shell loop"
