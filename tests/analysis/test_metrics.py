"""Behaviour metrics on episodes with known answers.

Each episode is played through the real in-process proxy (real dialect, renderer, store) by a scripted policy
(tests/policies/behaviour_scenarios.py); the test plays the react harness's side with the OpenAI SDK, sending
back tool results in react's own format (`[exit code N]` after a failed command). The analysis then reads only
the store.
"""

from __future__ import annotations

import json

import pytest

from openforge.analysis import analyze_run, behaviour, summarise, trace_calls, write_analysis
from openforge.analysis.shell import classify_command
from openforge.core import Outcome
from openforge.harness import get_adapter
from support.paths import POLICIES
from support.proxy import in_process_proxy

POLICY = f"scripted:{POLICIES / 'behaviour_scenarios.py'}"
TOOLS = [
    {
        "type": "function",
        "function": {
            "name": n,
            "description": n,
            "parameters": {"type": "object", "properties": {a: {"type": "string"}}},
        },
    }
    for n, a in (("bash", "command"), ("read", "path"))
]
# what react's tools answer (react_agent.format_output): the tail of the output, "[exit code N]" when failing
RESULTS = {
    "cat missing.txt": "cat: missing.txt: No such file or directory\n[exit code 1]",
    "echo hi > missing.txt": "(no output)",
    "echo x > f.txt": "(no output)",
    "cat f.txt": "x\n",
    "echo y > g.txt": "(no output)",
}


async def play(proxy, scenario: str, task: str, outcome: Outcome) -> str:
    episode_id, key = await proxy.new_episode(task=task, harness="react")
    client = proxy.openai(key)
    messages = [{"role": "user", "content": f"scenario: {scenario}"}]
    for _ in range(6):
        reply = (await client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS)).choices[0].message
        messages.append(reply.model_dump(exclude_none=True))
        if not reply.tool_calls:
            break
        for tc in reply.tool_calls:
            args = json.loads(tc.function.arguments)
            result = RESULTS[args["command"]] if tc.function.name == "bash" else "y\n"
            messages.append({"role": "tool", "tool_call_id": tc.id, "content": result})
    proxy.service.registry.end(episode_id)
    proxy.store.update_episode(
        episode_id, outcome=outcome, reward=1.0 if outcome is Outcome.passed else 0.0, metadata={"final": True}
    )
    return episode_id


@pytest.fixture
async def run_dir(tmp_path, tiny_model_dir):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, POLICY) as proxy:
        await play(proxy, "retry", "t-retry", Outcome.passed)
        await play(proxy, "readback", "t-readback", Outcome.passed)
        await play(proxy, "broken", "t-broken", Outcome.failed)
        await play(proxy, "give-up", "t-give-up", Outcome.failed)
        await play(proxy, "write-read-tool", "t-readback", Outcome.passed)
    return tmp_path / "run"


def by_task(analysis):
    return {e.task: e for e in reversed(analysis.stores[0].episodes)}  # first episode of each task


async def test_each_metric_on_known_episodes(run_dir):
    analysis = analyze_run(run_dir)
    episodes = by_task(analysis)

    retry = episodes["t-retry"]
    assert (retry.met_error, retry.continued_after_error, retry.recovered) == (True, True, True)
    assert retry.failed_steps == 1 and retry.tool_steps == 2 and retry.calls == 3
    assert retry.wrote and retry.self_verified is False  # nothing checked after the write

    readback = episodes["t-readback"]
    assert not readback.met_error and readback.wrote and readback.self_verified is True
    assert readback.tool_mix == {"shell": 2}

    broken = episodes["t-broken"]
    assert broken.parse_errors == 1 and broken.format_interrupted and broken.tool_steps == 0

    give_up = episodes["t-give-up"]
    assert (give_up.met_error, give_up.continued_after_error, give_up.recovered) == (True, False, False)

    overall = analysis.stores[0].overall
    assert overall.graded == 5 and overall.met_error == 2 and overall.recovered == 1
    assert overall.recovery_rate == 0.5
    assert overall.self_verified == 2 and overall.wrote == 3
    assert overall.tool_mix["read"] == pytest.approx(1 / 7) and overall.shell_share == pytest.approx(6 / 7)


async def test_the_last_reply_s_tool_calls_come_from_the_record(tmp_path, tiny_model_dir):
    """An episode that ends right after a tool call (react with max_steps 1, the quickstart's) still has that
    step: the proxy records the reply's parsed tool calls with the call."""
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, POLICY) as proxy:
        episode_id, key = await proxy.new_episode(task="t", harness="react")
        await proxy.openai(key).chat.completions.create(
            model="tiny", messages=[{"role": "user", "content": "scenario: readback"}], tools=TOOLS
        )
        calls = proxy.store.list_calls(episode_id)
    trace = trace_calls(calls, get_adapter("react"))
    assert [(s.name, s.command, s.result) for s in trace.steps] == [("bash", "echo x > f.txt", None)]


