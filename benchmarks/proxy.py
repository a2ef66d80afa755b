"""Recording-proxy benchmark: what the proxy adds to each call, beside LiteLLM, and how its CPU cost per call
grows with the context of an episode.

Part 1, added latency per call, in one run on one `openforge serve-model` server (the tiny model, a fixed
serving seed, `--max-tokens` new tokens per call and short prompts so the model's own time is small; pinned to
one CPU so its speed does not depend on what else runs, leaving the other core to the proxies and clients):

  direct     the client calls serve-model's `POST /v1/chat/completions` itself (streamed, OpenAI chat format)
  openforge  `openforge proxy --backend vllm:<serve-model>`: Anthropic Messages in (streamed), the proxy renders
             token ids, calls serve-model's `/v1/completions` with them, parses, records to SQLite, encodes SSE
  litellm    LiteLLM's proxy (its own virtualenv, created on first use), Anthropic Messages in (streamed),
             translated to serve-model's `/v1/chat/completions` (model `openai/<name>`, streamed; LiteLLM sends
             openai/ models to the Responses API unless `use_chat_completions_url_for_anthropic_messages` is set)

Each stream is a conversation of `--calls` calls (system prompt, a tool list, a first user message; each next
call appends the reply exactly as received and a new user message), so OpenForge's token-continuity path is
exercised on every call after the first. Same prompts for the three targets. The targets are interleaved:
each round runs the same conversations on every target in turn (order rotated per round), at 1 stream and at
32 concurrent streams; a warm-up round per level is not counted. One call's latency is the client's wall time
from sending the request to having read the last byte of the streamed response (time to the whole answer).
Reported per target: p50 and p99 of that latency; "added" = p50(target) - p50(direct) and p99(target) -
p99(direct); "paired" = the p50 / p99 of the per-call differences target - direct, where a call is paired with
the direct call of the same round, stream and turn. Also the CPU each process spent per call in that phase.

Part 2, OpenForge's CPU time per call at contexts of 1k, 10k, 50k and 100k tokens within one episode: the
proxy runs as its own process with `--backend scripted:FILE` (a policy that always calls `bash`), so no model
compute is involved. Per context size, one episode whose first user message (plus a tool list) brings the
first prompt to that many tokens (measured with the proxy's own count_tokens and checked in the store),
then `--tool-calls` tool-loop calls, each appending the assistant's tool_use reply as received and a
tool_result. The proxy process's CPU time (all its threads, /proc/PID/task/*/schedstat) is read before and
after each call; the first call of the episode (which renders everything once) is reported apart. The store
is read back to show that no tool-loop call broke continuity (a break would mean a full re-render). Then the
100k case is run again under cProfile (a second proxy process, profiled only during the tool-loop calls) and
the functions where the proxy spends its CPU are printed.

Parts 3-6 (`_proxy_scale.py`, `_proxy_faults.py`, where each is described): time to first byte / first token
against the whole reply, streamed, per dialect; 64 concurrent Claude Code-shaped episodes growing to 100k
tokens for 10 minutes, with abuse windows (slowloris, 16 MB bodies, 1,000 idle connections through a
forwarder): lost / duplicated calls, p50 / p99, RSS slope, open descriptors, abuse p99 against quiet p99;
20 SIGKILLs in the middle of streaming tool loops; throughput at 64 concurrent streams against LiteLLM on the
same (canned) backend. The figures go to `benchmarks/results/proxy.json` (`--results`).

    python benchmarks/proxy.py             # everything: about 20 minutes on 2 cores (first run: + LiteLLM's install)
    python benchmarks/proxy.py --quick     # a few minutes
    python benchmarks/proxy.py --skip-litellm --skip-latency   # part 2 only
    python benchmarks/proxy.py --only stream,load,faults,throughput

Every process it starts is stopped on exit (Ctrl-C too); all traffic stays on 127.0.0.1. Benchmarks are not
tests: nothing here asserts on timings.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import platform
import pstats
import random
import secrets
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

try:
    import httpx
    import numpy as np
    from rich.console import Console
    from rich.table import Table

    import openforge  # noqa: F401
except ImportError:  # run with another interpreter: use the project's virtualenv
    venv_python = ROOT / ".venv" / "bin" / "python"
    if venv_python.exists() and Path(sys.executable).resolve() != venv_python.resolve():
        os.execv(str(venv_python), [str(venv_python), *sys.argv])
    raise

from _machine import public_argv, run_metadata
from _proxy_faults import faults as fault_benchmark
from _proxy_faults import throughput as throughput_benchmark
from _proxy_scale import load as load_benchmark
from _proxy_scale import stream_timing
from _proxy_support import (
    LITELLM_ENV,
    Children,
    anthropic_message,
    chat_message,
    ensure_litellm,
    free_port,
    litellm_config,
    loopback_env,
    process_cpu_s,
    thread_cpu_s,
    tree_cpu_s,
    wait_for,
)

console = Console(width=170)
LITELLM_VERSION = "1.106.12"  # pinned: a known release (1.107.0 was a compromised upload, since pulled)
MODEL_ALIAS = "tiny"

# ---- the prompts ------------------------------------------------------------------------------------------

SYSTEM_PROMPT = (
    "You are a coding agent working in a Python repository checked out in the current directory. Use the "
    "tools to inspect files and run commands; keep answers short; never guess a file's content."
)

TOOLS = [  # Anthropic format; the chat-completions form is derived below
    {
        "name": "bash",
        "description": "Run a shell command in the repository and return its output.",
        "input_schema": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command to run."},
                "timeout": {"type": "integer", "description": "Seconds before it is stopped."},
            },
            "required": ["command"],
        },
    },
    {
        "name": "read_file",
        "description": "Read a text file, optionally a range of lines.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "offset": {"type": "integer"},
                "limit": {"type": "integer"},
            },
            "required": ["path"],
        },
    },
    {
        "name": "edit_file",
        "description": "Replace an exact string in a file.",
        "input_schema": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "old_string": {"type": "string"},
                "new_string": {"type": "string"},
            },
            "required": ["path", "old_string", "new_string"],
        },
    },
    {
        "name": "grep",
        "description": "Search files for a regular expression.",
        "input_schema": {
            "type": "object",
            "properties": {"pattern": {"type": "string"}, "path": {"type": "string"}},
            "required": ["pattern"],
        },
    },
]
CHAT_TOOLS = [
    {
        "type": "function",
        "function": {"name": t["name"], "description": t["description"], "parameters": t["input_schema"]},
    }
    for t in TOOLS
]


# Part 1 keeps the prompt short (one tool, a one-line system prompt, short turns) so that the model's own time
# per call stays small: prefill time grows with the prompt, and it is not what is measured.
LATENCY_SYSTEM = "You are a coding agent. Use the bash tool."
LATENCY_TOOLS = [TOOLS[0]]
LATENCY_CHAT_TOOLS = [CHAT_TOOLS[0]]


def first_user_message(round_: int, stream: int) -> str:
    return f"Round {round_}, stream {stream}: fix the failing test test_case_{stream}."


def next_user_message(turn: int) -> str:
    return f"Step {turn}: go on."


SCRIPTED_POLICY = """def respond(conversation, call_index):
    return '<tool_call>\\n{"name": "bash", "arguments": {"command": "echo ' + str(call_index) + '"}}\\n</tool_call>'
