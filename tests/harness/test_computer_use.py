"""The built-in computer-use harness: its page snapshots, its adapter, the real headless Chromium driven over the
DevTools pipe on a tiny page served from loopback, and whole episodes through the real proxy — the oracle's
demonstration (`solution/actions.json`) sent step by step through its GUI tools, and a policy that does
nothing."""

from __future__ import annotations

import ast
import json
import os
import signal
import time
from pathlib import Path, PurePosixPath

import pytest

from conftest import unavailable
from openforge.analysis.trace import trace_calls
from openforge.harness import HarnessError, LaunchContext, get_adapter
from openforge.harness.base import run_local
from openforge.harness.computer_use_agent import (
    BROWSER_ERROR_EXIT,
    Browser,
    BrowserError,
    Session,
    only_offered,
    open_start_page,
    render,
    tool_specs,
)
from openforge.harness.tools import ToolKind
from openforge.store import TrajectoryStore
from support.paths import REPO
from support.proxy_process import start_proxy
from support.webapp import serve_webapp

CHROMIUM = "/usr/bin/chromium"
DEMONSTRATION = [
    {"tool": "type", "target": {"role": "textbox", "name": "Customer"}, "text": "Ada Lovelace"},
    {"tool": "select", "target": {"role": "combobox", "name": "Plan"}, "value": "Pro"},
    {"tool": "click", "target": {"role": "checkbox", "name": "Gift"}},
    {"tool": "click", "target": {"role": "button", "name": "Save"}},
    {"tool": "done", "answer": "saved"},
]


@pytest.fixture(scope="module")
def chromium() -> str:
    if not Path(CHROMIUM).is_file():
        unavailable("Debian's chromium is not installed (scripts/prepare-test-env.sh installs it)")
    return CHROMIUM


def _node(node_id, role, name="", children=(), parent=None, backend=None, value=None, props=None, ignored=False):
    node = {
        "nodeId": node_id,
        "role": {"value": role},
        "name": {"value": name},
        "childIds": list(children),
        "ignored": ignored,
        "properties": [{"name": k, "value": {"value": v}} for k, v in (props or {}).items()],
    }
    if parent is not None:
        node["parentId"] = parent
    if backend is not None:
        node["backendDOMNodeId"] = backend
    if value is not None:
        node["value"] = {"value": value}
    return node


PAGE = [
    _node("1", "RootWebArea", "Shop", ["2", "3", "6", "8", "9"], backend=1),
    _node("2", "heading", "Orders", ["20"], "1", backend=2),
    _node("20", "StaticText", "Orders", [], "2"),
    _node("3", "generic", "", ["4", "5"], "1", backend=3),
    _node("4", "textbox", "Customer", [], "3", backend=4, value="Ada", props={"focused": True}),
    _node("5", "checkbox", "Gift", [], "3", backend=5, props={"checked": "true"}),
    _node("6", "button", "Save", ["7"], "1", backend=6, props={"disabled": True}),
    _node("7", "StaticText", "Save", [], "6"),
    _node("8", "none", "", ["10"], "1", ignored=True),
    _node("10", "StaticText", 'Total: "42"', [], "8"),
    _node("9", "row", "", ["11", "12"], "1", backend=9),
    _node("11", "cell", "", ["13"], "9", backend=11),
    _node("13", "StaticText", "Ada", [], "11"),
    _node("12", "cell", "", ["14"], "9", backend=12),
    _node("14", "link", "Edit", ["15"], "12", backend=14),
    _node("15", "StaticText", "Edit", [], "14"),
]


def test_a_snapshot_is_one_line_per_meaningful_node_with_refs_in_document_order():
    snap = render(PAGE, "Shop", "http://127.0.0.1:8080/")
    assert snap.text.splitlines() == [
        'page "Shop" http://127.0.0.1:8080/',
        '[1] heading "Orders"',
        '[2] textbox "Customer" (value "Ada", focused)',
        '[3] checkbox "Gift" (checked)',
        '[4] button "Save" (disabled)',
        'text "Total: \\"42\\""',
        '[5] row "Ada | Edit"',
        '  [6] link "Edit"',
    ]
    assert snap.refs["2"] == (4, "textbox", "Customer") and snap.refs["6"] == (14, "link", "Edit")
    assert render(PAGE, "Shop", "http://127.0.0.1:8080/").text == snap.text  # the same state, the same refs


