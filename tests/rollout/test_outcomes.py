"""Which failures are the agent's and which the infrastructure's (`openforge.rollout.outcome`): a policy must not
escape a bad reward by hanging or crashing. The rule as a table, then both sides of it through the real
orchestrator in the local sandbox (react harness, scripted policies), and through the in-process family path;
and the agent's key reaching nothing during grading (the verifier runs in a grader without network)."""

from __future__ import annotations

import dataclasses

import pytest

from openforge.core import Outcome
from openforge.harness.react import ReactAdapter
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.store import TrajectoryStore
from support.paths import POLICIES
from support.rollout import IMAGE_MAP, make_task

CHAOS = POLICIES / "rollout_chaos.py"


def run(**kw) -> dict:
    """An `AgentRun`'s fields: a harness that exited 0 after the model had answered twice, unless said otherwise."""
    return {**dict(harness="react", exit_code=0, timed_out=False, timeout_s=60.0, answered_calls=2), **kw}


@pytest.mark.parametrize(
    "agent_run, outcome, reason",
    [
        (run(), None, None),  # graded by the verifier
        (run(timed_out=True, exit_code=-1), Outcome.failed, "agent timeout: the harness ran past 60s"),
        (run(exit_code=137), Outcome.failed, "agent: react exited 137 after the model's last reply"),
        (run(exit_code=137, oom_killed=True), Outcome.failed, "hit the sandbox's memory limit"),
        (
            run(exit_code=3, infrastructure_error="the model API failed: 502"),
            Outcome.harness_crash,
            "the model API failed",
        ),
        (run(failed_call="backend on fire", exit_code=3), Outcome.proxy_error, "model call failed: backend on fire"),
        (run(failed_call="backend on fire", timed_out=True), Outcome.proxy_error, "backend on fire"),
        (
            run(sandbox_alive=False, sandbox_reason="container gone", exit_code=137),
            Outcome.sandbox_error,
            "container gone",
        ),
        (run(sandbox_alive=False, sandbox_reason="container gone", timed_out=True), Outcome.sandbox_error, "died"),
        (run(answered_calls=0, exit_code=127), Outcome.harness_crash, "react exited 127"),
        (run(answered_calls=0), Outcome.harness_crash, "never called the model"),
        (run(answered_calls=0, timed_out=True), Outcome.timeout, "before the model answered once"),
        (run(answered_calls=0, exit_code=137, oom_killed=True), Outcome.sandbox_error, "out of memory"),
    ],
)
def test_the_rule(agent_run, outcome, reason):
    from openforge.rollout.outcome import AgentRun, classify_agent_run

    got = classify_agent_run(AgentRun(**agent_run))
    if outcome is None:
        assert got is None
    else:
        assert got is not None and got[0] == outcome and reason in got[1], got


def test_react_tells_its_own_api_failures_from_the_agents():
    react = ReactAdapter()
    assert react.infrastructure_error(3, "", "react: model API unreachable or malformed reply: refused")
    assert react.infrastructure_error(3, "", "react: model API answered 401: bad key")
    # the API refused what the agent's conversation had become (context exhausted, body too large)
    assert react.infrastructure_error(3, "", "react: model API answered 400: prompt too long") is None
    assert react.infrastructure_error(3, "", "react: model API answered 413: too large") is None
    assert react.infrastructure_error(137, "", "Killed") is None  # anything else: the agent's doing


def _config(tmp_path, tiny_model_dir, tasks, **kw) -> RolloutConfig:
    return RolloutConfig(
        tasks=[tasks],
        harnesses=["react"],
        sandbox="local",
        model=tiny_model_dir,
        backend=f"scripted:{CHAOS}",
        run=tmp_path / "run",
        image_map=IMAGE_MAP,
        max_attempts=1,
        sandbox_options={"root": str(tmp_path / "sandboxes")},
        **kw,
    )