"""


def filler_text(n_chars: int, seed: int = 0) -> str:
    """Deterministic source-code-like text (what a harness pastes into a long first message)."""
    rng = random.Random(seed)
    words = (
        "parse header stream offset value record length kind buffer token index cache entry node tree path "
        "config loader writer reader state result error message request response client server batch chunk "
        "frame table column schema field type name key item list map set queue event handler"
    ).split()
    parts, size, n = [], 0, 0
    while size < n_chars:
        a, b, c, d = (rng.choice(words) for _ in range(4))
        n += 1
        block = (
            f"def {a}_{b}_{n}(self, {c}, {d}={rng.randint(0, 999)}):\n"
            f'    """Return the {c} {a} of the {b} (see {d}_{rng.randint(1, 99)})."""\n'
            f"    if {c} is None:\n        raise ValueError('{a} {b}: no {c}')\n"
            f"    return self.{d}.get({c}, {rng.randint(0, 9999)}) + len(self.{a}_{b})\n\n"
        )
        parts.append(block)
        size += len(block)
    return "".join(parts)[:n_chars]


# ---- statistics -------------------------------------------------------------------------------------------


def pct(values, q: float) -> float:
    return float(np.percentile(np.asarray(values, dtype=float), q)) if len(values) else float("nan")


def ms(x: float) -> str:
    return "—" if math.isnan(x) else f"{x * 1000:.1f}"


def signed_ms(x: float) -> str:
    return "—" if math.isnan(x) else f"{x * 1000:+.1f}"


# ---- part 1: added latency ---------------------------------------------------------------------------------


@dataclass
class Target:
    name: str
    url: str
    dialect: str  # "anthropic" or "chat"
    headers: dict[str, str]
    pid: int | None = None  # the proxy process (its CPU is accounted per phase)
    new_episode: object = None  # async () -> key, for OpenForge


class ClientConversation:
    """One stream's conversation, in the wire format of its target."""

    def __init__(self, dialect: str, round_: int, stream: int, max_tokens: int):
        self.dialect = dialect
        self.max_tokens = max_tokens
        self.turn = 0
        self.messages: list[dict] = []
        first = first_user_message(round_, stream)
        if dialect == "chat":
            self.messages = [{"role": "system", "content": LATENCY_SYSTEM}, {"role": "user", "content": first}]
        else:
            self.messages = [{"role": "user", "content": first}]

    def body(self) -> bytes:
        if self.dialect == "chat":
            data = {
                "model": MODEL_ALIAS,
                "messages": self.messages,
                "tools": LATENCY_CHAT_TOOLS,
                "max_tokens": self.max_tokens,
                "temperature": 1.0,
                "stream": True,
                "stream_options": {"include_usage": True},
            }
        else:
            data = {
                "model": MODEL_ALIAS,
                "system": LATENCY_SYSTEM,
                "messages": self.messages,
                "tools": LATENCY_TOOLS,
                "max_tokens": self.max_tokens,
                "temperature": 1.0,
                "stream": True,
            }
        return json.dumps(data).encode()

    def absorb(self, raw: bytes) -> int | None:
        """Append the reply as received and the next user message; the reply's output tokens."""
        self.turn += 1
        follow = next_user_message(self.turn)
        if self.dialect == "chat":
            reply = chat_message(raw)
            self.messages += [{"role": "assistant", "content": reply["text"]}, {"role": "user", "content": follow}]
            return reply["output_tokens"]
        reply = anthropic_message(raw)
        blocks = reply["content"] or [{"type": "text", "text": ""}]
        results = [
            {"type": "tool_result", "tool_use_id": b["id"], "content": "(no output)"}
            for b in blocks
            if b.get("type") == "tool_use"
        ]
        self.messages += [
            {"role": "assistant", "content": blocks},
            {"role": "user", "content": [*results, {"type": "text", "text": follow}]},
        ]
        return reply["output_tokens"]


@dataclass
class Sample:
    target: str
    streams: int
    round: int
    stream: int
    turn: int
    latency: float
    output_tokens: int | None


@dataclass
class Phase:
    calls: int = 0
    proxy_cpu: float = 0.0
    server_cpu: float = 0.0
    client_cpu: float = 0.0
    wall: float = 0.0


async def run_stream(client, target, round_, stream, streams, calls, max_tokens, key, out):
    conv = ClientConversation(target.dialect, round_, stream, max_tokens)
    headers = dict(target.headers)
    if key is not None:
        headers["x-api-key"] = key
    for turn in range(calls):
        body = conv.body()
        t0 = time.perf_counter()
        try:
            async with client.stream("POST", target.url, content=body, headers=headers) as response:
                raw = await response.aread()
        except httpx.HTTPError as e:
            raise RuntimeError(f"{target.name}: call {turn} of stream {stream} failed: {type(e).__name__}: {e}") from e
        latency = time.perf_counter() - t0
        if response.status_code != 200:
            raise RuntimeError(f"{target.name}: HTTP {response.status_code}: {raw[:500]!r}")
        tokens = conv.absorb(raw)
        if out is not None:
            out.append(Sample(target.name, streams, round_, stream, turn, latency, tokens))


async def run_round(client, target, round_, streams, calls, max_tokens, out, server_pid, phases):
    keys = [await target.new_episode() for _ in range(streams)] if target.new_episode else [None] * streams
    cpu0 = tree_cpu_s(target.pid) if target.pid else 0.0
    srv0 = process_cpu_s(server_pid)
    me0 = process_cpu_s(os.getpid())
    t0 = time.perf_counter()
    await asyncio.gather(
        *(run_stream(client, target, round_, s, streams, calls, max_tokens, keys[s], out) for s in range(streams))
    )
    if phases is not None:
        phase = phases.setdefault((target.name, streams), Phase())
        phase.calls += streams * calls
        phase.wall += time.perf_counter() - t0
        phase.proxy_cpu += (tree_cpu_s(target.pid) - cpu0) if target.pid else 0.0
        phase.server_cpu += process_cpu_s(server_pid) - srv0
        phase.client_cpu += process_cpu_s(os.getpid()) - me0