def test_a_snapshot_is_cut_at_its_budget():
    many = [_node("1", "RootWebArea", "Long", [str(i) for i in range(2, 400)], backend=1)] + [
        _node(str(i), "button", f"Button number {i}", [], "1", backend=i) for i in range(2, 400)
    ]
    text = render(many, "Long", "http://127.0.0.1/", budget=1000).text
    assert len(text) < 1100
    assert text.endswith("more lines not shown (the page is longer than 1000 characters)")


def test_the_agent_files_stay_within_python_3_7():
    for name in ("computer_use_agent.py", "react_agent.py"):
        source = (REPO / "openforge" / "harness" / name).read_text()
        ast.parse(source, feature_version=(3, 7))
        assert "removeprefix" not in source and ":=" not in source


def _ctx(start_url: str | None = "http://127.0.0.1:8080/") -> LaunchContext:
    return LaunchContext(
        PurePosixPath("/b"),
        PurePosixPath("/h"),
        PurePosixPath("/w"),
        "http://127.0.0.1:1",
        "k",
        "m",
        "Buy a plan",
        start_url=start_url,
    )


def test_the_adapter_launches_the_agent_at_the_start_url_with_gui_tools_only():
    adapter = get_adapter("computer-use", observation="screenshot", snapshot_chars=3000)
    launch = adapter.launch(_ctx())
    argv = launch.argv
    assert argv[argv.index("--start-url") + 1] == "http://127.0.0.1:8080/"
    assert argv[argv.index("--observation") + 1] == "screenshot"
    assert argv[argv.index("--snapshot-chars") + 1] == "3000"
    assert {p.name for p in launch.files} == {"computer_use_agent.py", "react_agent.py", "instruction.md"}
    assert adapter.shell_tool is None and not adapter.offers_shell() and adapter.gui_format == "computer-use"
    assert adapter.tool_kind("click") is ToolKind.interact and adapter.tool_kind("snapshot") is ToolKind.observe
    assert adapter.tool_kind("navigate") is ToolKind.navigate and adapter.tool_kind("done") is ToolKind.other
    names = {t["function"]["name"] for t in tool_specs("snapshot")}
    assert names == {"snapshot", "click", "type", "select", "key", "scroll", "navigate", "done"}
    assert "screenshot" in {t["function"]["name"] for t in tool_specs("screenshot")}
    small = get_adapter("computer-use", tools=["click", "type", "done"], system_prompt="").launch(_ctx()).argv
    assert small[small.index("--tools") + 1] == "click,type,done" and small[small.index("--system-prompt") + 1] == ""
    assert [t["function"]["name"] for t in tool_specs("snapshot", only=["done", "click"])] == ["click", "done"]


def test_the_adapter_refuses_a_task_without_a_start_url_and_bad_options():
    with pytest.raises(HarnessError, match=r"\[environment.gui\] start_url"):
        get_adapter("computer-use").launch(_ctx(None))
    with pytest.raises(HarnessError, match="observation"):
        get_adapter("computer-use", observation="video")
    with pytest.raises(HarnessError, match=r"tools=\['click', 'screenshot'\]: screenshot not offered in the snapshot"):
        get_adapter("computer-use", tools=["click", "screenshot"])
    with pytest.raises(HarnessError, match="start_url must be an http"):
        _ctx("file:///etc/passwd")


def test_exit_codes_say_whose_failure_it_was():
    adapter = get_adapter("computer-use")
    assert "browser failed" in adapter.infrastructure_error(BROWSER_ERROR_EXIT, "", "no chromium")
    assert adapter.infrastructure_error(3, "", "computer-use: model API answered 503: down")
    assert adapter.infrastructure_error(3, "", "computer-use: model API answered 400: too long") is None
    assert adapter.infrastructure_error(1, "", "Traceback") is None