async def test_hanging_or_crashing_is_the_agents_failure_infrastructure_is_not(local_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    for task_id in ("hang", "kill-harness", "proxy-fail", "late-caller"):
        make_task(tasks, task_id)
    late_verifier = (
        "python3 -I - <<'PY'\n"
        "import json, urllib.request, urllib.error\n"
        "key = open('/app/key.txt').read().strip()\n"
        "body = json.dumps({'model': 'm', 'messages': [{'role': 'user', 'content': 'late'}]}).encode()\n"
        "req = urllib.request.Request('http://127.0.0.1:8100/v1/chat/completions', data=body,\n"
        "                             headers={'authorization': 'Bearer ' + key, 'content-type': 'application/json'})\n"
        "try:\n    urllib.request.urlopen(req, timeout=20); code = 200\n"
        "except urllib.error.HTTPError as e:\n    code = e.code\n"
        "except OSError:\n    code = 0\n"
        "print('late call answered', code)\n"
        "open('/logs/verifier/reward.txt', 'w').write('1' if code == 0 else '0')\n"
        "PY\n"
    )
    (tasks / "late-caller" / "tests" / "test.sh").write_text("#!/bin/bash\nmkdir -p /logs/verifier\n" + late_verifier)
    await run_rollouts(_config(tmp_path, tiny_model_dir, tasks, agent_timeout_s=8))
    with TrajectoryStore.open(tmp_path / "run") as store:
        episodes = {e.task: e for e in store.list_episodes()}
        late_calls = store.list_calls(episodes["late-caller"].id)
        flags = store.episode_flags(episodes["late-caller"].id)
    hang, killed = episodes["hang"], episodes["kill-harness"]
    # past the agent timeout: graded failed, reward 0, noted — a `sleep 600` no longer escapes a bad reward
    assert (hang.outcome, hang.reward) == (Outcome.failed, 0.0) and hang.outcome_reason.startswith("agent timeout")
    # the agent's command killed its harness: the agent's failure too
    assert (killed.outcome, killed.reward) == (Outcome.failed, 0.0)
    assert killed.outcome_reason.startswith("agent: react exited 137"), killed.outcome_reason
    # the backend failed: the infrastructure's, dropped (no reward)
    proxy_fail = episodes["proxy-fail"]
    assert proxy_fail.outcome == Outcome.proxy_error and proxy_fail.reward is None
    # grading runs in a grader without network or proxy bridge: the agent's key, carried in its work area, reaches
    # nothing (a late call that does reach the proxy is refused, recorded and flagged: tests/proxy)
    late = episodes["late-caller"]
    assert late.outcome == Outcome.passed, late.outcome_reason
    assert [c.metadata.get("late") for c in late_calls] == [None, None]
    assert "late_calls" not in late.metadata and "late_calls" not in flags


async def test_a_harness_that_never_reaches_the_model_is_the_infrastructures(local_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    make_task(tasks, "any")
    await run_rollouts(_config(tmp_path, tiny_model_dir, tasks, harness_options={"react": {"python": "python3.99"}}))
    with TrajectoryStore.open(tmp_path / "run") as store:
        (episode,) = store.list_episodes()
    assert episode.outcome == Outcome.harness_crash and episode.reward is None


async def test_family_episodes_outgrowing_the_api_are_the_agents_failure(tmp_path, tiny_model_dir):
    """In the in-process path the agent cannot kill its harness; a conversation the model API refuses (here
    past the proxy's message limit) is the agent's failure, a failing backend the infrastructure's."""
    from conftest import unavailable
    from openforge.proxy.server import ProxyConfig, running_proxy
    from openforge.rollout.family import run_family_episodes
    from openforge.sandbox import jail_available
    from openforge.tasks import QUICKSTART_FAMILIES, InstanceSampler

    ok, why = jail_available()
    if not ok:
        unavailable(f"the jail cannot run here: {why}")
    policy = tmp_path / "loop.py"
    policy.write_text(
        "import json\n"
        "def respond(conversation, call_index, task):\n"
        "    if 'fire' in str(task):\n"
        "        raise RuntimeError('the policy server is on fire')\n"
        "    call = json.dumps({'name': 'bash', 'arguments': {'command': 'true'}})\n"
        "    return '<tool_call>\\n' + call + '\\n</tool_call>'\n"
    )
    (instance,) = InstanceSampler("train", seed=3, families=QUICKSTART_FAMILIES).sample(1)
    on_fire = dataclasses.replace(instance, instruction=instance.instruction + " (fire)")
    config = ProxyConfig(
        model=tiny_model_dir,
        backend=f"scripted:{policy}",
        run=tmp_path / "run",
        listen="127.0.0.1:0",
        admin_listen="127.0.0.1:0",
        max_messages=5,
    )
    async with running_proxy(config) as proxy:
        outgrown, fire = await run_family_episodes(proxy, [instance, on_fire], react=ReactAdapter(max_steps=10))
        reasons = {e.id: e.outcome_reason for e in proxy.store.list_episodes()}
    assert (outgrown.outcome, outgrown.reward) == (Outcome.failed, 0.0)
    assert reasons[outgrown.episode_id].startswith("agent: model API answered 400")
    assert fire.outcome == Outcome.proxy_error and fire.reward is None