async def test_reference_gives_coverage_and_efficiency(tmp_path, tiny_model_dir):
    async with in_process_proxy(tmp_path / "oracle", tiny_model_dir, POLICY) as proxy:
        await play(proxy, "write-read-tool", "t-readback", Outcome.passed)  # needs shell + read
    async with in_process_proxy(tmp_path / "policy", tiny_model_dir, POLICY) as proxy:
        await play(proxy, "readback", "t-readback", Outcome.passed)  # uses shell only
    analysis = analyze_run(tmp_path / "policy", reference=tmp_path / "oracle")
    episode = analysis.stores[0].episodes[0]
    assert episode.coverage == 0.5
    assert episode.calls_vs_reference == 1.0


async def test_infrastructure_failures_are_not_behaviour(run_dir):
    analysis = analyze_run(run_dir)
    items = analysis.stores[0].episodes
    crashed = items[0].model_copy(update={"outcome": "sandbox_error", "graded": False, "met_error": True})
    assert summarise([crashed, *items]).met_error == summarise(items).met_error


async def test_writes_json_markdown_and_plot(run_dir):
    paths = write_analysis(analyze_run(run_dir), run_dir)
    data = json.loads(paths[0].read_text())
    assert data["stores"][0]["overall"]["recovery_rate"] == 0.5
    assert "| recovery |" in paths[1].read_text().replace("recovery |", "recovery |")
    assert paths[2].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize(
    "command,expected",
    [
        ("echo hi > out.txt && cat out.txt", [(True, False), (False, True)]),
        ("ls /x 2>/dev/null", [(False, True)]),
        ("grep -c x f.txt > n.txt", [(True, False)]),
        ("python3 -m pytest -q", [(False, True)]),
        ("sed -i s/a/b/ f", [(True, False)]),
        ('echo "a > b"', [(False, False)]),
        ("cd /app; mkdir -p d", [(False, False), (True, False)]),
        ("FOO=1 cat x | head -3", [(False, True), (False, True)]),
    ],
)
def test_shell_command_classes(command, expected):
    assert [(p.writes, p.checks) for p in classify_command(command)] == expected


def test_behaviour_of_an_episode_without_steps():
    from openforge.analysis.trace import EpisodeTrace
    from openforge.core import Episode

    empty = EpisodeTrace(
        steps=[],
        calls=1,
        sampled_tokens=3,
        parse_errors=0,
        last_call_parse_error=False,
        length_capped=0,
        breaks=0,
        undecodable=0,
        seconds=0.1,
    )
    b = behaviour(Episode(id="e", key="k", outcome=Outcome.failed), empty)
    assert (b.met_error, b.wrote, b.self_verified, b.coverage) == (False, False, None, None)


async def test_recovery_per_fault_kind_from_the_episode_record(run_dir):
    """`metadata["faults"]` (what fault injection records) splits recovery by kind; faults that did not fire
    or could not be put in do not count."""
    from openforge.store import TrajectoryStore

    fired = {"kind": "transient", "applicable": True, "fired": True, "command": 1}
    with TrajectoryStore.open(run_dir) as store:
        for e in store.list_episodes():
            faults = {
                "t-retry": [fired],
                "t-give-up": [fired, {"kind": "hang", "applicable": True, "fired": False}],
                "t-broken": [{"kind": "missing_dir", "applicable": False, "fired": False}],
            }.get(e.task)
            if faults:
                store.update_episode(e.id, metadata={**e.metadata, "faults": faults})
    summary = analyze_run(run_dir).stores[0].overall
    assert summary.recovery_by_fault == {
        "transient": {
            "episodes": 2,
            "passed": 1,
            "pass_rate": 0.5,
            "met_error": 2,
            "recovered": 1,
            "recovery_rate": 0.5,
        }
    }


async def test_declared_required_tools_give_coverage(tmp_path, tiny_model_dir):
    """A task's `[metadata] required_tools` reaches the episode's payload and is the need coverage is measured
    against, without a reference run."""
    from openforge.rollout.episode import task_payload
    from openforge.tasks import parse_task_toml

    config, errors = parse_task_toml('[metadata]\nrequired_tools = ["shell", "read"]\n')
    assert not errors and config.metadata.required_tools == ["shell", "read"]
    assert parse_task_toml('[metadata]\nrequired_tools = ["telepathy"]\n')[1]  # unknown kinds are named errors

    from types import SimpleNamespace

    task = SimpleNamespace(
        id="t-readback",
        instruction="scenario: readback",
        split=None,
        family=None,
        config=config,
        solve_script=None,
        look_script=None,
        check_script=None,
        path=tmp_path,  # no solution/actions.json there
        gui=None,
    )  # the fields task_payload reads
    payload = task_payload(task, get_adapter("react")).to_json()
    assert payload["required_tools"] == ["shell", "read"]
    async with in_process_proxy(tmp_path / "run", tiny_model_dir, POLICY) as proxy:
        episode_id, key = await proxy.new_episode(task=payload, harness="react")
        client = proxy.openai(key)
        messages = [{"role": "user", "content": "scenario: readback"}]
        reply = (await client.chat.completions.create(model="tiny", messages=messages, tools=TOOLS)).choices[0].message
        proxy.service.registry.end(episode_id)
        proxy.store.update_episode(
            episode_id,
            outcome=Outcome.passed,
            reward=1.0,
            metadata={**proxy.store.get_episode(episode_id).metadata, "final": True},
        )
    assert reply.tool_calls
    episode = analyze_run(tmp_path / "run").stores[0].episodes[0]
    assert episode.kinds_used == ["shell"] and episode.coverage == 0.5