async def latency_benchmark(args, targets: list[Target], server_pid: int):
    samples: list[Sample] = []
    phases: dict[tuple[str, int], Phase] = {}
    # Idle connections are dropped after 1 s, before any server's keep-alive timeout (uvicorn's default is 5 s):
    # otherwise a request can go out on a connection the server is closing at that moment.
    limits = httpx.Limits(max_connections=128, max_keepalive_connections=128, keepalive_expiry=1.0)
    async with httpx.AsyncClient(trust_env=False, timeout=300, limits=limits) as client:
        for t in targets:  # warm every path once (imports, connections, caches)
            await run_round(client, t, -1, 2, 3, args.max_tokens, None, server_pid, None)
        for streams in args.streams:
            rounds = args.rounds_1 if streams == 1 else args.rounds_n
            started = time.perf_counter()
            for t in targets:  # warm-up at this concurrency, not counted
                await run_round(client, t, -2, streams, 2, args.max_tokens, None, server_pid, None)
            for r in range(rounds):
                k = r % len(targets)
                for t in targets[k:] + targets[:k]:
                    await run_round(client, t, r, streams, args.calls, args.max_tokens, samples, server_pid, phases)
            console.print(
                f"  [dim]{streams} stream(s): {rounds} interleaved rounds of {streams} × {args.calls} calls per target "
                f"in {time.perf_counter() - started:.0f} s[/]"
            )
    return samples, phases


def latency_table(args, samples: list[Sample], phases, targets: list[Target]) -> dict:
    table = Table(
        title=(
            f"Part 1 — latency per call (ms), client wall time to the last byte of a streamed reply; "
            f"{args.calls}-call conversations, max_tokens={args.max_tokens}"
        ),
        title_justify="left",
    )
    for col in (
        "streams",
        "target",
        "calls",
        "p50",
        "p99",
        "added p50",
        "added p99",
        "paired Δ p50",
        "paired Δ p99",
        "calls/s",
        "proxy CPU/call",
        "server CPU/call",
        "client CPU/call",
        "out tok/call",
    ):
        table.add_column(col, justify="right" if col not in ("target",) else "left")
    summary = {}
    for streams in args.streams:
        by_target = {t.name: [s for s in samples if s.streams == streams and s.target == t.name] for t in targets}
        direct = {(s.round, s.stream, s.turn): s.latency for s in by_target.get("direct", [])}
        d50 = pct(list(direct.values()), 50)
        d99 = pct(list(direct.values()), 99)
        for t in targets:
            lat = [s.latency for s in by_target[t.name]]
            paired = [
                s.latency - direct[(s.round, s.stream, s.turn)]
                for s in by_target[t.name]
                if (s.round, s.stream, s.turn) in direct
            ]
            tokens = [s.output_tokens for s in by_target[t.name] if s.output_tokens is not None]
            phase = phases.get((t.name, streams), Phase())
            p50, p99 = pct(lat, 50), pct(lat, 99)
            row = {
                "p50": p50,
                "p99": p99,
                "added_p50": p50 - d50,
                "added_p99": p99 - d99,
                "paired_p50": pct(paired, 50),
                "paired_p99": pct(paired, 99),
                "proxy_cpu": phase.proxy_cpu / phase.calls if phase.calls else float("nan"),
            }
            summary[(streams, t.name)] = row
            is_direct = t.name == "direct"
            table.add_row(
                str(streams),
                t.name,
                str(len(lat)),
                ms(p50),
                ms(p99),
                "—" if is_direct else signed_ms(row["added_p50"]),
                "—" if is_direct else signed_ms(row["added_p99"]),
                "—" if is_direct else signed_ms(row["paired_p50"]),
                "—" if is_direct else signed_ms(row["paired_p99"]),
                f"{phase.calls / phase.wall:.0f}" if phase.wall else "—",
                "—" if is_direct or not phase.calls else ms(phase.proxy_cpu / phase.calls),
                ms(phase.server_cpu / phase.calls) if phase.calls else "—",
                ms(phase.client_cpu / phase.calls) if phase.calls else "—",
                f"{np.mean(tokens):.2f}" if tokens else "—",
            )
        table.add_section()
    console.print(table)
    console.print(
        "[dim]added pXX = pXX(target) − pXX(direct); paired Δ = percentile of per-call differences against the direct "
        "call of the same round/stream/turn; calls/s = calls ÷ wall time of the target's measured phases; "
        "CPU/call = CPU of the proxy process (tree), of serve-model and of this benchmark's client during the "
        "target's phases ÷ calls. OpenForge sends token ids to /v1/completions (no template, non-streamed); "
        "direct and LiteLLM use /v1/chat/completions (streamed).[/]"
    )
    names = {t.name for t in targets}
    if {"openforge", "litellm"} <= names:
        ratios = Table(title="OpenForge added latency / LiteLLM added latency (target < 0.2)", title_justify="left")
        for col in ("streams", "added p50 ratio", "paired Δ p50 ratio", "added p99 ratio", "proxy CPU/call ratio"):
            ratios.add_column(col, justify="right")
        for streams in args.streams:
            o, lt = summary[(streams, "openforge")], summary[(streams, "litellm")]
            keys = ("added_p50", "paired_p50", "added_p99", "proxy_cpu")
            ratios.add_row(str(streams), *(f"{o[k] / lt[k]:.3f}" if lt[k] > 0 else "—" for k in keys))
        console.print(ratios)
        console.print(
            "[dim]A negative added latency means the proxied calls were faster than the direct ones at that "
            "percentile: OpenForge hands serve-model token ids (/v1/completions, non-streamed), which costs the "
            "server less than chat completions (template, tokenizer, per-token streaming; see server CPU/call), "
            "and when the server is the bottleneck (32 streams) that saving offsets the proxy's own cost.[/]"
        )
    return summary


# ---- part 2: CPU per call vs context -----------------------------------------------------------------------


