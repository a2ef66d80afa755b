"""What a harness's tools do, for behaviour analytics: a small taxonomy and how each harness reports a failed
tool. Every adapter declares its own (`HarnessAdapter.tool_kinds`, `HarnessAdapter.failed_exit_pattern`);
the analytics read recorded conversations through them and never hard-code a harness.

How a failed command reaches the model, per harness (each seen in real episodes of the pinned binaries):
- Claude Code: the tool result has `is_error` set and starts with `Exit code N`;
- Codex: the `exec_command` output holds a line `Process exited with code N`;
- OpenClaw: the `exec` output ends with `(Command exited with code N)`;
- react: the `bash` output ends with `[exit code N]`; its read/write tools answer `[error: ...]`;
- computer-use: a GUI action it could not do answers `[error: ...]` (then the page as it is).

GUI tools have kinds of their own: `observe` (a snapshot or a screenshot: looking, which counts as a check),
`interact` (click, type, select, a key: what changes the page's state, as writing a file does) and `navigate`
(opening a URL, scrolling: moving around without changing anything).
"""

from __future__ import annotations

import enum
import re


class ToolKind(str, enum.Enum):
    """What a tool call does to the environment, coarsely (the OpenForgeRL paper's tool-mix categories)."""

    shell = "shell"  # runs a command line
    read = "read"  # reads a file
    write = "write"  # creates or overwrites a file
    edit = "edit"  # changes part of a file (patch, replace)
    search = "search"  # finds files or text (grep, glob, ls)
    observe = "observe"  # looks at a GUI (a page snapshot, a screenshot)
    interact = "interact"  # acts on a GUI (click, type, select, a key)
    navigate = "navigate"  # moves around a GUI (open a URL, scroll)
    other = "other"  # planning, sub-agents, asking the user, finishing, ...

    @property
    def changes_state(self) -> bool:
        return self in (ToolKind.write, ToolKind.edit, ToolKind.interact)

    @property
    def checks(self) -> bool:
        """Whether the step looks at the state (a read, a search, a look at the screen)."""
        return self in (ToolKind.read, ToolKind.search, ToolKind.observe)


def exit_code_failed(pattern: re.Pattern[str] | None, content: str) -> bool:
    """Whether `pattern` finds a non-zero exit code (its first group) in a tool result."""
    if pattern is None:
        return False
    return any(int(m.group(1)) != 0 for m in pattern.finditer(content))


__all__ = ["ToolKind", "exit_code_failed"]
