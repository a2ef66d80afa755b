"""OpenForge's built-in minimal ReAct harness: a chat-completions tool loop with bash / read / write / submit.

Standard library only, so it runs inside any sandbox with python3; the `react` adapter writes this file into
the episode's home and runs it. Its system prompt is short on purpose: a tiny model has to handle it.

    python3 react_agent.py --base-url URL --model NAME --instruction-file FILE [--max-steps N]
    (the episode key comes from the OPENFORGE_API_KEY environment variable)

It prints one JSON line per event on stdout ({"type": "step", ...}) and a final {"type": "result", ...}.
Exit codes: 0 when the loop ended (submit, a plain answer, or the step limit), 3 when the model API failed
(the orchestrator classifies that as a proxy error, not the agent's fault).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # for the checker only: in a sandbox this file runs alone, on the standard library
    from collections.abc import Callable, Mapping

    from openforge.core.json_types import JSONObject

    # (tool name, its arguments) -> (output for the model: text, or content parts as the Chat Completions API
    # takes them, whether the agent submitted)
    ToolRunner = Callable[[str, Mapping[str, object]], tuple[Any, bool]]

SYSTEM_PROMPT = "You are a shell agent. Use the tools to do the task in the current directory, then call submit."

TOOLS: list[dict[str, Any]] = [  # chat-completions tool definitions (JSON)
    {
        "type": "function",
        "function": {
            "name": "bash",
            "description": "Run a shell command.",
            "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "read",
            "description": "Read a file.",
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
        },
    },
    {
        "type": "function",
        "function": {
            "name": "write",
            "description": "Write a file.",
            "parameters": {
                "type": "object",
                "properties": {"path": {"type": "string"}, "content": {"type": "string"}},
                "required": ["path", "content"],
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "submit",
            "description": "Finish the task.",
            "parameters": {"type": "object", "properties": {}},
        },
    },
]

DEFAULT_MAX_STEPS = 8  # model calls per episode (the `react` adapter's and the in-process episodes' default too)
OUTPUT_CAP = 4000  # characters of tool output shown to the model
COMMAND_TIMEOUT_S = 60


# Answers to a request the agent's own conversation made unacceptable (context exhausted, body too large): the
# agent's doing, graded as its failure; any other failure of the model API is the infrastructure's.
AGENT_REFUSED_STATUSES = (400, 413)
API_ERROR_EXIT = 3  # the process's exit code when the model API failed


# In OpenForge's process (the in-process episodes) a failed model API is a ModelError of the error tree; in a
# sandbox this file runs alone, on the standard library.
try:
    from openforge.core.errors import ModelError as _ErrorKind
except ImportError:

    class _ErrorKind(Exception):  # type: ignore[no-redef]
        pass


class ModelAPIError(_ErrorKind, RuntimeError):
    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.status = status  # the HTTP status the model API answered; None: unreachable or malformed

    @property
    def agent_caused(self) -> bool:
        """The API refused what the agent's conversation had become (not an infrastructure failure)."""
        return self.status in AGENT_REFUSED_STATUSES


def emit(event: JSONObject) -> None:
    print(json.dumps(event), flush=True)


def select_tools(names: list[str] | None) -> list[dict[str, Any]]:
    """The tool definitions to offer, by name (all four by default)."""
    if not names:
        return TOOLS
    known = {t["function"]["name"]: t for t in TOOLS}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown tool(s) {unknown}; known: {sorted(known)}")
    return [known[n] for n in names]


def chat(
    base_url: str,
    key: str,
    model: str,
    messages: list[dict[str, Any]],
    max_tokens: int,
    retries: int = 2,
    tools: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    """The assistant message of one chat completion (JSON, as the model API sent it)."""
    body = json.dumps(
        {"model": model, "messages": messages, "tools": tools or TOOLS, "max_tokens": max_tokens}
    ).encode()
    request = urllib.request.Request(
        base_url.rstrip("/") + "/v1/chat/completions",
        data=body,
        method="POST",
        headers={"content-type": "application/json", "authorization": f"Bearer {key}"},
    )
    for attempt in range(retries + 1):
        try:
            with urllib.request.urlopen(request, timeout=900) as response:
                return json.loads(response.read())["choices"][0]["message"]
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:500]
            if e.code < 500 or attempt == retries:
                raise ModelAPIError(f"model API answered {e.code}: {detail}", e.code) from None
        except (urllib.error.URLError, OSError, ValueError, KeyError) as e:
            if attempt == retries:
                raise ModelAPIError(f"model API unreachable or malformed reply: {e}") from None
        time.sleep(1 + attempt)
    raise ModelAPIError("unreachable")


def format_output(stdout: str, stderr: str, returncode: int) -> str:
    """What the model sees of a command: its output (tail), or "(no output)", and a failing exit code."""
    out = (stdout + stderr)[-OUTPUT_CAP:]
    return (out if out.strip() else "(no output)") + ("" if returncode == 0 else f"\n[exit code {returncode}]")


