"""Helpers for benchmarks/proxy.py: child processes, CPU accounting, SSE parsing, LiteLLM's virtualenv, and a
profiled proxy entry point.

Run as a script, this module is that entry point:

    python benchmarks/_proxy_support.py profile-proxy OUT.prof -- proxy --model DIR --backend ... --run RUN ...

It runs `openforge <args>` in this process with two cProfile profilers that start switched off: SIGUSR1 turns
them on; SIGUSR2 turns them off and writes their merged statistics to OUT.prof.<n> (n = 1, 2, ...), then starts
over. One profiler covers the main thread (event loop: HTTP, dialects, rendering, parsing); the other covers
the store's writer thread while it commits calls (cProfile sees one thread per profiler). Both are timed with
the thread's CPU clock (time.thread_time), so waiting is not counted. A profile holds exactly the calls made
between the two signals, not the start-up or an episode's first call.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]

# ---- child processes ------------------------------------------------------------------------------------


class Children:
    """Every process the benchmark starts, each in its own session so that stopping it stops what it
    spawned too (uvicorn workers, LiteLLM's helpers). `stop_all` is idempotent and runs on any exit."""

    def __init__(self, log_dir: Path):
        self.log_dir = log_dir
        self.procs: list[tuple[str, subprocess.Popen]] = []

    def start(
        self,
        name: str,
        argv: list[str],
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
        cpus: set[int] | None = None,
    ):
        """Start `argv` (output to LOG_DIR/name.log); `cpus`: the CPUs it may run on."""
        log = open(self.log_dir / f"{name}.log", "ab")
        proc = subprocess.Popen(
            argv,
            stdin=subprocess.DEVNULL,
            stdout=log,
            stderr=subprocess.STDOUT,
            env=env,
            cwd=str(cwd) if cwd else None,
            start_new_session=True,
            preexec_fn=(lambda: os.sched_setaffinity(0, cpus)) if cpus else None,
        )
        log.close()
        self.procs.append((name, proc))
        return proc

    def log_tail(self, name: str, lines: int = 30) -> str:
        path = self.log_dir / f"{name}.log"
        if not path.exists():
            return ""
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])

    @staticmethod
    def _signal_group(proc: subprocess.Popen, sig: int) -> None:
        try:
            os.killpg(proc.pid, sig)  # the group this child leads (start_new_session): it and what it spawned
        except (ProcessLookupError, PermissionError):
            pass

    def stop(self, proc: subprocess.Popen, first: int = signal.SIGTERM, timeout: float = 15.0) -> int | None:
        """Stop one child (SIGTERM, or `first`), then SIGKILL its group after `timeout` seconds."""
        if proc.poll() is None:
            self._signal_group(proc, first)
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self._signal_group(proc, signal.SIGKILL)
                proc.wait(5)
        else:
            self._signal_group(proc, signal.SIGKILL)  # stragglers of an exited leader
        return proc.returncode

    def stop_all(self) -> None:
        while self.procs:
            _, proc = self.procs.pop()
            try:
                self.stop(proc, timeout=10.0)
            except Exception:  # keep stopping the others
                pass


