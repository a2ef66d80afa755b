"""Codex CLI (npm `@openai/codex`, a native binary) against the proxy's OpenAI Responses dialect.

Configured by `$CODEX_HOME/config.toml` (CODEX_HOME = `<home>/.codex`, per episode) with a *new* provider id,
as docs/design.md's Codex facts say (`wire_api = "chat"` is a hard error in Codex; the built-in `openai`
provider would try to log in):

    model = "<model>"
    model_provider = "openforge"
    check_for_update_on_startup = false
    [model_providers.openforge]
    name = "OpenForge"; base_url = "<base_url>/v1"; env_key = "OPENFORGE_API_KEY"; wire_api = "responses"
    [analytics] enabled = false
    [feedback] enabled = false
    [features] plugins = false; apps = false

and the key in the environment variable `OPENFORGE_API_KEY` (sent as `Authorization: Bearer <key>`).
Headless: `codex exec --json --skip-git-repo-check --dangerously-bypass-approvals-and-sandbox -- "<task>"`
with **stdin = /dev/null** (with an open stdin Codex prints "Reading additional input from stdin..." and
waits for EOF); the caller provides that (see `Launch.stdin`).

Measured with 0.171.0 against a loopback stub in a network namespace with only loopback:

- **beyond docs/design.md**: with only the provider configured, Codex resolves `github.com`, `api.github.com`
  (plugin marketplace / skills sync), `chatgpt.com` (apps / connectors) and `ab.chatgpt.com` (analytics) at
  start. `[features] plugins = false, apps = false` and `[analytics] enabled = false` stop all of them (checked
  with strace: the only connect() is then to the proxy); they change neither the tools nor the prompt sent.
- one `POST /v1/responses` per model call, `stream: true`; nothing else (no `GET /models`).
- headers: `Authorization: Bearer <key>`, `session-id` / `thread-id` / `x-client-request-id` (the thread id),
  `x-codex-turn-metadata` (JSON), `x-codex-window-id`, `x-codex-beta-features`, `originator: codex_exec`,
  `accept: text/event-stream`, `accept-encoding: zstd,gzip` (answer uncompressed).
- body: `model`, `input` (two `developer` messages — the ~17.7 KB system prompt and a skills list — then a
  `user` `<environment_context>` message, then the task), `tools` (`exec_command`, `write_stdin`,
  `request_user_input`, `view_image`, a `namespace` tool `multi_agent_v1`, `get_goal`, `create_goal`,
  `update_goal`, and the built-in `{"type": "web_search"}`), `tool_choice: "auto"`, `parallel_tool_calls: true`,
  `reasoning: {"summary": "auto"}`, `store: false`, `include: ["reasoning.encrypted_content"]`,
  `prompt_cache_key` (the thread id), `client_metadata`. No `instructions` field: the system prompt is the
  first developer message.
- the transcript starts with an `{"type": "item.completed", "item": {"type": "error", "message": "Model
  metadata for `<model>` not found ..."}}` notice for any model name Codex does not know; it is harmless
  (reported under `warnings`, not as an error).
- with HOME under the system temp dir Codex warns "Refusing to create helper binaries under temporary dir";
  the per-episode `TMPDIR=<home>/.tmp` set here avoids that.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePosixPath
from typing import ClassVar

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
from openforge.harness.tools import ToolKind

KEY_ENV = "OPENFORGE_API_KEY"
PROVIDER_ID = "openforge"
INSTRUCTIONS_FILE = "instructions.md"  # under CODEX_HOME, with the `instructions` option


def toml_string(value: str) -> str:
    """A TOML basic string (valid for any str: control characters and DEL escaped)."""
    out = ['"']
    for ch in value:
        code = ord(ch)
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif code < 0x20 or code == 0x7F:
            out.append(f"\\u{code:04X}")
        elif 0xD800 <= code <= 0xDFFF:  # lone surrogate: not representable in TOML (or UTF-8)
            out.append("\\uFFFD")
        else:
            out.append(ch)
    out.append('"')
    return "".join(out)


@dataclass
class CodexAdapter(HarnessAdapter):
    """Options: `context_window` (-> `model_context_window`, lets Codex plan compaction for an unknown model),
    `request_max_retries` / `stream_max_retries` (the provider's retry budgets; Codex's defaults retry even a
    401, 5 times), `instructions` (replaces Codex's own ~17.7 KB system prompt: written to
    `$CODEX_HOME/instructions.md`, named by `model_instructions_file`), `extra_config` (extra top-level
    `key = value` TOML lines), `extra_args`, `extra_env`."""

    name = "codex"
    dialect = "responses"
    component = "codex"
    shell_tool = ("exec_command", "cmd")
    tool_kinds: ClassVar[dict[str, ToolKind]] = {
        "exec_command": ToolKind.shell,
        "write_stdin": ToolKind.shell,
        "shell": ToolKind.shell,
        "local_shell": ToolKind.shell,
        "apply_patch": ToolKind.edit,
        "view_image": ToolKind.read,
    }
    failed_exit_pattern = re.compile(r"^Process exited with code (-?\d+)", re.M)
    min_memory_mb = 512
    # `bash -lc` writes its shell snapshot, `bash -c 'set -e; . <snapshot>'` checks it; each command then runs
    # in a wrapper that restores the snapshot and execs `bash -c CMD`: only that last line is the agent's.
    command_hook = CommandHook(
        env={"BASH_ENV": "{hook}"},
        internal=(r"# Snapshot file", r"^set -e; \. \"[^\"]*shell_snapshots/", r"^__CODEX_SNAPSHOT_OVERRIDE"),
    )

    context_window: int | None = None
    request_max_retries: int | None = None
    stream_max_retries: int | None = None
    instructions: str | None = None
    extra_config: tuple[str, ...] = ()
    extra_args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)

    def config_toml(self, base_url: str, model: str, codex_home: PurePosixPath) -> str:
        top = [
            f"model = {toml_string(model)}",
            f"model_provider = {toml_string(PROVIDER_ID)}",
            "check_for_update_on_startup = false",
        ]
        if self.context_window:
            top.append(f"model_context_window = {int(self.context_window)}")
        if self.instructions is not None:
            top.append(f"model_instructions_file = {toml_string(str(codex_home / INSTRUCTIONS_FILE))}")
        top += list(self.extra_config)
        retries = [
            f"{k} = {int(v)}"
            for k, v in (
                ("request_max_retries", self.request_max_retries),
                ("stream_max_retries", self.stream_max_retries),
            )
            if v is not None
        ]
        return "\n".join(
            [
                "# Written by OpenForge for one episode.",
                *top,
                "",
                f"[model_providers.{PROVIDER_ID}]",
                'name = "OpenForge"',
                f"base_url = {toml_string(api_root(base_url) + '/v1')}",
                f"env_key = {toml_string(KEY_ENV)}",
                'wire_api = "responses"',
                *retries,
                "",
                "[analytics]",
                "enabled = false",
                "",
                "[feedback]",
                "enabled = false",
                "",
                "[features]",
                "plugins = false",
                "apps = false",
                "",
            ]
        )

    def launch(self, ctx: LaunchContext) -> Launch:
        home_p = ctx.home
        codex_home = home_p / ".codex"
        env = self._common_env(home_p)
        env.update({"CODEX_HOME": str(codex_home), KEY_ENV: ctx.key})
        env.update(self.extra_env)
        argv = self.executable(ctx) + [
            "exec",
            "--json",
            "--skip-git-repo-check",
            "--dangerously-bypass-approvals-and-sandbox",
            *self.extra_args,
            "--",
            ctx.instruction,
        ]
        files = {codex_home / "config.toml": self.config_toml(ctx.base_url, ctx.model, codex_home)}
        if self.instructions is not None:
            files[codex_home / INSTRUCTIONS_FILE] = self.instructions
        # Codex has no option to set its session (thread) id; it reports it in `thread.started`.
        return Launch(
            harness=self.name,
            argv=argv,
            env=env,
            files=files,
            cwd=ctx.workdir,
            home=home_p,
            dirs=(home_p, home_p / ".tmp", codex_home),
            session_id=None,
        )

    def parse_transcript(self, stdout: str) -> JSONObject:
        """`codex exec --json` events: thread.started, turn.started, item.started/updated/completed (items:
        agent_message, reasoning, command_execution, file_change, mcp_tool_call, web_search, todo_list, error),
        turn.completed (usage), turn.failed, error."""
        events = json_lines(stdout)
        final = None
        errors: list[str] = []
        warnings: list[str] = []
        turns = 0
        tool_calls = 0
        usage: dict | None = None
        session_id = None
        completed = False
        for ev in events:
            kind = ev.get("type")
            if kind == "thread.started":
                session_id = ev.get("thread_id")
            elif kind == "item.completed":
                item = ev.get("item") or {}
                itype = item.get("type")
                if itype == "agent_message":
                    final = item.get("text")
                    turns += 1
                elif itype in ("command_execution", "file_change", "mcp_tool_call", "web_search", "collab_tool_call"):
                    tool_calls += 1
                elif itype == "error":
                    warnings.append(str(item.get("message")))
            elif kind == "turn.completed":
                completed = True
                u = ev.get("usage")
                if isinstance(u, dict):
                    usage = {k: (usage or {}).get(k, 0) + v if isinstance(v, (int, float)) else v for k, v in u.items()}
            elif kind == "turn.failed":
                errors.append(str((ev.get("error") or {}).get("message") or "turn failed"))
            elif kind == "error":
                errors.append(str(ev.get("message") or "error"))
        # Codex does not report its model calls; each tool item and each agent message came from one model
        # response, so this counts them exactly unless the model made parallel tool calls (then an upper bound).
        turns += tool_calls
        error = errors[-1] if errors else (None if completed else "no turn.completed event (the run did not finish)")
        return transcript_summary(
            final=final,
            turns=turns,
            tool_calls=tool_calls,
            error=error,
            usage=usage,
            session_id=session_id,
            events=len(events),
            warnings=warnings,
        )


__all__ = ["CodexAdapter", "toml_string"]