class ProxyProc:
    """An `openforge proxy` child process and its addresses (from RUN/proxy.json)."""

    def __init__(
        self, children: Children, name: str, model: Path, backend: str, run: Path, profile: Path | None = None
    ):
        run.mkdir(parents=True, exist_ok=True)
        proxy_args = [
            "proxy",
            "--model",
            str(model),
            "--backend",
            backend,
            "--run",
            str(run),
            "--listen",
            "127.0.0.1:0",
            "--admin-listen",
            "127.0.0.1:0",
        ]
        if profile is None:
            argv = [sys.executable, "-m", "openforge.cli", *proxy_args]
        else:
            argv = [
                sys.executable,
                str(ROOT / "benchmarks" / "_proxy_support.py"),
                "profile-proxy",
                str(profile),
                "--",
                *proxy_args,
            ]
        self.children, self.name, self.run = children, name, run
        self.proc = children.start(name, argv, env=loopback_env({"PYTHONPATH": str(ROOT)}), cwd=ROOT)
        info_path = run / "proxy.json"
        wait_for(info_path.exists, 90, f"{name} start", self.proc, lambda: children.log_tail(name))
        info = wait_for(lambda: _read_json(info_path), 10, f"{name} proxy.json", self.proc)
        self.url, self.admin_url, self.admin_token = info["url"], info["admin_url"], info["admin_token"]
        self.pid = self.proc.pid

    async def new_episode(self, client: httpx.AsyncClient) -> tuple[str, str]:
        r = await client.post(
            f"{self.admin_url}/admin/episodes",
            json={"task": "bench", "harness": "bench"},
            headers={"authorization": f"Bearer {self.admin_token}"},
        )
        r.raise_for_status()
        data = r.json()
        return data["episode_id"], data["key"]


def _read_json(path: Path):
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def anthropic_body(first_message: str, messages: list[dict], stream: bool = True) -> dict:
    return {
        "model": MODEL_ALIAS,
        "system": SYSTEM_PROMPT,
        "tools": TOOLS,
        "max_tokens": 256,
        "stream": stream,
        "messages": [{"role": "user", "content": first_message}, *messages],
    }


async def count_tokens(client, proxy: ProxyProc, key: str, first_message: str) -> int:
    body = anthropic_body(first_message, [])
    body.pop("stream")
    r = await client.post(f"{proxy.url}/v1/messages/count_tokens", json=body, headers={"x-api-key": key})
    r.raise_for_status()
    return r.json()["input_tokens"]


async def calibrate(client, proxy: ProxyProc, key: str, target: int, text: str) -> str:
    """The first user message whose prompt (system + tools + message) is `target` tokens, by the proxy's
    own count (POST /v1/messages/count_tokens renders with the model's template and tokenizer)."""
    lead = "Here is the source of the module under test; read it, then run its tests.\n\n"
    base = await count_tokens(client, proxy, key, lead)
    if target <= base:
        return lead
    probe = min(len(text), 20_000)
    rate = (await count_tokens(client, proxy, key, lead + text[:probe]) - base) / probe
    n = int((target - base) / rate)
    for _ in range(6):
        if n > len(text):
            raise RuntimeError("filler text too short for the context size")
        got = await count_tokens(client, proxy, key, lead + text[:n])
        if got == target:
            break
        n += max(1, int((target - got) / rate)) if got < target else min(-1, int((target - got) / rate))
    return lead + text[:n]


@dataclass
class EpisodeCPU:
    size: int
    episode_id: str
    first_call_cpu: float = 0.0
    first_call_latency: float = 0.0
    loop_cpu: list[float] = field(default_factory=list)
    loop_main_cpu: list[float] = field(default_factory=list)  # the event loop's thread only
    loop_latency: list[float] = field(default_factory=list)


async def tool_loop(
    client,
    proxy: ProxyProc,
    key: str,
    first_message: str,
    calls: int,
    on_loop_start=None,
    record: EpisodeCPU | None = None,
) -> None:
    """The first call, then `calls` tool-loop calls, each echoing the tool_use reply and adding its result."""
    messages: list[dict] = []
    headers = {"x-api-key": key, "anthropic-version": "2023-06-01"}
    for i in range(calls + 1):
        if i == 1 and on_loop_start is not None:
            on_loop_start()
        body = json.dumps(anthropic_body(first_message, messages)).encode()
        await asyncio.sleep(0.01)  # let the proxy settle: nothing else runs in it between calls
        threads0 = thread_cpu_s(proxy.pid)
        t0 = time.perf_counter()
        async with client.stream("POST", f"{proxy.url}/v1/messages", content=body, headers=headers) as r:
            raw = await r.aread()
        latency = time.perf_counter() - t0
        await asyncio.sleep(0.01)  # the response is sent after the call is committed; let the proxy finish
        threads1 = thread_cpu_s(proxy.pid)
        if r.status_code != 200:
            raise RuntimeError(f"proxy call {i}: HTTP {r.status_code}: {raw[:500]!r}")
        cpu = sum(threads1.values()) - sum(v for t, v in threads0.items() if t in threads1)
        main_cpu = threads1.get(proxy.pid, 0.0) - threads0.get(proxy.pid, 0.0)
        if record is not None:
            if i == 0:
                record.first_call_cpu, record.first_call_latency = cpu, latency
            else:
                record.loop_cpu.append(cpu)
                record.loop_main_cpu.append(main_cpu)
                record.loop_latency.append(latency)
        reply = anthropic_message(raw)
        uses = [b for b in reply["content"] if b.get("type") == "tool_use"]
        if not uses:
            raise RuntimeError(f"call {i}: the scripted policy's reply has no tool_use block: {reply}")
        messages.append({"role": "assistant", "content": reply["content"]})
        messages.append(
            {
                "role": "user",
                "content": [
                    {"type": "tool_result", "tool_use_id": u["id"], "content": f"{u['input'].get('command', '')[5:]}\n"}
                    for u in uses
                ],
            }
        )


def store_check(run: Path, episode_id: str) -> dict:
    from openforge.store import TrajectoryStore

    with TrajectoryStore.open(run) as store:
        calls = store.list_calls(episode_id)
    loop = calls[1:]
    return {
        "calls": len(calls),
        "first_prompt": len(calls[0].prompt_ids),
        "last_prompt": len(calls[-1].prompt_ids),
        "breaks": [c.break_reason for c in loop if c.break_reason is not None],
        "break_reasons": sorted({str(c.break_reason) for c in calls}),
        "segments": sorted({c.segment for c in calls}),
        "reused_last": calls[-1].metadata.get("reused_prompt_tokens"),
        "parse_errors": sum(1 for c in calls if c.parse_error),
    }


