"""Scripted policy for the fault tests: the task's reference solution through the harness's own shell tool;
after a failed command, the fix the error message calls for, then the solution again; after a command that
worked, a final answer. It reads tool results only as the harness sent them back (the recorded calls)."""

import json
import re

from openforge.core import TaskPayload
from openforge.harness import ADAPTERS

FAILED = re.compile(
    r"exit code [1-9]|exited with code [1-9]|Exit code [1-9]|timed out|hung|running in background"
    r"|Process running with session ID|Command still running",
    re.I,
)


def _shell_tool(conversation):
    offered = {t.name for t in conversation.tools}
    for adapter in ADAPTERS.values():
        if adapter.shell_tool and adapter.shell_tool[0] in offered:
            return adapter.shell_tool
    raise RuntimeError(f"no known shell tool among {sorted(offered)}")


def _call(conversation, command):
    name, arg = _shell_tool(conversation)
    return (
        "<tool_call>\n" + json.dumps({"name": name, "arguments": {arg: command}}, ensure_ascii=False) + "\n</tool_call>"
    )


def _fix(result):
    if "No such file or directory" in result:
        m = re.search(r"([\w./-]+)/[\w.-]+: No such file or directory", result)
        return f"mkdir -p {m.group(1)} && " if m else ""
    if "Permission denied" in result:
        m = re.search(r"([\w./-]+): Permission denied", result)
        return f"chmod u+w {m.group(1)} && " if m else ""
    if "No space left on device" in result:
        return "rm -rf .cache && "
    return ""  # transient, a refused connection, a hang: try again


def respond(conversation, call_index, task):
    solution = TaskPayload.from_json(task).solution
    results = [m.content for m in conversation.messages if m.role == "tool"]
    if not results:
        return _call(conversation, solution)
    if len(results) < 4 and FAILED.search(results[-1]):
        return _call(conversation, _fix(results[-1]) + solution)
    return "Done."


def respond_side(conversation):
    return "Task"
