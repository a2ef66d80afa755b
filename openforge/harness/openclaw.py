"""OpenClaw (npm `openclaw`, run with the bundle's Node 24) against the proxy's Chat Completions dialect.

Configured by `~/.openclaw/openclaw.json` in a fresh HOME per episode (docs/design.md, "OpenClaw"):

    {"models": {"providers": {"openforge": {"baseUrl": "<base_url>/v1", "apiKey": "<key>",
                                            "api": "openai-completions", "models": [{"id": "<model>", ...}]}}},
     "agents": {"defaults": {"model": {"primary": "openforge/<model>"},
                             "workspace": "<home>/.openclaw/workspace", "cwd": "<workdir>",
                             "skipBootstrap": true}},
     "update": {"checkOnStart": false}}

plus `OPENCLAW_NO_AUTO_UPDATE=1`. Headless:

    node openclaw.mjs agent --local --json --session-id <fresh id> --model openforge/<model> --message "<task>"

`agents.defaults.cwd` puts the agent's tools in the task's working directory while its own workspace
(AGENTS.md, memory, a `git init`) stays in HOME, so nothing of OpenClaw's lands in the task directory.

Measured with 2026.9.6 (Node 24.22.3) against a loopback stub in a network namespace with only loopback:

- one `POST /v1/chat/completions` per model call; nothing else, no DNS lookup (update checks are off).
- headers: `Authorization: Bearer <key>`, `user-agent: OpenAI/JS 7.15.0`, `x-stainless-retry-count`,
  `traceparent`, `accept-encoding: gzip, deflate`.
- body: `model`, `messages` (one `system` message, the task as a `user` message prefixed with a timestamp and
  followed by a `Runtime:` line, then a second `user` message holding `<<<BEGIN_OPENCLAW_INTERNAL_CONTEXT>>>`
  — the trailing context message of docs/design.md), `stream: true`, `stream_options: {"include_usage": true}`,
  `tools` (12: apply_patch, edit, exec, ls, openclaw, process, read, sessions_yield, tool_call,
  tool_describe, tool_search, write), `tool_choice: "auto"`, `max_completion_tokens` (= the model entry's
  `maxTokens`).
- **differs from the ~49 KB of docs/design.md**: the system prompt is ~21 KB, because `skipBootstrap` is set. With
  `bootstrap=True` OpenClaw seeds AGENTS.md, SOUL.md, IDENTITY.md, USER.md and BOOTSTRAP.md (a "you just woke
  up, choose your name and avatar" first-run ritual) into its workspace and injects them: ~40 KB of system
  prompt (more with a default workspace). A fresh HOME per episode makes every episode a first run, so the
  ritual would be in every prompt; it is off by default.
- start-up is slow and CPU-bound: ~9 s per run on a 2-core machine with a cold Node compile cache (OpenClaw
  keeps it in `$NODE_COMPILE_CACHE`, else `$TMPDIR/node-compile-cache`, and TMPDIR is per episode here), ~6 s
  with the cache `openforge harness install` prepares in the bundle (node_cache.py; every launch reads it,
  read-only), against ~1 s for Claude Code and Codex (benchmarks/results/openclaw-start.json). Give OpenClaw
  episodes a longer timeout.
- it writes lock files to `/tmp/openclaw-state-locks-<uid>/` whatever TMPDIR says (keyed by a hash of the
  state database path, so concurrent episodes with separate HOMEs do not collide).
- exit code 0 after a plain-text answer; stdout is one JSON document (`payloads`, `meta`); diagnostics go to
  stderr.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import PurePosixPath
from typing import Any, ClassVar
from urllib.parse import urlsplit

from openforge.core.json_types import JSONObject
from openforge.harness.base import (
    CommandHook,
    HarnessAdapter,
    HarnessError,
    Launch,
    LaunchContext,
    api_root,
    transcript_summary,
)
from openforge.harness.node_cache import compile_cache_env
from openforge.harness.tools import ToolKind

PROVIDER_ID = "openforge"
BROWSER_TOOL = "browser"
GUI_CHROMIUM = "/usr/bin/chromium"  # Debian's chromium, as the GUI image has it
# what each `browser` action does (analytics); an `act` by its request's kind: every kind not named here interacts
BROWSER_ACTIONS: dict[str, ToolKind] = {
    **dict.fromkeys(("snapshot", "screenshot", "text", "tabs", "console", "requests", "errors"), ToolKind.observe),
    **dict.fromkeys(("navigate", "open", "focus", "close"), ToolKind.navigate),
    **dict.fromkeys(("upload", "dialog", "download", "waitfordownload"), ToolKind.interact),
}
BROWSER_ACT_KINDS: dict[str, ToolKind] = {"scrollIntoView": ToolKind.navigate, "wait": ToolKind.other}


@dataclass
class OpenClawAdapter(HarnessAdapter):
    """Options: `context_window` and `max_tokens` (the model entry's `contextWindow` / `maxTokens`; OpenClaw
    sends `max_completion_tokens = max_tokens`), `bootstrap` (seed and inject OpenClaw's first-run workspace
    files), `timeout_s` (OpenClaw's own turn deadline), `extra_config` (deep-merged into openclaw.json),
    `extra_args`, `extra_env`."""

    name = "openclaw"
    dialect = "chat_completions"
    component = "openclaw"
    shell_tool = ("exec", "command")
    tool_kinds: ClassVar[dict[str, ToolKind]] = {
        "exec": ToolKind.shell,
        "process": ToolKind.shell,
        "read": ToolKind.read,
        "write": ToolKind.write,
        "edit": ToolKind.edit,
        "apply_patch": ToolKind.edit,
        "ls": ToolKind.search,
    }
    failed_exit_pattern = re.compile(r"\(Command exited with code (-?\d+)\)")
    min_memory_mb = 2048
    gui_format = "openclaw"  # Playwright's snapshot lines, `- button "Save" [ref=e12]` (inference/gui_oracle.py)
    # `exec` runs `$SHELL --noprofile --norc -c CMD` (`sh -c CMD` when SHELL is unset) and drops BASH_ENV and
    # ENV from the command's environment: SHELL names a wrapped bash instead. It runs lines of its own through
    # that shell first (its shell snapshot, captured and then checked); each command comes as the snapshot
    # sourced, a few exports, then `eval 'CMD'`.
    command_hook = CommandHook(
        env={"SHELL": "{shell}"},
        internal=(r"__OPENCLAW_SHELL_SNAPSHOT_CAPTURE__", r"^\. '[^']*/shell-snapshots/"),
        command=r"\neval '(?P<cmd>.*)'\Z",
    )

    context_window: int = 32768
    max_tokens: int = 4096
    bootstrap: bool = False
    timeout_s: int | None = None
    extra_config: JSONObject = field(default_factory=dict)
    extra_args: tuple[str, ...] = ()
    extra_env: dict[str, str] = field(default_factory=dict)
    chromium: str = GUI_CHROMIUM

    def tool_kind(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolKind:
        """`browser` does what its `action` (and an `act`'s request `kind`) says: looking at the page, acting on
        it, or moving around it."""
        if name != BROWSER_TOOL:
            return super().tool_kind(name, arguments)
        arguments = arguments or {}
        if arguments.get("action") == "act":
            request = arguments.get("request")
            kind = (request if isinstance(request, Mapping) else arguments).get("kind")
            return BROWSER_ACT_KINDS.get(str(kind), ToolKind.interact)
        return BROWSER_ACTIONS.get(str(arguments.get("action")), ToolKind.other)

    def config(
        self,
        home: PurePosixPath,
        workdir: PurePosixPath,
        base_url: str,
        key: str,
        model: str,
        start_url: str | None = None,
    ) -> JSONObject:
        cfg: JSONObject = {
            "models": {
                "providers": {
                    PROVIDER_ID: {
                        "baseUrl": api_root(base_url) + "/v1",
                        "apiKey": key,
                        "api": "openai-completions",
                        "models": [
                            {
                                "id": model,
                                "name": model,
                                "reasoning": False,
                                "input": ["text"],
                                "cost": {"input": 0, "output": 0, "cacheRead": 0, "cacheWrite": 0},
                                "contextWindow": int(self.context_window),
                                "maxTokens": int(self.max_tokens),
                            }
                        ],
                    }
                }
            },
            "agents": {
                "defaults": {
                    "model": {"primary": f"{PROVIDER_ID}/{model}"},
                    "workspace": f"{home}/.openclaw/workspace",
                    "cwd": str(workdir),
                    "skipBootstrap": not self.bootstrap,
                }
            },
            "update": {"checkOnStart": False},
        }
        if start_url is not None:
            cfg = _deep_merge(cfg, browser_only(start_url, self.chromium))
        return _deep_merge(cfg, self.extra_config)

    def launch(self, ctx: LaunchContext) -> Launch:
        if ctx.desktop_socket is not None:  # preflight says so first (`gui_kinds`); this is the last word
            raise HarnessError(
                "OpenClaw's GUI tool is a browser: it cannot drive a desktop task ([environment.gui] kind = "
                '"desktop"); run desktop tasks with the computer-use harness'
            )
        ctx = replace(ctx, manifest=self.manifest(ctx))  # read once: the argv and the compile cache both need it
        home_p, cwd, model = ctx.home, ctx.workdir, ctx.model
        sid = ctx.session_id or self._new_session_id()
        env = self._common_env(home_p)
        env["OPENCLAW_NO_AUTO_UPDATE"] = "1"
        env.update(compile_cache_env(ctx.bundle_root, self.manifest(ctx)))
        if ctx.start_url is not None:
            env["OPENCLAW_BROWSER_HEADLESS"] = "1"  # whatever DISPLAY says
        env.update(self.extra_env)
        argv = self.executable(ctx) + [
            "agent",
            "--local",
            "--json",
            "--session-id",
            sid,
            "--model",
            f"{PROVIDER_ID}/{model}",
        ]
        if self.timeout_s is not None:
            argv += ["--timeout", str(int(self.timeout_s))]
        argv += [*self.extra_args, f"--message={ctx.instruction}"]
        cfg = json.dumps(self.config(home_p, cwd, ctx.base_url, ctx.key, model, ctx.start_url), indent=2) + "\n"
        state = home_p / ".openclaw"
        return Launch(
            harness=self.name,
            argv=argv,
            env=env,
            files={state / "openclaw.json": cfg},
            cwd=cwd,
            home=home_p,
            dirs=(home_p, home_p / ".tmp", state),
            session_id=sid,
        )

    def parse_transcript(self, stdout: str) -> JSONObject:
        """`agent --local --json`: one JSON document `{"payloads": [{"text": ...}], "meta": {...}}` on success;
        failures use the CLI error envelope `{"ok": false, "error": {...}}`."""
        doc = _last_json_document(stdout)
        if doc is None:
            return transcript_summary(error="no JSON document on stdout (the harness did not finish)")
        meta = doc.get("meta") or {}
        agent = meta.get("agentMeta") or {}
        error = None
        if doc.get("ok") is False or doc.get("error"):
            err = doc.get("error")
            error = str(err.get("message") if isinstance(err, dict) else err or "error")
        elif meta.get("aborted"):
            error = "aborted"
        elif meta.get("stopReason") == "error" or (meta.get("completion") or {}).get("stopReason") == "error":
            error = str(meta.get("error") or "the model call failed")
        texts = [p.get("text") for p in doc.get("payloads") or [] if isinstance(p, dict) and p.get("text")]
        final = meta.get("finalAssistantVisibleText") or (texts[-1] if texts else None)
        tool_summary = meta.get("toolSummary") or agent.get("toolSummary") or {}
        turns = agent.get("assistantTurns")
        if turns is None:
            attempts = (meta.get("executionTrace") or {}).get("attempts") or []
            turns = max(1, len(attempts)) if final else 0
        return transcript_summary(
            final=final,
            turns=int(turns),
            tool_calls=int(tool_summary.get("calls") or 0),
            error=error,
            usage=agent.get("usage"),
            session_id=agent.get("sessionId"),
            events=1,
        )


def browser_only(start_url: str, chromium: str = GUI_CHROMIUM) -> JSONObject:
    """The openclaw.json settings of a GUI task's run: the `browser` tool and no other (no exec, no files, no
    web fetch: the GUI is the agent's only way in), driving `chromium` headless without its sandbox (the agent
    is an unprivileged user in a container without user namespaces), no JavaScript of the agent's own
    (`act:evaluate` would reach the app's HTTP API behind its GUI), and navigation to private addresses refused
    except the start URL's host (OpenClaw's SSRF policy is per host name, not per origin)."""
    host = urlsplit(start_url).hostname
    if not host:
        raise HarnessError(f"start_url must be an absolute http(s) URL, got {start_url!r}")
    return {
        "tools": {"allow": [BROWSER_TOOL], "toolSearch": False},
        "browser": {
            "enabled": True,
            "executablePath": chromium,
            "headless": True,
            "noSandbox": True,
            "evaluateEnabled": False,
            "ssrfPolicy": {"allowedHostnames": [host]},
        },
        # the browser on this machine only: never ask a gateway for browser nodes (there is none)
        "gateway": {"nodes": {"browser": {"mode": "off"}}},
    }


def _deep_merge(base: dict, extra: dict) -> dict:
    out = dict(base)
    for k, v in extra.items():
        out[k] = _deep_merge(out[k], v) if isinstance(v, dict) and isinstance(out.get(k), dict) else v
    return out


def _last_json_document(stdout: str) -> dict | None:
    text = stdout.strip()
    if not text:
        return None
    try:
        doc = json.loads(text)
        return doc if isinstance(doc, dict) else None
    except ValueError:
        pass
    # Tolerate stray lines before the document: parse from the last line that starts one.
    lines = text.splitlines()
    for i in range(len(lines) - 1, -1, -1):
        if lines[i].startswith("{"):
            try:
                doc = json.loads("\n".join(lines[i:]))
                return doc if isinstance(doc, dict) else None
            except ValueError:
                continue
    return None


__all__ = ["OpenClawAdapter"]
