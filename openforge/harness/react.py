"""`react`: OpenForge's built-in minimal ReAct harness (chat completions; bash / read / write / submit).

Nothing to install: the agent (`react_agent.py`, standard library only) is written into the episode's home
and run with the sandbox's python3. Its short system prompt suits a tiny model; the quickstart trains through
it. Version: OpenForge's own.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path, PurePosixPath
from typing import ClassVar

from openforge import __version__
from openforge.core.json_types import JSONObject
from openforge.harness.base import (
    CommandHook,
    HarnessAdapter,
    Launch,
    LaunchContext,
    api_root,
    json_lines,
    transcript_summary,
)
from openforge.harness.react_agent import AGENT_REFUSED_STATUSES, API_ERROR_EXIT, DEFAULT_MAX_STEPS
from openforge.harness.tools import ToolKind

_API_ANSWER = re.compile(r"model API answered (\d{3})")


@dataclass
class ReactAdapter(HarnessAdapter):
    """Options: `max_steps` (model calls per episode), `max_tokens` (per call; a run sets it to its
    `max_new_tokens` unless given here), `tools` (a subset of bash,
    read, write, submit to offer; all by default — a tiny model learns faster with a shorter prompt),
    `system_prompt` (replaces the default; "" sends no system message), `command_timeout_s` (how long one bash
    command may run; default 60 s in a sandbox, 20 s in the in-process episodes), `python` (interpreter inside
    the sandbox), `extra_env`."""

    name = "react"
    dialect = "chat_completions"
    component = None  # built in: needs no bundle
    shell_tool = ("bash", "command")
    reply_cap_option = "max_tokens"
    tool_kinds: ClassVar[dict[str, ToolKind]] = {"bash": ToolKind.shell, "read": ToolKind.read, "write": ToolKind.write}
    # `[exit code N]` after a failed command; `[error: ...]` from read/write
    failed_exit_pattern = re.compile(r"\[exit code (-?\d+)\]\s*$")
    command_hook = CommandHook(env={"BASH_ENV": "{hook}"})  # its bash tool runs `bash -c CMD`

    def offers_shell(self) -> bool:
        return not self.tools or "bash" in self.tools

    def tool_failed(self, content: str, is_error: bool = False) -> bool:
        return super().tool_failed(content, is_error) or content.startswith("[error:")

    def infrastructure_error(self, exit_code: int, stdout: str, stderr: str) -> str | None:
        return model_api_failure(exit_code, stderr)

    max_steps: int = DEFAULT_MAX_STEPS
    max_tokens: int = 512
    tools: tuple[str, ...] = ()
    system_prompt: str | None = None
    command_timeout_s: float | None = None
    python: str = "python3"
    extra_env: dict[str, str] = field(default_factory=dict)

    def launch(self, ctx: LaunchContext) -> Launch:
        home_p = ctx.home
        agent = home_p / "react_agent.py"
        instruction_file = home_p / "instruction.md"
        env = {**self._common_env(home_p), "OPENFORGE_API_KEY": ctx.key, **self.extra_env}
        argv = [
            self.python,
            str(agent),
            "--base-url",
            api_root(ctx.base_url),
            "--model",
            ctx.model,
            "--instruction-file",
            str(instruction_file),
            "--max-steps",
            str(self.max_steps),
            "--max-tokens",
            str(self.max_tokens),
        ]
        if self.tools:
            argv += ["--tools", ",".join(self.tools)]
        if self.system_prompt is not None:
            argv += ["--system-prompt", self.system_prompt]
        if self.command_timeout_s is not None:
            argv += ["--command-timeout", f"{self.command_timeout_s:g}"]
        files = {agent: agent_source(), instruction_file: ctx.instruction}
        return Launch(
            harness=self.name,
            argv=argv,
            env=env,
            files=files,
            cwd=ctx.workdir,
            home=home_p,
            dirs=(home_p, home_p / ".tmp"),
        )

    def version(self, bundle_root: PurePosixPath | Path | str | None = None) -> str:
        return __version__

    def parse_transcript(self, stdout: str) -> JSONObject:
        return result_summary(stdout)


def result_summary(stdout: str) -> JSONObject:
    """The transcript summary of a built-in agent (react's, computer-use's): its `result` line."""
    events = json_lines(stdout)
    result = next((e for e in reversed(events) if e.get("type") == "result"), None)
    if result is None:
        return transcript_summary(error="no result line (the agent did not finish)", events=len(events))
    return transcript_summary(
        final=result.get("final"),
        turns=int(result.get("turns") or 0),
        tool_calls=int(result.get("tool_calls") or 0),
        error=result.get("error"),
        events=len(events),
    )


def model_api_failure(exit_code: int, stderr: str) -> str | None:
    """Exit 3 is the built-in agents' "the model API failed": the infrastructure's, unless the API refused the
    request the agent's conversation had grown into (400: context exhausted, 413: too large)."""
    if exit_code != API_ERROR_EXIT:
        return None
    found = _API_ANSWER.search(stderr)
    if found and int(found.group(1)) in AGENT_REFUSED_STATUSES:
        return None
    return f"the model API failed: {stderr.strip()[-500:]}"


def agent_source(name: str = "react_agent.py") -> str:
    """The source of a built-in agent script of this package (written into the episode's home)."""
    return resources.files("openforge.harness").joinpath(name).read_text()
