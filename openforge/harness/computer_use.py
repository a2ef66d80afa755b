"""`computer-use`: OpenForge's built-in GUI harness (chat completions; a headless Chromium driven over the
DevTools protocol, or a desktop task's desktop through its desktop server; snapshot / click / type / select /
key / scroll / navigate / done, no shell).

Nothing to install beyond the task image's Chromium (`/usr/bin/chromium` in `openforge-gui:bookworm`): the
agent (`computer_use_agent.py`, standard library only, reusing react's model loop from `react_agent.py`) is
written into the episode's home and run with the sandbox's python3. It opens the task's
`[environment.gui] start_url` (the launch's `start_url`) and loads documents of that origin only. The
observation after each action is the page's accessibility tree as text (`observation="snapshot"`, the
default: text-only models) or a screenshot (`observation="screenshot"`: a vision model; the image reaches the
model as a Chat Completions `image_url` part). On a desktop task (`[environment.gui] kind = "desktop"`, the
launch's `desktop_socket`) there is no browser: the agent sends each observation and action to the task's
desktop server over its unix socket, whose snapshot is the desktop's accessibility tree in the same lines
(and no navigate). Version: OpenForge's own.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import ClassVar

from openforge import __version__
from openforge.core.json_types import JSONObject
from openforge.harness.base import HarnessAdapter, HarnessError, Launch, LaunchContext, api_root, json_lines
from openforge.harness.computer_use_agent import (
    BROWSER_ERROR_EXIT,
    DEFAULT_MAX_STEPS,
    DEFAULT_SNAPSHOT_CHARS,
    OBSERVATIONS,
    tool_specs,
)
from openforge.harness.react import agent_source, model_api_failure, result_summary
from openforge.harness.tools import ToolKind


@dataclass
class ComputerUseAdapter(HarnessAdapter):
    """Options: `observation` ("snapshot" or "screenshot"), `snapshot_chars` (the budget of one page snapshot, in
    characters: keep a dozen of them inside the model's context), `max_steps` (model calls per episode),
    `max_tokens` (per call; a run sets it to its `max_new_tokens` unless given here), `system_prompt` (replaces
    the default; "" sends none), `tools` (a subset of the mode's tools, e.g. click, type, select, done: fewer
    schemas in every prompt for a small model; default all), `chromium` (the browser inside the sandbox; default
    `/usr/bin/chromium`, else chromium on PATH), `python` (interpreter inside the sandbox), `extra_env`."""

    name = "computer-use"
    dialect = "chat_completions"
    component = None  # built in: needs no bundle
    shell_tool = None  # GUI tools only
    reply_cap_option = "max_tokens"
    tool_kinds: ClassVar[dict[str, ToolKind]] = {
        "snapshot": ToolKind.observe,
        "screenshot": ToolKind.observe,
        "click": ToolKind.interact,
        "type": ToolKind.interact,
        "select": ToolKind.interact,
        "key": ToolKind.interact,
        "navigate": ToolKind.navigate,
        "scroll": ToolKind.navigate,
    }
    min_memory_mb = 1024  # headless Chromium with a small page: ~300 MB, with room for a heavier one
    gui_format = "computer-use"
    gui_only = True
    gui_kinds = ("web", "desktop")

    observation: str = "snapshot"
    snapshot_chars: int = DEFAULT_SNAPSHOT_CHARS
    max_steps: int = DEFAULT_MAX_STEPS
    max_tokens: int = 512
    system_prompt: str | None = None
    tools: tuple[str, ...] = ()
    chromium: str | None = None
    python: str = "python3"
    extra_env: dict[str, str] = field(default_factory=dict)

    def __post_init__(self) -> None:
        if self.observation not in OBSERVATIONS:
            raise HarnessError(
                f"computer-use option observation={self.observation!r}: use one of {', '.join(OBSERVATIONS)}"
            )
        known = [t["function"]["name"] for t in tool_specs(self.observation)]
        unknown = [t for t in self.tools if t not in known]
        if unknown:
            raise HarnessError(
                f"computer-use option tools={list(self.tools)}: {', '.join(unknown)} not offered in the "
                f"{self.observation} mode; use some of {', '.join(known)}"
            )
        if self.snapshot_chars < 500:
            raise HarnessError(f"computer-use option snapshot_chars={self.snapshot_chars}: give at least 500")

    def offers_shell(self) -> bool:
        return False

    def tool_failed(self, content: str, is_error: bool = False) -> bool:
        return is_error or content.startswith("[error:")

    def infrastructure_error(self, exit_code: int, stdout: str, stderr: str) -> str | None:
        """Exit 4: the browser failed (would not start, the start page did not load, it crashed) or the desktop
        server did not answer; exit 3: the model API failed (as react's)."""
        if exit_code == BROWSER_ERROR_EXIT:
            return f"the browser failed: {stderr.strip()[-500:]}"
        return model_api_failure(exit_code, stderr)

    def launch(self, ctx: LaunchContext) -> Launch:
        if ctx.start_url is None and ctx.desktop_socket is None:
            raise HarnessError(
                "computer-use drives a web page or a desktop: the task needs `[environment.gui] start_url` "
                '(kind = "web") or kind = "desktop" in its task.toml'
            )
        home = ctx.home
        agent, helper, instruction_file = (
            home / "computer_use_agent.py",
            home / "react_agent.py",
            home / "instruction.md",
        )
        argv = [
            self.python,
            str(agent),
            "--base-url",
            api_root(ctx.base_url),
            "--model",
            ctx.model,
            "--instruction-file",
            str(instruction_file),
            *(["--desktop", ctx.desktop_socket] if ctx.desktop_socket else ["--start-url", str(ctx.start_url)]),
            "--observation",
            self.observation,
            "--snapshot-chars",
            str(self.snapshot_chars),
            "--max-steps",
            str(self.max_steps),
            "--max-tokens",
            str(self.max_tokens),
        ]
        if self.chromium is not None:
            argv += ["--chromium", self.chromium]
        if self.system_prompt is not None:
            argv += ["--system-prompt", self.system_prompt]
        if self.tools:
            argv += ["--tools", ",".join(self.tools)]
        return Launch(
            harness=self.name,
            argv=argv,
            env={**self._common_env(home), "OPENFORGE_API_KEY": ctx.key, **self.extra_env},
            files={
                agent: agent_source("computer_use_agent.py"),
                helper: agent_source("react_agent.py"),
                instruction_file: ctx.instruction,
            },
            cwd=ctx.workdir,
            home=home,
            dirs=(home, home / ".tmp"),
        )

    def version(self, bundle_root: PurePosixPath | Path | str | None = None) -> str:
        return __version__

    def parse_transcript(self, stdout: str) -> JSONObject:
        summary = result_summary(stdout)  # react's result line
        browser = next((e for e in json_lines(stdout) if e.get("type") == "browser"), None)
        if browser is not None:  # how long the browser took to start and load the start page
            summary["browser_start_s"] = browser.get("start_s")
        return summary
