"""What every harness adapter is: how to point one harness at a proxy URL + episode key and start it headless.

An adapter is *pure*: `launch(ctx)` starts nothing. Given a `LaunchContext` (bundle, home and work directory,
proxy URL, episode key, model name, instruction: checked once, when the context is made), it returns a `Launch`
(argv, environment, files to write under the episode's home, working directory) expressed in the paths **the
harness process will see**, so the same
adapter serves a local process (paths are host paths) and a container (the bundle mounted read-only at, say,
`/opt/openforge/harnesses`, HOME a fresh per-episode directory, the proxy at `http://127.0.0.1:PORT` through
the sandbox's bridge).

How a caller runs a `Launch` (the sandbox does this; `run_local` below does it for a local process):

1. create `launch.dirs` and write `launch.files` (mode 0600: they may hold the episode key);
2. start `launch.argv` in `launch.cwd` with exactly `launch.env` on top of a *minimal* base environment
   (PATH, LANG, ... — never the host's full environment: a host `OPENAI_API_KEY` must not leak in);
3. **stdin must be /dev/null** (Codex reads extra input from an open stdin and would wait for EOF);
4. stdout is the harness's own JSON transcript: give it to `adapter.parse_transcript()`; stderr is diagnostics.

Adding a harness is one small file in this package: subclass `HarnessAdapter`, set `name` and `dialect`,
implement `launch()` and `parse_transcript()`, and add the class to the registry in `openforge.harness`
(`ADAPTERS`, made by `adapter_table`).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import uuid
from abc import ABC, abstractmethod
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any, ClassVar, TypeAlias

from openforge.core.errors import ConfigurationError
from openforge.core.json_types import JSONObject
from openforge.harness.tools import ToolKind, exit_code_failed

__all__ = [
    "DIALECTS",
    "CommandHook",
    "HarnessAdapter",
    "HarnessError",
    "Launch",
    "LaunchContext",
    "LocalResult",
    "Manifest",
    "UnknownHarnessError",
    "adapter_table",
    "api_root",
    "kill_leftovers",
    "run_local",
    "transcript_summary",
]

# The proxy dialect names (openforge.dialects.DIALECTS keys) a harness can speak.
DIALECTS = ("anthropic", "responses", "chat_completions")

# Largest instruction passed on the command line (Linux caps one argv string at 128 KiB).
MAX_INSTRUCTION_BYTES = 100_000


class HarnessError(ConfigurationError, RuntimeError):
    """A harness cannot be configured or launched; the message says why and what to do."""


class UnknownHarnessError(HarnessError, KeyError):
    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


#: A harness bundle's manifest (`manifest.json`, `openforge.harness.bundle.read_manifest`).
Manifest: TypeAlias = dict[str, object]


@dataclass(frozen=True)
class LaunchContext:
    """Where and against what one harness run starts. `bundle_root`, `home` and `workdir` are absolute paths
    as the harness process sees them. `base_url` is the proxy's root **without** `/v1` (e.g.
    `http://127.0.0.1:8080`, or `http://127.0.0.1:8080/e/<key>`); each adapter adds what its harness needs.
    `key` is the episode key, `model` the model name the harness puts in its requests, `instruction` the task,
    `session_id` the harness session id (None: a fresh one). The binary's location comes from the bundle
    manifest, read from `bundle_root` on this machine unless `manifest` is given (the manifest, or the bundle
    directory on this machine): give it when `bundle_root` is a mount point inside a container.

    Checked when made (HarnessError): the paths absolute, the key and the model name non-empty and without
    whitespace, the instruction non-empty, without NUL and small enough for one command line."""

    bundle_root: PurePosixPath
    home: PurePosixPath
    workdir: PurePosixPath
    base_url: str
    key: str
    model: str
    instruction: str
    session_id: str | None = None
    manifest: Manifest | Path | None = None
    #: where a GUI task's browser starts (`[environment.gui] start_url`); None: the task has no GUI
    start_url: str | None = None
    #: a desktop task's desktop server (`[environment.gui] socket`: a unix socket in the sandbox); None: no desktop
    desktop_socket: str | None = None

    def __post_init__(self) -> None:
        for label, path in (("bundle_root", self.bundle_root), ("home", self.home), ("workdir", self.workdir)):
            if not isinstance(path, PurePosixPath) or not path.is_absolute():
                raise HarnessError(f"{label} must be an absolute PurePosixPath as the harness sees it, got {path!r}")
        if not self.key or any(c.isspace() for c in self.key):
            raise HarnessError("the episode key must be a non-empty string without whitespace")
        if not self.model or any(c.isspace() for c in self.model):
            raise HarnessError(f"the model name must be non-empty and without whitespace, got {self.model!r}")
        if not self.instruction.strip():
            raise HarnessError("the instruction is empty")
        if "\0" in self.instruction:
            raise HarnessError("the instruction contains a NUL byte")
        api_root(self.base_url)  # refuses a URL that is not http(s)
        if self.start_url is not None and not self.start_url.startswith(("http://", "https://")):
            raise HarnessError(f"start_url must be an http(s) URL, got {self.start_url!r}")
        if self.desktop_socket is not None and not self.desktop_socket.startswith("/"):
            raise HarnessError(f"desktop_socket must be an absolute path, got {self.desktop_socket!r}")
        size = len(self.instruction.encode())
        if size > MAX_INSTRUCTION_BYTES:
            raise HarnessError(
                f"the instruction is {size} bytes; at most {MAX_INSTRUCTION_BYTES} fit on a command line"
            )


@dataclass(frozen=True)
class Launch:
    """Everything needed to start one harness run; paths are those seen by the harness process."""

    harness: str
    argv: list[str]
    env: dict[str, str]  # to set on top of a minimal base environment (see module docstring)
    files: dict[PurePosixPath, str]  # absolute path -> content; all under `home`
    cwd: PurePosixPath
    home: PurePosixPath
    dirs: tuple[PurePosixPath, ...] = ()  # directories to create (under `home`) before starting
    session_id: str | None = None  # the harness session id this launch uses, when it takes one
    stdin: str = "/dev/null"  # always /dev/null: documented here so no caller forgets it

    def write_files(self, host_home: Path | None = None) -> list[Path]:
        """Create `dirs` and write `files`. With `host_home`, paths under `self.home` are written under
        `host_home` instead (a container's home directory mounted from the host). Returns the written paths."""
        written: list[Path] = []
        for d in self.dirs:
            self._host_path(d, host_home).mkdir(parents=True, exist_ok=True)
        for path, content in self.files.items():
            target = self._host_path(path, host_home)
            target.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as f:
                f.write(content)
            written.append(target)
        return written

    def _host_path(self, path: PurePosixPath, host_home: Path | None) -> Path:
        if host_home is None:
            return Path(path)
        try:
            rel = PurePosixPath(path).relative_to(self.home)
        except ValueError:
            raise HarnessError(f"{path} is not under the launch's home {self.home}") from None
        return Path(host_home, *rel.parts)


@dataclass(frozen=True)
class CommandHook:
    """How to have a harness's shell source a file before each of the agent's commands (fault injection,
    `openforge.faults.hook`), measured per harness with the pinned binaries: environment variables to set
    (`{hook}`: the file to source; `{source}`: a file holding one line that sources it), regexes of command
    lines the harness runs for itself (never the agent's), and a regex whose group `cmd` is the agent's
    command inside the line the shell runs (None: the line is the command)."""

    env: dict[str, str]
    internal: tuple[str, ...] = ()
    command: str | None = None


@dataclass
class HarnessAdapter(ABC):
    """Base of all adapters. Subclasses are dataclasses whose fields are the adapter's options."""

    name: ClassVar[str] = ""
    dialect: ClassVar[str] = ""  # one of DIALECTS
    component: ClassVar[str | None] = None  # its entry in the bundle manifest (None: needs no bundle)
    shell_tool: ClassVar[tuple[str, str] | None] = None  # (tool name, argument holding the command)
    #: the option capping the tokens the harness asks for per reply, where the harness has one of its own: a
    #: run sets it to its `max_new_tokens` unless the run's harness options set it (a lower cap in the
    #: harness would cut replies the proxy allows)
    reply_cap_option: ClassVar[str | None] = None
    #: what each of the harness's tools does (analytics); a tool not named here counts as `ToolKind.other`
    tool_kinds: ClassVar[dict[str, ToolKind]] = {}
    #: finds the exit code of a shell command in a tool result (first group); None: the harness shows none
    failed_exit_pattern: ClassVar[re.Pattern[str] | None] = None
    #: memory the harness itself needs on top of nothing: a sandbox gets at least this much, whatever the task
    #: asks for (measured: OpenClaw's Node is OOM-killed at 512 MB)
    min_memory_mb: ClassVar[int] = 256
    #: how the environment's fault hook reaches the agent's shell commands (None: it cannot)
    command_hook: ClassVar[CommandHook | None] = None
    #: the format of the page snapshots its GUI tools show (the oracle finds a demonstration's elements in them:
    #: `openforge.inference.gui_oracle`); None: the harness drives no GUI
    gui_format: ClassVar[str | None] = None
    #: it drives a web page and nothing else (no shell): it cannot run a task without [environment.gui]
    gui_only: ClassVar[bool] = False
    #: the kinds of GUI task (`[environment.gui] kind`) its GUI tools can do: a browser's "web"; "desktop" too
    #: where it talks to a desktop task's desktop server (`LaunchContext.desktop_socket`)
    gui_kinds: ClassVar[tuple[str, ...]] = ("web",)

    @abstractmethod
    def launch(self, ctx: LaunchContext) -> Launch:
        """How to run this harness once, in `ctx` (see `LaunchContext`)."""

    @abstractmethod
    def parse_transcript(self, stdout: str) -> JSONObject:
        """Summarise the harness's own JSON output (see `transcript_summary` for the keys)."""

    def shell_call(self, command: str) -> JSONObject:
        """The tool call that makes this harness run `command` with its own shell tool, as a model would
        emit it: `{"name": ..., "arguments": {...}}` (for scripted and oracle policies)."""
        if self.shell_tool is None:
            raise HarnessError(f"harness {self.name!r} has no shell tool")
        tool, arg = self.shell_tool
        return {"name": tool, "arguments": {arg: command}}

    def offers_shell(self) -> bool:
        """Whether the harness, as configured, offers the agent its shell tool."""
        return self.shell_tool is not None

    def tool_kind(self, name: str, arguments: Mapping[str, Any] | None = None) -> ToolKind:
        """What a call of tool `name` with `arguments` does (a harness whose one tool does many things, as
        OpenClaw's `browser`, tells them apart by its arguments)."""
        return self.tool_kinds.get(name, ToolKind.other)

    def tool_failed(self, content: str, is_error: bool = False) -> bool:
        """Whether a tool result reports a failure: the harness's error flag, or a non-zero exit code."""
        return is_error or exit_code_failed(self.failed_exit_pattern, content)

    def infrastructure_error(self, exit_code: int, stdout: str, stderr: str) -> str | None:
        """Why a non-zero exit after the model had answered was the infrastructure's fault, where the
        harness's own exit code or output says so (its model API failed in a way the agent did not cause);
        None: the exit is the agent's doing (its command killed the harness, its output made it fail, ...).
        Harnesses that say nothing of the kind keep this default."""
        return None

    # -- bundle ------------------------------------------------------------------------------------------
    def executable(self, ctx: LaunchContext) -> list[str]:
        """The argv prefix that runs this harness from the bundle (absolute, under `ctx.bundle_root` as the
        process sees it), found in `ctx.manifest` (the manifest, or the bundle directory on this machine to
        read it from; default `ctx.bundle_root` itself)."""
        from openforge.harness.bundle import harness_argv

        return harness_argv(self.component or self.name, ctx.bundle_root, self.manifest(ctx))

    @staticmethod
    def manifest(ctx: LaunchContext) -> Manifest:
        """The bundle's manifest: `ctx.manifest`, read from there when it is a directory, else from
        `ctx.bundle_root` on this machine."""
        from openforge.harness.bundle import read_manifest

        if isinstance(ctx.manifest, Path) or ctx.manifest is None:
            return read_manifest(ctx.manifest or Path(str(ctx.bundle_root)))
        return ctx.manifest

    def version(self, bundle_root: PurePosixPath | Path | str | None = None) -> str:
        """The installed version, as recorded (after running `--version`) in the bundle's manifest."""
        from openforge.harness.bundle import installed_version

        return installed_version(self.component or self.name, bundle_root)

    # -- helpers for subclasses --------------------------------------------------------------------------
    @staticmethod
    def _new_session_id() -> str:
        return str(uuid.uuid4())

    @staticmethod
    def _common_env(home: PurePosixPath) -> dict[str, str]:
        """HOME, and a per-episode TMPDIR (harnesses keep lock and cache files there: episodes must not share)."""
        return {"HOME": str(home), "TMPDIR": str(home / ".tmp")}


def adapter_table(*adapters: type[HarnessAdapter]) -> dict[str, type[HarnessAdapter]]:
    """The harness registry: each adapter by its name, checked (a name, a known dialect, no name twice)."""
    table: dict[str, type[HarnessAdapter]] = {}
    for adapter in adapters:
        if not adapter.name:
            raise HarnessError(f"adapter {adapter.__qualname__} has no name")
        if adapter.dialect not in DIALECTS:
            raise HarnessError(
                f"adapter {adapter.name!r} speaks unknown dialect {adapter.dialect!r}; known: {', '.join(DIALECTS)}"
            )
        if adapter.name in table:
            raise HarnessError(
                f"two adapters are named {adapter.name!r}: {table[adapter.name].__qualname__} and "
                f"{adapter.__qualname__}"
            )
        table[adapter.name] = adapter
    return table


def api_root(base_url: str) -> str:
    """`base_url` without a trailing `/` or `/v1` (the contract is "without /v1"; tolerate it anyway)."""
    url = base_url.strip().rstrip("/")
    if not url.startswith(("http://", "https://")):
        raise HarnessError(f"base_url must be an http(s) URL, got {base_url!r}")
    if url.endswith("/v1"):
        url = url[: -len("/v1")]
    return url


def transcript_summary(
    final: str | None = None,
    turns: int = 0,
    tool_calls: int = 0,
    error: str | None = None,
    usage: JSONObject | None = None,
    session_id: str | None = None,
    events: int = 0,
    warnings: list[str] | None = None,
) -> JSONObject:
    """The common shape of `parse_transcript()`:

    - `final`: the last assistant text (None if none);
    - `turns`: model responses the harness reports (assistant turns);
    - `tool_calls`: tool calls the harness executed;
    - `error`: the harness's own error message, or None when it reported success;
    - `ok`: `error is None and final is not None`;
    - `usage`: token usage as the harness reports it; `session_id`; `events`: JSON records parsed;
    - `warnings`: non-fatal notices the harness printed in its transcript.
    """
    return {
        "final": final,
        "turns": turns,
        "tool_calls": tool_calls,
        "error": error,
        "ok": error is None and final is not None,
        "usage": usage,
        "session_id": session_id,
        "events": events,
        "warnings": list(warnings or ()),
    }


def json_lines(stdout: str) -> list[dict[str, Any]]:
    """The JSON objects of a JSON-lines transcript; other lines are ignored."""
    out = []
    for line in stdout.splitlines():
        line = line.strip()
        if not line.startswith("{"):
            continue
        try:
            obj = json.loads(line)
        except ValueError:
            continue
        if isinstance(obj, dict):
            out.append(obj)
    return out


# -- running a Launch as a local process (tests, `python -m openforge.harness.smoke`, the local sandbox) ----

BASE_ENV_KEYS = ("PATH", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "USER", "LOGNAME", "SHELL")


@dataclass
class LocalResult:
    returncode: int
    stdout: str
    stderr: str
    seconds: float
    timed_out: bool = False
    transcript: JSONObject = field(default_factory=dict)


def run_local(
    launch: Launch,
    adapter: HarnessAdapter | None = None,
    timeout: float = 300.0,
    extra_env: dict[str, str] | None = None,
) -> LocalResult:
    """Run a Launch as a local child process: writes its files, stdin from /dev/null, a minimal base
    environment (PATH, LANG, ... from this process) plus `launch.env`. When it exits or times out, what it left
    running is killed (`kill_leftovers`)."""
    import signal
    import time

    launch.write_files()
    env = {k: os.environ[k] for k in BASE_ENV_KEYS if k in os.environ}
    env.setdefault("PATH", "/usr/local/bin:/usr/bin:/bin")
    env.update(launch.env)
    env.update(extra_env or {})
    start = time.monotonic()
    proc = subprocess.Popen(
        launch.argv,
        cwd=str(launch.cwd),
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    timed_out = False
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
    # whatever the harness left behind dies with it, as a sandbox's processes die with the sandbox
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    kill_leftovers(launch.home)
    if timed_out:
        out, err = proc.communicate()
    result = LocalResult(proc.returncode, out, err, time.monotonic() - start, timed_out)
    if adapter is not None:
        result.transcript = adapter.parse_transcript(out)
    return result


def kill_leftovers(home: PurePosixPath | Path) -> list[int]:
    """Kill (SIGKILL) the processes of this user whose environment holds `HOME=<home>`: a local run's fresh
    HOME marks everything it started, wherever it went — OpenClaw's CLI re-runs itself in a new session, and its
    browser (with Chromium's crash handler) stays running there after the CLI exits. Returns their pids; none
    where there is no /proc."""
    import signal

    if os.path.realpath(home) == os.path.realpath(os.environ.get("HOME") or "/"):
        return []  # a run in this process's own HOME marks nothing of its own
    marker = f"HOME={home}".encode()
    killed = []
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            environ = (entry / "environ").read_bytes()
        except OSError:  # gone, or another user's
            continue
        if marker in environ.split(b"\0"):
            if int(entry.name) == os.getpid():
                continue
            try:
                os.kill(int(entry.name), signal.SIGKILL)
                killed.append(int(entry.name))
            except (ProcessLookupError, PermissionError):
                pass
    return killed