def run_tool(
    name: str, arguments: Mapping[str, object], command_timeout_s: float = COMMAND_TIMEOUT_S
) -> tuple[str, bool]:
    """(output for the model, whether the agent submitted)."""
    try:
        if name == "bash":
            done = subprocess.run(
                ["bash", "-c", str(arguments.get("command", ""))],
                capture_output=True,
                text=True,
                errors="replace",
                timeout=command_timeout_s,
            )
            return format_output(done.stdout, done.stderr, done.returncode), False
        if name == "read":
            with open(str(arguments.get("path", "")), errors="replace") as f:
                return f.read()[:OUTPUT_CAP] or "(empty file)", False
        if name == "write":
            path = str(arguments.get("path", ""))
            if os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w") as f:
                f.write(str(arguments.get("content", "")))
            return f"wrote {path}", False
        if name == "submit":
            return "submitted", True
        return f"unknown tool {name!r}; use bash, read, write or submit", False
    except subprocess.TimeoutExpired:
        return f"[command timed out after {command_timeout_s:g} s]", False
    except OSError as e:
        return f"[error: {e}]", False


def run_agent(
    base_url: str,
    key: str,
    model: str,
    instruction: str,
    *,
    max_steps: int = DEFAULT_MAX_STEPS,
    max_tokens: int = 512,
    tool_runner: ToolRunner = run_tool,
    emit: Callable[[JSONObject], None] = emit,
    tools: list[str] | None = None,
    system_prompt: str | None = None,
    tool_specs: list[dict[str, Any]] | None = None,
) -> JSONObject:
    """The ReAct loop; returns the result event. `tool_runner(name, arguments) -> (output, submitted)` runs
    the tools (the default runs them here, in the current directory). `system_prompt` replaces the default
    one; "" sends no system message. `tool_specs` replaces the tool definitions offered (another harness's
    tools: the computer-use agent's). Raises ModelAPIError when the model API fails."""
    # stripped: an instruction.md's trailing newline must not make its prompt differ from the same task's
    # prompt given as a string (a tiny model notices)
    system = SYSTEM_PROMPT if system_prompt is None else system_prompt
    messages: list[dict[str, Any]] = [{"role": "system", "content": system}] if system else []
    messages.append({"role": "user", "content": instruction.strip()})
    offered = tool_specs if tool_specs is not None else select_tools(tools)
    tool_calls = 0
    final = None
    steps = 0
    for steps in range(1, max_steps + 1):
        reply = chat(base_url, key, model, messages, max_tokens, tools=offered)
        calls = reply.get("tool_calls") or []
        messages.append({"role": "assistant", "content": reply.get("content"), "tool_calls": calls or None})
        if reply.get("content"):
            final = reply["content"]
        emit({"type": "step", "step": steps, "content": reply.get("content"), "tool_calls": len(calls)})
        if not calls:
            break
        submitted = False
        for call in calls:
            function = call.get("function") or {}
            try:
                arguments = json.loads(function.get("arguments") or "{}")
            except ValueError:
                arguments = {}
            output, done = tool_runner(function.get("name", ""), arguments if isinstance(arguments, dict) else {})
            tool_calls += 1
            submitted = submitted or done
            messages.append({"role": "tool", "tool_call_id": call.get("id"), "content": output})
        if submitted:
            final = final or "submitted"
            break
    return {"type": "result", "ok": True, "final": final, "turns": steps, "tool_calls": tool_calls}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", required=True)
    parser.add_argument("--model", required=True)
    parser.add_argument("--instruction-file", required=True)
    parser.add_argument("--max-steps", type=int, default=DEFAULT_MAX_STEPS)
    parser.add_argument("--max-tokens", type=int, default=512)
    parser.add_argument("--tools", default="", help="comma-separated subset of bash,read,write,submit")
    parser.add_argument("--system-prompt", default=None, help="replaces the default system prompt; '' sends none")
    parser.add_argument(
        "--command-timeout", type=float, default=COMMAND_TIMEOUT_S, help="seconds a bash command may run"
    )
    args = parser.parse_args(argv)
    with open(args.instruction_file) as f:
        instruction = f.read()
    try:
        result = run_agent(
            args.base_url,
            os.environ.get("OPENFORGE_API_KEY", ""),
            args.model,
            instruction,
            max_steps=args.max_steps,
            max_tokens=args.max_tokens,
            tools=[t for t in args.tools.split(",") if t] or None,
            system_prompt=args.system_prompt,
            tool_runner=lambda name, arguments: run_tool(name, arguments, args.command_timeout),
        )
    except ModelAPIError as e:
        emit({"type": "result", "ok": False, "error": str(e)})
        print(f"react: {e}", file=sys.stderr)
        return API_ERROR_EXIT
    emit(result)
    return 0


if __name__ == "__main__":
    sys.exit(main())