async def cpu_benchmark(args, children: Children, model: Path, work: Path):
    policy = work / "policy.py"
    policy.write_text(SCRIPTED_POLICY)
    proxy = ProxyProc(children, "proxy-scripted", model, f"scripted:{policy}", work / "run-cpu")
    text = filler_text(int(max(args.contexts) * 2.6) + 50_000)
    records, checks, messages = [], {}, {}
    async with httpx.AsyncClient(trust_env=False, timeout=600) as client:
        # warm-up episode: imports, first template compile, store connections
        _, key = await proxy.new_episode(client)
        await tool_loop(client, proxy, key, "Warm-up: list the files.", 3)
        idle0 = process_cpu_s(proxy.pid)
        await asyncio.sleep(1.0)
        idle = process_cpu_s(proxy.pid) - idle0
        console.print(
            f"  [dim]the proxy idles at {idle * 1000:.2f} ms of CPU per second (presumably the 0.1 s tick "
            "loops of its two uvicorn servers); each call's window below holds ~20 ms of settling, "
            "so ~0.06 ms of that[/]"
        )
        for size in args.contexts:
            episode_id, key = await proxy.new_episode(client)
            first = await calibrate(client, proxy, key, size, text)
            messages[size] = first
            rec = EpisodeCPU(size, episode_id)
            await tool_loop(client, proxy, key, first, args.tool_calls, record=rec)
            records.append(rec)
            checks[size] = store_check(proxy.run, episode_id)
            console.print(
                f"  [dim]context {size}: CPU per tool-loop call {np.mean(rec.loop_cpu) * 1000:.1f} ms "
                f"(first call {rec.first_call_cpu * 1000:.1f} ms)[/]"
            )
    children.stop(proxy.proc, signal.SIGINT)
    return records, checks, messages, policy


def cpu_tables(args, records: list[EpisodeCPU], checks: dict) -> dict:
    table = Table(
        title=(
            f"Part 2 — OpenForge proxy CPU time per call (ms; all threads of the proxy process), scripted "
            f"backend, {args.tool_calls} tool-loop calls per episode after the first call"
        ),
        title_justify="left",
    )
    for col in (
        "context",
        "prompt tokens (first → last)",
        "first call CPU",
        "CPU/call mean",
        "CPU/call p50",
        "CPU/call max",
        "event-loop thread p50",
        "other threads p50",
        "wall/call p50",
    ):
        table.add_column(col, justify="right")
    for rec in records:
        c = checks[rec.size]
        other = [a - b for a, b in zip(rec.loop_cpu, rec.loop_main_cpu)]
        table.add_row(
            f"{rec.size // 1000}k",
            f"{c['first_prompt']:,} → {c['last_prompt']:,}",
            ms(rec.first_call_cpu),
            ms(float(np.mean(rec.loop_cpu))),
            ms(pct(rec.loop_cpu, 50)),
            ms(max(rec.loop_cpu)),
            ms(pct(rec.loop_main_cpu, 50)),
            ms(pct(other, 50)),
            ms(pct(rec.loop_latency, 50)),
        )
    console.print(table)
    by_size = {r.size: r for r in records}
    lo, hi = min(by_size), max(by_size)
    mean_ratio = np.mean(by_size[hi].loop_cpu) / np.mean(by_size[lo].loop_cpu)
    p50_ratio = pct(by_size[hi].loop_cpu, 50) / pct(by_size[lo].loop_cpu, 50)
    console.print(
        f"CPU per tool-loop call, {hi // 1000}k / {lo // 1000}k context: mean ratio [bold]{mean_ratio:.2f}[/], "
        f"p50 ratio [bold]{p50_ratio:.2f}[/] (target < 2)"
    )
    summary = {
        "mean_ratio": mean_ratio,
        "p50_ratio": p50_ratio,
        "lo": lo,
        "hi": hi,
        "per_size": {r.size: (float(np.mean(r.loop_cpu)), pct(r.loop_cpu, 50)) for r in records},
        "breaks": sum(len(c["breaks"]) for c in checks.values()),
    }
    cont = Table(title="Part 2 — continuity of those episodes, from the store", title_justify="left")
    for col in (
        "context",
        "calls",
        "tool-loop calls with a break",
        "break reasons (all calls)",
        "segments",
        "reused prompt tokens (last call)",
        "parse errors",
    ):
        cont.add_column(col, justify="right")
    for size, c in checks.items():
        cont.add_row(
            f"{size // 1000}k",
            str(c["calls"]),
            str(len(c["breaks"])),
            ", ".join(c["break_reasons"]),
            ",".join(map(str, c["segments"])),
            f"{c['reused_last']:,}" if c["reused_last"] is not None else "—",
            str(c["parse_errors"]),
        )
    console.print(cont)
    return summary


# ---- part 2b: where the CPU goes (cProfile, 100k context) ------------------------------------------------

IDLE = ("select.epoll",)  # waiting for the next request, not work


async def profile_run(
    args, children: Children, model: Path, work: Path, policy: Path, messages: dict[int, str]
) -> dict:
    """Profile the tool-loop calls of an episode at the smallest and at the largest context (one profiled proxy
    process; each episode's first call is left out)."""
    prof = work / "proxy.prof"
    proxy = ProxyProc(children, "proxy-profiled", model, f"scripted:{policy}", work / "run-profile", profile=prof)
    sizes = [min(messages), max(messages)]
    profiles = {}
    async with httpx.AsyncClient(trust_env=False, timeout=600) as client:
        _, key = await proxy.new_episode(client)
        await tool_loop(client, proxy, key, "Warm-up: list the files.", 3)
        for k, size in enumerate(sizes, start=1):
            _, key = await proxy.new_episode(client)
            await tool_loop(
                client,
                proxy,
                key,
                messages[size],
                args.tool_calls,
                on_loop_start=lambda: os.kill(proxy.pid, signal.SIGUSR1),
            )
            await asyncio.sleep(0.1)
            os.kill(proxy.pid, signal.SIGUSR2)
            path = prof.with_name(f"{prof.name}.{k}")
            wait_for(path.exists, 60, "profile dump", proxy.proc, lambda: children.log_tail("proxy-profiled"))
            profiles[size] = pstats.Stats(str(path)).stats
    children.stop(proxy.proc, signal.SIGINT, timeout=60)
    return print_profile(args, profiles[sizes[1]], sizes[1], profiles[sizes[0]], sizes[0])


def _where(key) -> str:
    file, line, name = key
    if file == "~":
        return name
    path = Path(file)
    try:
        rel = str(path.resolve().relative_to(ROOT))
    except ValueError:
        parts = path.parts
        rel = "/".join(parts[parts.index("site-packages") + 1 :]) if "site-packages" in parts else "/".join(parts[-2:])
    return f"{rel}:{line}({name})"


def _busy(entries) -> float:
    return sum(v[2] for k, v in entries.items() if not any(i in k[2] for i in IDLE))


