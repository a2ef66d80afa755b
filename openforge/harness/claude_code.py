"""Claude Code (npm `@anthropic-ai/claude-code`, a native binary) against the proxy's Anthropic Messages dialect.

Configured by environment only (docs/design.md, "Claude Code"): `ANTHROPIC_BASE_URL` (no `/v1`), the episode key as
`ANTHROPIC_AUTH_TOKEN` (sent as `Authorization: Bearer`) or, with `auth="x-api-key"`, `ANTHROPIC_API_KEY`
(sent as `x-api-key`), the model under every alias Claude Code resolves (`ANTHROPIC_MODEL`,
`ANTHROPIC_DEFAULT_{OPUS,SONNET,HAIKU}_MODEL`, `ANTHROPIC_SMALL_FAST_MODEL`, `CLAUDE_CODE_SUBAGENT_MODEL`),
`CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1`, `CLAUDE_CODE_ATTRIBUTION_HEADER=0` and `IS_SANDBOX=1` (the
permission bypass refuses to run as root without it). Headless:

    claude -p --output-format stream-json --verbose --dangerously-skip-permissions
           --tools Bash,Read,Edit,Write --session-id <uuid> -- "<instruction>"

Measured with 2.1.197 against a loopback stub (`openforge.harness.stub_api`), in a network namespace with
only loopback, HOME a fresh directory:

- requests: `HEAD /` then `POST /v1/messages?beta=true` (streaming); nothing else, no DNS lookup at all
  (NONESSENTIAL_TRAFFIC already implies no auto-update, telemetry or error reporting; `DISABLE_AUTOUPDATER`,
  `DISABLE_TELEMETRY` and `DISABLE_ERROR_REPORTING` are set as well so that stays true if the implication
  changes). No onboarding: `-p` never prompts, and it writes `~/.claude.json` itself.
- headers: `Authorization: Bearer <key>` (or `x-api-key`), `anthropic-version: 2023-06-01`, an
  `anthropic-beta` list, `x-claude-code-session-id: <the --session-id>`, `x-stainless-retry-count`,
  `user-agent: claude-cli/2.1.197 (external, sdk-cli)`.
- body: `model`, `messages`, `system` (list of text blocks with `cache_control`), `tools`, `metadata.user_id`
  (a JSON string with a per-HOME device id and the session id), `max_tokens: 32000`,
  `thinking: {"type": "adaptive"}`, `context_management`, `output_config: {"effort": "high"}`, `stream: true`.
- with `--tools Bash,Read,Edit,Write` the request carries exactly those 4 tools and a ~5.4 KB system prompt
  (docs/design.md's 24 tools / ~64 KB is the default tool set, `tools=None` here);
- the system prompt names the working directory and a per-HOME auto-memory directory
  (`~/.claude/projects/<cwd>/memory/`), so keep HOME and the workdir at fixed paths across episodes (as a
  container does) if prompts should be identical; `CLAUDE_CODE_DISABLE_AUTO_MEMORY=1` (via `extra_env`) drops
  that section.
- a plain-text reply ends the run with exit code 0 and a final `{"type": "result", "subtype": "success"}` line.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import ClassVar

from openforge.core.json_types import JSONObject
from openforge.harness.base import (
    CommandHook,
    HarnessAdapter,
    HarnessError,
    Launch,
    LaunchContext,
    api_root,
    json_lines,
    transcript_summary,
)
from openforge.harness.tools import ToolKind

DEFAULT_TOOLS = ("Bash", "Read", "Edit", "Write")


@dataclass
class ClaudeCodeAdapter(HarnessAdapter):
    """Options: `tools` (None = Claude Code's full default tool set), `auth` ("bearer" or "x-api-key"),
    `max_retries` (-> `CLAUDE_CODE_MAX_RETRIES`; Claude Code's default is 10 with exponential backoff, and it
    retries even a 401), `extra_args` (appended before the instruction), `extra_env`."""

    name = "claude-code"
    dialect = "anthropic"
    component = "claude-code"
    shell_tool = ("Bash", "command")
    # Claude Code's own tool names (its default set; `--tools` offers a subset)
    tool_kinds: ClassVar[dict[str, ToolKind]] = {
        "Bash": ToolKind.shell,
        "BashOutput": ToolKind.shell,
        "KillShell": ToolKind.shell,
        "Read": ToolKind.read,
        "NotebookRead": ToolKind.read,
        "Write": ToolKind.write,
        "Edit": ToolKind.edit,
        "MultiEdit": ToolKind.edit,
        "NotebookEdit": ToolKind.edit,
        "Grep": ToolKind.search,
        "Glob": ToolKind.search,
        "LS": ToolKind.search,
    }
    failed_exit_pattern = re.compile(r"^Exit code (-?\d+)", re.M)
    min_memory_mb = 1024
    # Each Bash call runs `bash -c "source <snapshot> ... && eval 'CMD' < /dev/null && pwd -P >| <file>"`; it
    # does not source BASH_ENV for these, but inlines the file CLAUDE_ENV_FILE names into that line.
    command_hook = CommandHook(
        env={"CLAUDE_ENV_FILE": "{source}"}, command=r"&& eval '(?P<cmd>.*)' < /dev/null && pwd -P >\|"
    )

    def offers_shell(self) -> bool:
        return self.tools is None or "Bash" in self.tools

    tools: tuple[str, ...] | None = DEFAULT_TOOLS
    auth: str = "bearer"
    max_retries: int | None = None
    extra_args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)

    def launch(self, ctx: LaunchContext) -> Launch:
        home_p, model = ctx.home, ctx.model
        if self.auth not in ("bearer", "x-api-key"):
            raise HarnessError(f"auth must be 'bearer' or 'x-api-key', got {self.auth!r}")
        sid = ctx.session_id or self._new_session_id()
        env = self._common_env(home_p)
        env.update(
            {
                "ANTHROPIC_BASE_URL": api_root(ctx.base_url),
                ("ANTHROPIC_AUTH_TOKEN" if self.auth == "bearer" else "ANTHROPIC_API_KEY"): ctx.key,
                "ANTHROPIC_MODEL": model,
                "ANTHROPIC_DEFAULT_OPUS_MODEL": model,
                "ANTHROPIC_DEFAULT_SONNET_MODEL": model,
                "ANTHROPIC_DEFAULT_HAIKU_MODEL": model,
                "ANTHROPIC_SMALL_FAST_MODEL": model,
                "CLAUDE_CODE_SUBAGENT_MODEL": model,
                "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
                "CLAUDE_CODE_ATTRIBUTION_HEADER": "0",
                "IS_SANDBOX": "1",
                "DISABLE_AUTOUPDATER": "1",
                "DISABLE_TELEMETRY": "1",
                "DISABLE_ERROR_REPORTING": "1",
            }
        )
        if self.max_retries is not None:
            env["CLAUDE_CODE_MAX_RETRIES"] = str(int(self.max_retries))
        env.update(self.extra_env)
        argv = self.executable(ctx) + [
            "-p",
            "--output-format",
            "stream-json",
            "--verbose",
            "--dangerously-skip-permissions",
        ]
        if self.tools is not None:
            argv += ["--tools", ",".join(self.tools)]
        argv += ["--session-id", sid, *self.extra_args, "--", ctx.instruction]
        return Launch(
            harness=self.name,
            argv=argv,
            env=env,
            files={},
            cwd=ctx.workdir,
            home=home_p,
            dirs=(home_p, home_p / ".tmp"),
            session_id=sid,
        )

    def parse_transcript(self, stdout: str) -> JSONObject:
        """stream-json: one JSON object per line; the last `{"type": "result"}` line has the outcome."""
        events = json_lines(stdout)
        final = None
        error = None
        turns = 0
        tool_calls = 0
        usage = None
        session_id = None
        result = None
        retry = None
        for ev in events:
            kind = ev.get("type")
            session_id = ev.get("session_id", session_id)
            if kind == "system" and ev.get("subtype") == "api_retry":
                retry = ev
            elif kind == "assistant":
                turns += 1
                for block in (ev.get("message") or {}).get("content") or []:
                    if block.get("type") == "tool_use":
                        tool_calls += 1
                    elif block.get("type") == "text" and block.get("text"):
                        final = block["text"]
            elif kind == "result":
                result = ev
        if result is not None:
            turns = result.get("num_turns", turns)
            usage = result.get("usage")
            if result.get("is_error") or result.get("subtype") != "success":
                error = str(result.get("result") or result.get("errors") or result.get("subtype") or "error")
            elif isinstance(result.get("result"), str):
                final = result["result"]
        elif retry is not None:
            error = (
                f"no result line: the harness was still retrying the API (attempt {retry.get('attempt')}, "
                f"HTTP {retry.get('error_status')}: {retry.get('error')})"
            )
        else:
            error = "no result line in the transcript (the harness did not finish)"
        return transcript_summary(
            final=final,
            turns=turns,
            tool_calls=tool_calls,
            error=error,
            usage=usage,
            session_id=session_id,
            events=len(events),
        )


__all__ = ["ClaudeCodeAdapter", "DEFAULT_TOOLS"]