def wait_for(predicate, timeout: float, what: str, proc: subprocess.Popen | None = None, log=""):
    """Poll `predicate()` until it returns something truthy; fail if `proc` exits or time runs out.
    `log`: text (or a function giving it) to show on failure."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            raise RuntimeError(f"{what}: the process exited with {proc.returncode}\n{log() if callable(log) else log}")
        time.sleep(0.1)
    raise RuntimeError(f"{what}: not ready after {timeout:.0f}s\n{log() if callable(log) else log}")


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_env(extra: dict[str, str] | None = None) -> dict[str, str]:
    """The environment for children: no HTTP proxy settings (all traffic stays on 127.0.0.1)."""
    env = {k: v for k, v in os.environ.items() if k.lower() not in ("http_proxy", "https_proxy", "all_proxy")}
    env["NO_PROXY"] = env["no_proxy"] = "*"
    env.update(extra or {})
    return env


# ---- CPU accounting -------------------------------------------------------------------------------------


def _schedstat_ns(path: Path) -> int:
    try:
        return int(path.read_text().split()[0])
    except (OSError, ValueError, IndexError):
        return 0


def process_cpu_s(pid: int) -> float:
    """CPU time (user + system) of all live threads of `pid`, in seconds, at nanosecond resolution
    (/proc/PID/task/*/schedstat; utime/stime in /proc/PID/stat tick only every 10 ms)."""
    total = 0
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return 0.0
    for task in tasks:
        total += _schedstat_ns(task / "schedstat")
    return total / 1e9


def thread_cpu_s(pid: int) -> dict[int, float]:
    """CPU seconds per live thread id of `pid`."""
    out = {}
    try:
        tasks = list(Path(f"/proc/{pid}/task").iterdir())
    except OSError:
        return out
    for task in tasks:
        out[int(task.name)] = _schedstat_ns(task / "schedstat") / 1e9
    return out


def tree_pids(pid: int) -> list[int]:
    """`pid` and all its descendants."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
        except (OSError, ValueError, IndexError):
            continue
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def tree_cpu_s(pid: int) -> float:
    return sum(process_cpu_s(p) for p in tree_pids(pid))


# ---- server-sent events ---------------------------------------------------------------------------------


def sse_data(raw: bytes) -> list[dict]:
    """The JSON `data:` payloads of an SSE body (`[DONE]` and comments dropped)."""
    out = []
    for line in raw.decode("utf-8", errors="replace").splitlines():
        if line.startswith("data:"):
            payload = line[5:].strip()
            if payload and payload != "[DONE]":
                out.append(json.loads(payload))
    return out


def anthropic_message(raw: bytes) -> dict:
    """An Anthropic Messages SSE stream accumulated into the message: content blocks exactly as sent,
    `stop_reason`, `output_tokens`. Raises on an `error` event."""
    blocks: list[dict] = []
    partial_json: dict[int, str] = {}
    message: dict = {"content": blocks, "stop_reason": None, "output_tokens": None, "input_tokens": None}
    for event in sse_data(raw):
        kind = event.get("type")
        if kind == "error":
            raise RuntimeError(f"stream error: {event.get('error')}")
        if kind == "message_start":
            usage = event["message"].get("usage") or {}
            message["input_tokens"] = usage.get("input_tokens")
        elif kind == "content_block_start":
            block = dict(event["content_block"])
            if block.get("type") == "tool_use":
                block["input"] = {}
                partial_json[event["index"]] = ""
            while len(blocks) <= event["index"]:
                blocks.append({})
            blocks[event["index"]] = block
        elif kind == "content_block_delta":
            block, delta = blocks[event["index"]], event["delta"]
            dtype = delta.get("type")
            if dtype == "text_delta":
                block["text"] = block.get("text", "") + delta["text"]
            elif dtype == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta["thinking"]
            elif dtype == "signature_delta":
                block["signature"] = block.get("signature", "") + delta["signature"]
            elif dtype == "input_json_delta":
                partial_json[event["index"]] += delta["partial_json"]
        elif kind == "content_block_stop":
            if event["index"] in partial_json:
                text = partial_json.pop(event["index"])
                blocks[event["index"]]["input"] = json.loads(text) if text else {}
        elif kind == "message_delta":
            message["stop_reason"] = (event.get("delta") or {}).get("stop_reason")
            usage = event.get("usage") or {}
            message["output_tokens"] = usage.get("output_tokens")
            if usage.get("input_tokens"):
                message["input_tokens"] = usage["input_tokens"]
    for block in blocks:  # as an SDK sends a block back: keys that are null are left out
        for key in [k for k, v in block.items() if v is None]:
            del block[key]
    return message


def chat_message(raw: bytes) -> dict:
    """An OpenAI chat-completions SSE stream accumulated: text, finish reason, completion tokens."""
    text, finish, tokens = [], None, None
    for event in sse_data(raw):
        if "error" in event:
            raise RuntimeError(f"stream error: {event['error']}")
        for choice in event.get("choices") or []:
            delta = choice.get("delta") or {}
            if delta.get("content"):
                text.append(delta["content"])
            finish = choice.get("finish_reason") or finish
        if event.get("usage"):
            tokens = event["usage"].get("completion_tokens")
    return {"text": "".join(text), "finish_reason": finish, "output_tokens": tokens}


# ---- LiteLLM's own virtualenv -----------------------------------------------------------------------------


def ensure_litellm(venv: Path, version: str, console) -> Path:
    """`venv`/bin/litellm, creating the virtualenv and installing `litellm[proxy]==version` on first use.
    LiteLLM never goes into OpenForge's own environment."""
    exe = venv / "bin" / "litellm"
    python = venv / "bin" / "python"
    if exe.exists():
        probe = subprocess.run(
            [str(python), "-c", "import importlib.metadata as m; print(m.version('litellm'))"],
            capture_output=True,
            text=True,
        )
        if probe.returncode == 0 and probe.stdout.strip() == version:
            return exe
        console.print(f"[yellow]{venv} holds litellm {probe.stdout.strip() or '?'}; installing {version}[/]")
    base = shutil.which("python3") or sys.executable
    console.print(f"creating LiteLLM's virtualenv at {venv} (litellm[proxy]=={version}; a few minutes, once)")
    if not python.exists():
        subprocess.run([base, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", "--upgrade", "pip"], check=True)
    subprocess.run([str(python), "-m", "pip", "install", "-q", f"litellm[proxy]=={version}"], check=True)
    return exe


LITELLM_ENV = {
    # Everything LiteLLM would otherwise fetch from the internet at start-up comes from its bundled copies.
    "LITELLM_LOCAL_MODEL_COST_MAP": "True",
    "LITELLM_LOCAL_BLOG_POSTS": "True",
    "LITELLM_LOCAL_ANTHROPIC_BETA_HEADERS": "True",
    "LITELLM_LOCAL_POLICY_TEMPLATES": "True",
    "LITELLM_LOCAL_AUTOROUTER_PRESETS": "True",
    "LITELLM_TELEMETRY": "False",
    "DISABLE_SCHEMA_UPDATE": "True",
    # Anthropic /v1/messages → the backend's /v1/chat/completions (LiteLLM >= 1.8x sends openai/ models to
    # the Responses API by default, which serve-model, like many OpenAI-compatible servers, does not serve).
    "LITELLM_USE_CHAT_COMPLETIONS_URL_FOR_ANTHROPIC_MESSAGES": "True",
    "LITELLM_LOG": "ERROR",
}


def litellm_config(served_model: str, alias: str, api_base: str, master_key: str) -> str:
    return (
        "model_list:\n"
        f"  - model_name: {alias}\n"
        "    litellm_params:\n"
        f"      model: openai/{served_model}\n"
        f"      api_base: {api_base}\n"
        "      api_key: dummy-key\n"
        "litellm_settings:\n"
        "  telemetry: false\n"
        "  drop_params: true\n"
        "  use_chat_completions_url_for_anthropic_messages: true\n"
        "general_settings:\n"
        f"  master_key: {master_key}\n"
    )


# ---- profiled proxy -------------------------------------------------------------------------------------


def profile_proxy(out: Path, args: list[str]) -> None:
    import cProfile
    import pstats

    sys.path.insert(0, str(ROOT))
    from openforge.store import writer as writer_module

    def fresh() -> dict:
        # Timed by each thread's own CPU clock: time a thread spends waiting (for the GIL, in epoll, on the
        # writer's queue) is not charged to the function it waits in, so the figures are CPU, not wall time.
        return {
            "main": cProfile.Profile(time.thread_time),
            "writer": cProfile.Profile(time.thread_time),
            "on": False,
            "writer_used": False,
        }

    state = fresh()
    dumps = [0]
    commit = writer_module.AsyncCallWriter._commit

    def profiled_commit(self, batch):  # runs in the writer thread
        current = state
        if not current["on"]:
            return commit(self, batch)
        current["writer_used"] = True
        current["writer"].enable()
        try:
            return commit(self, batch)
        finally:
            current["writer"].disable()

    writer_module.AsyncCallWriter._commit = profiled_commit

    def dump() -> None:
        stats = pstats.Stats(state["main"])
        if state["writer_used"]:
            stats.add(state["writer"])
        dumps[0] += 1
        tmp = out.with_name(f"{out.name}.{dumps[0]}.tmp")
        stats.dump_stats(str(tmp))
        tmp.rename(out.with_name(f"{out.name}.{dumps[0]}"))  # appears whole

    def on(signum, frame):
        state["on"] = True
        state["main"].enable()

    def off(signum, frame):  # stop, write OUT.<n>, start over with fresh profilers
        nonlocal state
        state["main"].disable()
        state["on"] = False
        dump()
        state = fresh()

    signal.signal(signal.SIGUSR1, on)
    signal.signal(signal.SIGUSR2, off)
    from openforge.cli import app

    try:
        app(args=args, prog_name="openforge")
    except SystemExit:
        pass


if __name__ == "__main__":
    if len(sys.argv) >= 4 and sys.argv[1] == "profile-proxy" and sys.argv[3] == "--":
        profile_proxy(Path(sys.argv[2]), sys.argv[4:])
    else:
        sys.exit("usage: python benchmarks/_proxy_support.py profile-proxy OUT.prof -- proxy ARGS...")