def print_profile(args, entries: dict, size: int, small: dict, small_size: int) -> dict:
    """Prints the profile's tables and returns them for the results file. entries: pstats' (file, line, name) ->
    (primitive calls, calls, tottime, cumtime, callers)."""
    n = args.tool_calls
    busy_s = _busy(entries)
    console.print(
        f"\n[bold]Part 2b — cProfile of the proxy, {size // 1000}k context, {n} tool-loop calls[/] (event-loop "
        f"thread + store writer thread, each timed by its own CPU clock): {busy_s:.3f} s of CPU, "
        f"{busy_s / n * 1000:.1f} ms per call under the profiler (vs {_busy(small) / n * 1000:.1f} ms at "
        f"{small_size // 1000}k; cProfile's overhead inflates both, most where many small Python calls are made)"
    )

    summary: dict[str, object] = {
        "context_tokens": size,
        "small_context_tokens": small_size,
        "tool_loop_calls": n,
        "cpu_ms_per_call_under_profiler": round(busy_s / n * 1000, 3),
        "cpu_ms_per_call_under_profiler_small": round(_busy(small) / n * 1000, 3),
    }

    def show(title: str, keys, column: int, extra=None):
        summary[title] = [
            {
                "function": _where(key),
                "calls": entries[key][1],
                "ms_per_call": round(entries[key][column] / n * 1000, 4),
                "share_of_cpu": round(entries[key][column] / busy_s, 4),
                **({extra[0]: extra[1](key)} if extra else {}),
            }
            for key in keys
        ]
        t = Table(title=title, title_justify="left")
        cols = ["function", "ncalls", "tottime s", "cumtime s", "ms per call", "% of CPU"]
        if extra:
            cols.append(extra[0])
        for col in cols:
            t.add_column(col, justify="left" if col == "function" else "right")
        for key in keys:
            cc, nc, tt, ct, _ = entries[key]
            value = entries[key][column]
            row = [
                _where(key),
                f"{nc}" if nc == cc else f"{nc}/{cc}",
                f"{tt:.4f}",
                f"{ct:.4f}",
                f"{value / n * 1000:.2f}",
                f"{value / busy_s * 100:.1f}%",
            ]
            if extra:
                row.append(extra[1](key))
            t.add_row(*row)
        console.print(t)

    def at_small(key, column):
        return (small[key][column] if key in small else 0.0) / n * 1000

    own = str(ROOT / "openforge")
    in_openforge = [k for k in entries if k[0] != "~" and str(Path(k[0]).resolve()).startswith(own)]
    top_cum = sorted(in_openforge, key=lambda k: entries[k][3], reverse=True)[: args.profile_top]
    show(
        f"Top {args.profile_top} openforge/ functions by cumulative time, {size // 1000}k context (ms per tool-loop "
        "call and % use cumtime)",
        top_cum,
        3,
        extra=(f"ms per call at {small_size // 1000}k", lambda k: f"{at_small(k, 3):.2f}"),
    )
    busy = [k for k in entries if not any(i in k[2] for i in IDLE)]
    top_tot = sorted(busy, key=lambda k: entries[k][2], reverse=True)[: args.profile_top]
    show(
        f"Top {args.profile_top} functions overall by own time, {size // 1000}k context (ms per call and % use "
        "tottime)",
        top_tot,
        2,
        extra=(f"ms per call at {small_size // 1000}k", lambda k: f"{at_small(k, 2):.2f}"),
    )
    growth = sorted(busy, key=lambda k: entries[k][2] / n * 1000 - at_small(k, 2), reverse=True)[: args.profile_top]
    show(
        f"What grows with the context: top {args.profile_top} functions by own time per call at "
        f"{size // 1000}k minus at {small_size // 1000}k",
        growth,
        2,
        extra=("growth ms/call", lambda k: f"{entries[k][2] / n * 1000 - at_small(k, 2):+.2f}"),
    )
    return summary


# ---- main ---------------------------------------------------------------------------------------------------


def parse_args(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument("--quick", action="store_true", help="fewer rounds and calls (about a minute)")
    p.add_argument("--model", type=Path, help="model directory (default: build the tiny model, seed 0)")
    p.add_argument("--seed", type=int, default=0, help="serve-model's sampling seed")
    p.add_argument("--max-tokens", type=int, default=8, help="new tokens per call in part 1")
    p.add_argument("--calls", type=int, help="calls per conversation in part 1 (default 10)")
    p.add_argument(
        "--streams",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1, 32],
        help="concurrent streams per level, comma-separated (default 1,32)",
    )
    p.add_argument("--rounds-1", type=int, help="measured rounds at 1 stream (default 20)")
    p.add_argument("--rounds-n", type=int, help="measured rounds at 32 streams (default 4)")
    p.add_argument(
        "--contexts",
        type=lambda s: [int(x) for x in s.split(",")],
        default=[1000, 10000, 50000, 100000],
        help="first-prompt sizes in tokens for part 2 (default 1000,10000,50000,100000)",
    )
    p.add_argument("--tool-calls", type=int, help="tool-loop calls per episode in part 2 (default 10)")
    p.add_argument("--profile-top", type=int, default=15, help="functions per profile table")
    p.add_argument(
        "--litellm-venv",
        type=Path,
        default=Path("/tmp/litellm-venv"),
        help=f"LiteLLM's own virtualenv (created with litellm[proxy]=={LITELLM_VERSION} if missing)",
    )
    p.add_argument("--skip-litellm", action="store_true", help="part 1 without LiteLLM")
    p.add_argument("--no-pin", action="store_true", help="do not pin serve-model to one CPU")
    p.add_argument("--skip-latency", action="store_true", help="part 2 only")
    p.add_argument("--skip-cpu", action="store_true", help="part 1 only")
    p.add_argument("--skip-profile", action="store_true", help="part 2 without the cProfile run")
    p.add_argument("--keep", action="store_true", help="keep the work directory (logs, stores, profile)")
    p.add_argument("--only", help="comma-separated parts to run: latency,cpu,stream,load,faults,throughput")
    p.add_argument("--stream-tokens", type=int, default=128, help="tokens per streamed reply in part 3")
    p.add_argument("--stream-calls", type=int, help="measured calls per dialect in part 3 (default 10)")
    p.add_argument("--stream-prompt-chars", type=int, default=4000, help="prompt size in part 3")
    p.add_argument("--load-episodes", type=int, default=64, help="concurrent episodes in part 4")
    p.add_argument("--load-s", type=float, help="duration of part 4 in seconds (default 600)")
    p.add_argument("--load-context", type=int, default=100_000, help="episodes restart past this many tokens")
    p.add_argument("--abuse-window-s", type=float, help="length of the quiet / abuse windows (default 30)")
    p.add_argument("--kills", type=int, help="SIGKILLs in part 5 (default 20)")
    p.add_argument("--fault-clients", type=int, default=8, help="harness-shaped clients in part 5")
    p.add_argument("--fault-calls-per-episode", type=int, default=20)
    p.add_argument("--throughput-concurrency", type=int, default=64)
    p.add_argument("--throughput-s", type=float, help="seconds per target in part 6 (default 30)")
    p.add_argument("--throughput-rounds", type=int, default=1, help="rounds of part 6, the targets alternated")
    p.add_argument(
        "--results",
        type=Path,
        default=ROOT / "benchmarks" / "results" / "proxy.json",
        help="where the figures are written (JSON)",
    )
    args = p.parse_args(argv)
    quick = args.quick
    args.calls = args.calls or (5 if quick else 10)
    args.rounds_1 = args.rounds_1 or (4 if quick else 20)
    args.rounds_n = args.rounds_n or (1 if quick else 4)
    args.tool_calls = args.tool_calls or (5 if quick else 10)
    args.stream_calls = args.stream_calls or (3 if quick else 10)
    args.load_s = args.load_s or (60 if quick else 600)
    args.abuse_window_s = args.abuse_window_s or (10 if quick else 30)
    args.kills = args.kills if args.kills is not None else (5 if quick else 20)
    args.throughput_s = args.throughput_s or (10 if quick else 30)
    parts = {"latency", "cpu", "stream", "load", "faults", "throughput"}
    if args.only:
        chosen = {x.strip() for x in args.only.split(",") if x.strip()}
        unknown = chosen - parts
        if unknown:
            p.error(f"unknown parts {sorted(unknown)}; choose from {sorted(parts)}")
        parts = chosen
    args.parts = parts - {name for name in ("latency", "cpu") if getattr(args, f"skip_{name}")}
    return args


