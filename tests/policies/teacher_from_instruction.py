"""Scripted teacher for the upstream-teacher tests. Served by `openforge serve-model --backend scripted:FILE`
(so it sees only the conversation, as a model behind an API does) it answers like the oracle: a short thought,
one call of the offered shell tool with the solution of the task the instruction names, then "Done.".

The solutions are a JSON object (instruction text → shell command) in the file $OPENFORGE_TEST_TEACHER_SOLUTIONS;
an instruction it does not know gets a plain refusal, and that episode fails.
"""

import json
import os
from pathlib import Path

SOLUTIONS_ENV = "OPENFORGE_TEST_TEACHER_SOLUTIONS"


def _shell_tool(conversation):
    for tool in conversation.tools:
        properties = (tool.parameters or {}).get("properties", {})
        for argument in ("command", "cmd"):
            if argument in properties:
                return tool.name, argument
    return None


def respond(conversation, call_index):
    if any(m.role == "tool" for m in conversation.messages):
        return "Done."
    instruction = next((m.content for m in conversation.messages if m.role == "user"), "")
    solutions = json.loads(Path(os.environ[SOLUTIONS_ENV]).read_text())
    command = next((cmd for text, cmd in solutions.items() if text.strip() in instruction), None)
    tool = _shell_tool(conversation)
    if command is None or tool is None:
        return "I cannot do this task."
    call = {"name": tool[0], "arguments": {tool[1]: command}}
    return "<think>\nOne command does it.\n</think>\n<tool_call>\n" + json.dumps(call) + "\n</tool_call>"


def respond_side(conversation):
    return "Teacher title"