# -- the real browser -----------------------------------------------------------------------------------------


@pytest.fixture
def browser(chromium, tmp_path):
    with serve_webapp() as app:
        b = Browser(chromium, str(tmp_path), app.url)
        b.start()
        try:
            open_start_page(b)
            yield b, app
        finally:
            proc = b.proc
            b.stop()
            if proc is not None:  # nothing it started is left running (SIGKILL takes a moment to finish them)
                deadline = time.monotonic() + 5
                while _running_in_group(proc.pid) and time.monotonic() < deadline:
                    time.sleep(0.1)
                assert _running_in_group(proc.pid) == [], proc.returncode


def _running_in_group(pgid: int) -> list[str]:
    """The live processes of a process group (a zombie is not running: a container's PID 1 may never reap it)."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # state, ppid, pgrp, ...
        if int(fields[2]) == pgid and fields[0] != "Z":
            found.append(f"{pid} {stat[: stat.rindex(')') + 1]} {fields[0]}")
    return found


def _ref(text: str, line: str) -> str:
    found = [ln for ln in text.splitlines() if ln.strip().split("] ", 1)[-1].startswith(line)]
    assert found, f"{line!r} not in:\n{text}"
    return found[0].strip()[1:].split("]")[0]


def test_the_browser_fills_and_submits_a_form(browser):
    b, app = browser
    session = Session(b)
    page = session.snapshot()
    assert page == session.snapshot()  # deterministic refs
    assert page.startswith(f'page "New order" {app.url}')
    assert '(value "nobody")' in page and 'combobox "Plan" (value "Basic")' in page
    page, done = session.run("type", {"ref": _ref(page, 'textbox "Customer"'), "text": "Ada Lovelace"})
    assert not done and 'textbox "Customer" (value "Ada Lovelace", focused)' in page
    page, _ = session.run("select", {"ref": _ref(page, 'combobox "Plan"'), "value": "pro"})
    assert 'combobox "Plan" (value "Pro")' in page
    page, _ = session.run("click", {"ref": "[" + _ref(page, 'checkbox "Gift"') + "]"})
    assert 'checkbox "Gift" (checked' in page
    page, _ = session.run("click", {"ref": _ref(page, 'button "Save"')})
    assert page.startswith('page "Orders"') and 'row "Ada Lovelace | Pro | yes"' in page
    assert app.orders == [{"customer": "Ada Lovelace", "plan": "Pro", "gift": "yes"}]
    assert session.run("done", {"answer": "saved"}) == ("done", True) and session.answer == "saved"


def test_keys_scripts_and_dialogs(browser):
    b, app = browser
    session = Session(b)
    page = session.snapshot()
    count = _ref(page, 'button "Count"')
    session.run("click", {"ref": count})
    page, _ = session.run("click", {"ref": count})
    assert 'text "Clicked 2 times"' in page
    page, _ = session.run("click", {"ref": _ref(page, 'button "Greet"')})
    assert page.startswith("(a alert said 'hello'; accepted)")
    page, _ = session.run("type", {"ref": _ref(page, 'textbox "Customer"'), "text": "Grace"})
    page, _ = session.run("key", {"key": "Enter"})  # submits the form
    assert page.startswith('page "Orders"') and app.orders == [{"customer": "Grace", "plan": "Basic", "gift": "no"}]
    page, _ = session.run("scroll", {"dy": 300})
    assert page.startswith('page "Orders"')


def test_the_agent_stays_on_its_site_and_errors_go_back_to_the_model(browser):
    b, app = browser
    session = Session(b)
    page = session.snapshot()
    page, _ = session.run("navigate", {"url": "http://203.0.113.9/"})
    assert page.startswith("[error: http://203.0.113.9/ is outside this site") and 'page "New order"' in page
    page, _ = session.run("click", {"ref": _ref(page, 'link "Elsewhere"')})  # a link cannot leave either
    assert "blocked a navigation to http://203.0.113.9/elsewhere" in page and 'page "New order"' in page
    page, _ = session.run("navigate", {"url": "/orders"})  # relative to the page
    assert page.startswith('page "Orders"')
    page, _ = session.run("click", {"ref": "99"})
    assert page.startswith("[error: no element [99] on the page")
    page, _ = session.run("navigate", {"url": "/"})
    page, _ = session.run("select", {"ref": _ref(page, 'combobox "Plan"'), "value": "Gold"})
    assert page.startswith('[error: no option "Gold"; options: "Basic", "Pro", "Team"]')
    page, _ = session.run("key", {"key": "Hyper+q"})
    assert page.startswith("[error: unknown key")
    page, _ = session.run("rm", {})
    assert page.startswith("[error: unknown tool 'rm'")
    narrow = only_offered(session, tool_specs("snapshot", only=["click", "done"]))  # `tools`: the rest is unknown
    page, _ = narrow("navigate", {"url": "/orders"})
    assert page.startswith("[error: unknown tool 'navigate'; use one of click, done]") and 'page "New order"' in page
    assert narrow("done", {}) == ("done", True)
    assert app.orders == []


def test_a_screenshot_is_an_image_part(browser):
    b, _ = browser
    parts = Session(b, observation="screenshot").observe()
    assert parts[0]["type"] == "text" and parts[0]["text"].startswith('page "New order"')
    url = parts[1]["image_url"]["url"]
    assert url.startswith("data:image/png;base64,iVBORw0KGgo")


def test_a_start_page_that_does_not_load_is_the_browsers_failure(chromium, tmp_path):
    with serve_webapp() as app:
        b = Browser(chromium, str(tmp_path), app.url + "broken")
        b.start()
        try:
            with pytest.raises(BrowserError, match="answered HTTP 500"):
                open_start_page(b)
        finally:
            b.stop()
    b = Browser(chromium, str(tmp_path), app.url)  # the server is gone now
    b.start()
    try:
        with pytest.raises(BrowserError, match="did not load: net::ERR_CONNECTION_REFUSED"):
            open_start_page(b)
    finally:
        b.stop()


# -- whole episodes through the proxy -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def oracle_proxy(tmp_path_factory, tiny_model_dir):
    p = start_proxy(tmp_path_factory.mktemp("gui-run"), tiny_model_dir, "oracle")
    yield p
    p.stop()


def _episode(proxy, app, tmp_path, task, **options):
    adapter = get_adapter("computer-use", **options)
    episode = proxy.new_episode(task=task, harness="computer-use")
    home, work = tmp_path / "home", tmp_path / "work"
    home.mkdir()
    work.mkdir()
    launch = adapter.launch(
        LaunchContext(tmp_path, home, work, proxy.url, episode["key"], "tiny", "Save an order.", start_url=app.url)
    )
    result = run_local(launch, adapter, timeout=120)
    proxy.end_episode(episode["episode_id"])
    return adapter, episode["episode_id"], result


def _no_chromium_left(home: Path) -> None:
    """No process of the episode's browser is left running (its profile is under the episode's home)."""
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except (OSError, IndexError):
            continue
        assert str(home) not in cmdline or state == "Z", cmdline


@pytest.mark.parametrize("observation", ["snapshot", "screenshot"])
def test_the_oracle_demonstrates_a_gui_task_through_the_harness(chromium, oracle_proxy, tmp_path, observation):
    with serve_webapp() as app:
        task = {"id": "gui", "actions": DEMONSTRATION, "gui_format": "computer-use"}
        adapter, episode_id, result = _episode(oracle_proxy, app, tmp_path, task, observation=observation)
        assert result.returncode == 0, (result.stdout[-2000:], result.stderr[-2000:])
        assert app.orders == [{"customer": "Ada Lovelace", "plan": "Pro", "gift": "yes"}]
    assert result.transcript["ok"] and result.transcript["final"] == "saved"
    assert result.transcript["browser_start_s"] < 30
    _no_chromium_left(tmp_path / "home")
    with TrajectoryStore.open(oracle_proxy.run) as store:
        calls = [c for c in store.list_calls(episode_id) if not c.side_call]
    assert all(c.call_error is None for c in calls)
    steps = trace_calls(calls, adapter).steps
    expected = ["type", "select", "click", "click", "done"]
    if observation == "screenshot":  # the page came as an image: the oracle asks for its text before each step
        expected = ["type", "snapshot", "select", "snapshot", "click", "snapshot", "click", "done"]
    assert [s.name for s in steps] == expected
    assert [s.kind for s in steps if s.name == "click"] == [ToolKind.interact] * 2
    assert not any(s.failed for s in steps)


def test_a_small_models_prompt_offers_only_the_tools_asked_for(chromium, oracle_proxy, tmp_path):
    """`tools` and `system_prompt: ""` (a small model's recipe): every request carries only those tools' schemas
    and no system message, and the demonstration still goes through."""
    tools = ["click", "type", "select", "done"]
    with serve_webapp() as app:
        task = {"id": "gui-small", "actions": DEMONSTRATION, "gui_format": "computer-use"}
        _, episode_id, result = _episode(oracle_proxy, app, tmp_path, task, tools=tools, system_prompt="")
        assert result.returncode == 0, result.stderr[-2000:]
        assert app.orders == [{"customer": "Ada Lovelace", "plan": "Pro", "gift": "yes"}]
    with TrajectoryStore.open(oracle_proxy.run) as store:
        bodies = [json.loads(c.request_body) for c in store.list_calls(episode_id) if not c.side_call]
    assert len(bodies) == 5
    for body in bodies:
        assert [t["function"]["name"] for t in body["tools"]] == tools
        assert body["messages"][0]["role"] == "user"


def test_a_policy_that_does_nothing_changes_nothing(chromium, tmp_path, tiny_model_dir):
    policy = tmp_path / "noop.json"
    policy.write_text(json.dumps({"turns": ["I am done."]}))
    proxy = start_proxy(tmp_path / "run", tiny_model_dir, f"scripted:{policy}")
    try:
        with serve_webapp() as app:
            _, _, result = _episode(proxy, app, tmp_path, {"id": "gui"})
            assert app.orders == []
    finally:
        proxy.stop()
    assert result.returncode == 0 and result.transcript["final"] == "I am done."
    _no_chromium_left(tmp_path / "home")


def test_no_browser_is_an_infrastructure_failure(oracle_proxy, tmp_path):
    with serve_webapp() as app:
        adapter, _, result = _episode(oracle_proxy, app, tmp_path, {"id": "gui"}, chromium="/nonexistent/chromium")
    assert result.returncode == BROWSER_ERROR_EXIT
    assert "no Chromium found" in adapter.infrastructure_error(result.returncode, result.stdout, result.stderr)


def test_a_killed_agent_leaves_no_browser(chromium, tmp_path):
    """A timeout kills the agent's process group, which the browser has left (it has its own, so that a normal
    end can kill everything it started): the browser dies with the agent, and its helpers with it."""
    import socket
    import subprocess
    import sys

    silent = socket.socket()  # a model API that accepts the call and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen()
    home = tmp_path / "home"
    with serve_webapp() as app:
        launch = get_adapter("computer-use").launch(
            LaunchContext(
                tmp_path,
                home,
                tmp_path,
                f"http://127.0.0.1:{silent.getsockname()[1]}",
                "k",
                "m",
                "x",
                start_url=app.url,
            )
        )
        launch.write_files()
        agent = subprocess.Popen(
            [sys.executable, *launch.argv[1:]],
            env={**os.environ, **launch.env},
            cwd=tmp_path,
            stdout=subprocess.PIPE,
            start_new_session=True,
        )
        try:
            assert b'"type": "browser"' in agent.stdout.readline()  # the browser is up, the model asked
        finally:
            os.killpg(agent.pid, signal.SIGKILL)
            agent.wait(10)
            agent.stdout.close()
            silent.close()
    deadline = time.monotonic() + 10
    while True:
        try:
            _no_chromium_left(home)
            break
        except AssertionError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)