def start_serve_model(children: Children, model: Path, seed: int, pin: bool) -> tuple[subprocess.Popen, int, str]:
    """serve-model on a free port; with `pin`, on one CPU (the last), so the model's compute runs on one core
    at one speed whatever else runs, and the clients and proxies have the other core(s)."""
    port = free_port()
    cpus = sorted(os.sched_getaffinity(0))
    server_cpus = {cpus[-1]} if pin and len(cpus) > 1 else None
    proc = children.start(
        "serve-model",
        [
            sys.executable,
            "-m",
            "openforge.cli",
            "serve-model",
            "--model",
            str(model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--seed",
            str(seed),
        ],
        env=loopback_env({"PYTHONPATH": str(ROOT), "OMP_WAIT_POLICY": "PASSIVE"}),
        cwd=ROOT,
        cpus=server_cpus,
    )

    def up():
        try:
            return httpx.get(f"http://127.0.0.1:{port}/health", timeout=1, trust_env=False).status_code == 200
        except httpx.HTTPError:
            return False

    wait_for(up, 120, "serve-model", proc, lambda: children.log_tail("serve-model"))
    where = f"pinned to CPU {min(server_cpus)} (1 torch thread)" if server_cpus else "unpinned"
    return proc, port, where


def start_litellm(
    children: Children, args, work: Path, served: str, port: int, cpus: set[int] | None = None
) -> tuple[subprocess.Popen, int, str]:
    exe = ensure_litellm(args.litellm_venv, LITELLM_VERSION, console)
    key = "sk-bench-" + secrets.token_hex(24)
    config = work / "litellm.yaml"
    config.write_text(litellm_config(served, MODEL_ALIAS, f"http://127.0.0.1:{port}/v1", key))
    lport = free_port()
    proc = children.start(
        "litellm",
        [str(exe), "--config", str(config), "--host", "127.0.0.1", "--port", str(lport), "--num_workers", "1"],
        env=loopback_env(LITELLM_ENV),
        cwd=work,
        cpus=cpus,
    )

    def up():
        try:
            return (
                httpx.get(f"http://127.0.0.1:{lport}/health/liveliness", timeout=1, trust_env=False).status_code == 200
            )
        except httpx.HTTPError:
            return False

    wait_for(up, 180, "litellm", proc, lambda: children.log_tail("litellm"))
    return proc, lport, key


def git_head() -> str:
    try:
        return subprocess.run(
            ["git", "-C", str(ROOT), "rev-parse", "--short", "HEAD"], capture_output=True, text=True, check=False
        ).stdout.strip()
    except OSError:
        return "?"


def main(argv=None) -> None:
    args = parse_args(argv)
    work = Path(tempfile.mkdtemp(prefix="openforge-bench-proxy-"))
    children = Children(work)

    def terminate(signum, frame):
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, signal.default_int_handler)  # even where it was inherited as ignored
    signal.signal(signal.SIGTERM, terminate)
    signal.signal(signal.SIGHUP, terminate)
    try:
        console.print(
            f"[bold]OpenForge proxy benchmark[/] — openforge {git_head()}, Python {platform.python_version()}, "
            f"{os.cpu_count()} CPUs, load average {os.getloadavg()[0]:.1f}, work dir {work}"
        )
        if args.model:
            model = args.model
        else:
            from openforge.models import TinyModelSpec, build_tiny_model

            model = build_tiny_model(work / "tiny", spec=TinyModelSpec(seed=0))
        from openforge.models import ModelDir

        served = ModelDir(model).path.name
        latency, cpu = None, None
        command = "python benchmarks/proxy.py " + public_argv(sys.argv[1:] if argv is None else argv)
        options = {k: sorted(v) if isinstance(v, set) else v for k, v in vars(args).items() if not isinstance(v, Path)}
        results: dict = {
            **run_metadata(command.strip(), options),
            "openforge": git_head(),
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            "load_average_start": os.getloadavg()[0],
        }
        if "latency" in args.parts:
            latency = run_part1(args, children, work, model, served)
            results["latency"] = {f"{streams} streams / {name}": row for (streams, name), row in latency.items()}
        if "cpu" in args.parts:
            console.rule("Part 2: OpenForge CPU time per call vs context")
            records, checks, messages, policy = asyncio.run(cpu_benchmark(args, children, model, work))
            cpu = cpu_tables(args, records, checks)
            results["cpu_per_call"] = {k: v for k, v in cpu.items() if k != "per_size"}
            results["cpu_per_call"]["per_size_mean_p50_s"] = {str(k): v for k, v in cpu["per_size"].items()}
            if not args.skip_profile:
                results["cpu_profile"] = asyncio.run(profile_run(args, children, model, work, policy, messages))
        filler = filler_text(400_000, seed=1)
        if "stream" in args.parts:
            console.rule("Part 3: streaming — first byte, first token, whole reply")
            results["stream"] = asyncio.run(stream_timing(args, children, model, work, filler))
            console.print_json(data=results["stream"])
        if "load" in args.parts:
            console.rule(
                f"Part 4: {args.load_episodes} concurrent episodes for {args.load_s:.0f} s, with abuse windows"
            )
            results["load"] = asyncio.run(load_benchmark(args, children, model, work, filler))
            console.print_json(data=results["load"])
        if "faults" in args.parts:
            console.rule(f"Part 5: {args.kills} SIGKILLs in streaming tool loops")
            results["faults"] = asyncio.run(fault_benchmark(args, children, model, work, filler))
            console.print_json(data=results["faults"])
        if "throughput" in args.parts:
            console.rule(
                f"Part 6: throughput at {args.throughput_concurrency} concurrent streams, OpenForge vs LiteLLM"
            )
            results["throughput"] = asyncio.run(throughput_benchmark(args, children, model, work, start_litellm))
            console.print_json(data=results["throughput"])
        results["load_average_end"] = os.getloadavg()[0]
        print_summary(args, latency, cpu)
        write_results(args.results, results)
    except KeyboardInterrupt:
        console.print("[yellow]interrupted; stopping the processes started[/]")
    finally:
        children.stop_all()
        if args.keep:
            console.print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def write_results(path: Path, results: dict) -> None:
    """The figures as JSON; NaN (a figure that could not be taken) becomes null."""

    def clean(value):
        if isinstance(value, float) and math.isnan(value):
            return None
        if isinstance(value, dict):
            return {str(k): clean(v) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [clean(v) for v in value]
        if isinstance(value, (np.floating, np.integer)):
            return clean(value.item())
        return value

    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(clean(results), indent=2) + "\n")
    console.print(f"figures written to {path}")


def print_summary(args, latency: dict | None, cpu: dict | None) -> None:
    console.rule("Summary")
    t = Table(show_header=True, title_justify="left")
    t.add_column("figure")
    t.add_column("value", justify="right")
    t.add_column("target", justify="right")
    if latency:
        for streams in args.streams:
            o, lt = latency.get((streams, "openforge")), latency.get((streams, "litellm"))
            if o:
                t.add_row(
                    f"OpenForge added p50 / p99, {streams} stream(s) (ms)",
                    f"{signed_ms(o['added_p50'])} / {signed_ms(o['added_p99'])}",
                    "",
                )
            if lt:
                t.add_row(
                    f"LiteLLM added p50 / p99, {streams} stream(s) (ms)",
                    f"{signed_ms(lt['added_p50'])} / {signed_ms(lt['added_p99'])}",
                    "",
                )
            if o and lt and lt["added_p50"] > 0 and lt["paired_p50"] > 0:
                t.add_row(
                    f"added p50 ratio OpenForge / LiteLLM, {streams} stream(s) (p50s; paired)",
                    f"{o['added_p50'] / lt['added_p50']:.3f}; {o['paired_p50'] / lt['paired_p50']:.3f}",
                    "< 0.2",
                )
            if o and lt:
                t.add_row(
                    f"proxy CPU per call OpenForge / LiteLLM, {streams} stream(s) (ms)",
                    f"{ms(o['proxy_cpu'])} / {ms(lt['proxy_cpu'])}",
                    "",
                )
    if cpu:
        for size, (mean, p50) in cpu["per_size"].items():
            t.add_row(
                f"OpenForge CPU per tool-loop call at {size // 1000}k context, mean / p50 (ms)",
                f"{mean * 1000:.1f} / {p50 * 1000:.1f}",
                "",
            )
        t.add_row(
            f"CPU per call {cpu['hi'] // 1000}k / {cpu['lo'] // 1000}k (mean; p50)",
            f"{cpu['mean_ratio']:.2f}; {cpu['p50_ratio']:.2f}",
            "< 2",
        )
        t.add_row("tool-loop calls with a continuity break", str(cpu["breaks"]), "0")
    console.print(t)
    console.print(f"[dim]load average at the end: {os.getloadavg()[0]:.1f} (other work on this machine adds noise)[/]")


def run_part1(args, children: Children, work: Path, model: Path, served: str) -> dict:
    console.rule("Part 1: added latency per call")
    server, port, where = start_serve_model(children, model, args.seed, pin=not args.no_pin)
    base = f"http://127.0.0.1:{port}"
    targets = [Target("direct", f"{base}/v1/chat/completions", "chat", {})]
    proxy = ProxyProc(children, "proxy-vllm", model, f"vllm:{base}", work / "run-latency")
    episodes = httpx.AsyncClient  # created per event loop below

    async def new_episode():
        async with episodes(trust_env=False, timeout=30) as c:
            return (await proxy.new_episode(c))[1]

    targets.append(
        Target(
            "openforge",
            f"{proxy.url}/v1/messages",
            "anthropic",
            {"anthropic-version": "2023-06-01"},
            pid=proxy.pid,
            new_episode=new_episode,
        )
    )
    litellm_note = "skipped (--skip-litellm)"
    if not args.skip_litellm:
        try:
            lproc, lport, lkey = start_litellm(children, args, work, served, port)
            targets.append(
                Target(
                    "litellm",
                    f"http://127.0.0.1:{lport}/v1/messages",
                    "anthropic",
                    {"anthropic-version": "2023-06-01", "x-api-key": lkey},
                    pid=lproc.pid,
                )
            )
            litellm_note = f"litellm[proxy]=={LITELLM_VERSION} in {args.litellm_venv}"
        except (RuntimeError, subprocess.CalledProcessError) as e:
            litellm_note = f"unavailable: {str(e)[:300]}"
            console.print(f"[yellow]LiteLLM {litellm_note}[/]")
    console.print(
        f"serve-model: tiny model ({model}), seed {args.seed}, port {port}, {where}; OpenForge proxy: {proxy.url} "
        f"(backend vllm:{base}); LiteLLM: {litellm_note}"
    )
    samples, phases = asyncio.run(latency_benchmark(args, targets, server.pid))
    summary = latency_table(args, samples, phases, targets)
    for name in ("litellm", "proxy-vllm", "serve-model"):
        for pname, proc in list(children.procs):
            if pname == name:
                children.stop(proc, signal.SIGINT if name != "litellm" else signal.SIGTERM)
                children.procs.remove((pname, proc))
    return summary


if __name__ == "__main__":
    main()
