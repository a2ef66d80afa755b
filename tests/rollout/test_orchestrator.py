"""The orchestrator against the real Docker daemon: every shipped task solved by the oracle through the
react harness, wrong and do-nothing policies scoring below 1, the real harnesses in containers, isolation,
failure classes, retries, Ctrl-C and --resume."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import managed_containers, unavailable
from openforge.core import Outcome
from openforge.eval.report import build_report
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.rollout import RolloutConfig, RolloutError, run_rollouts
from openforge.rollout.orchestrator import run_label
from openforge.store import TrajectoryStore
from support.paths import POLICIES
from support.rollout import EXAMPLES, IMAGE_MAP, make_task
from support.signals import default_sigint

CHAOS = POLICIES / "rollout_chaos.py"


def config(tmp_path, model_dir, **kw) -> RolloutConfig:
    kw.setdefault("tasks", [EXAMPLES])
    kw.setdefault("run", tmp_path / "run")
    kw.setdefault("backend", "oracle")
    kw.setdefault("concurrency", 4)
    return RolloutConfig(model=model_dir, sandbox="docker", image_map=IMAGE_MAP, **kw)


def finals(run: Path) -> list:
    with TrajectoryStore.open(run) as store:
        return [e for e in store.list_episodes() if e.metadata.get("final")]


async def test_oracle_through_react_solves_every_shipped_task(docker_ready, tmp_path, tiny_model_dir):
    summary = await run_rollouts(config(tmp_path, tiny_model_dir))
    episodes = finals(tmp_path / "run")
    assert summary.slots == len(episodes) >= 30
    failed = [(e.task, e.outcome, e.outcome_reason) for e in episodes if e.outcome != Outcome.passed]
    assert not failed
    with TrajectoryStore.open(tmp_path / "run") as store:
        report = build_report(store)
        assert report["pass_at_k"]["1"] == 1.0 and report["outcomes"]["passed"] == len(episodes)
        assert all(store.get_verifier_result(e.id)["reward"] == 1.0 for e in episodes)
        assert all(e.metadata["harness_version"] for e in episodes)


async def test_do_nothing_and_wrong_policies_score_below_one(docker_ready, tmp_path, tiny_model_dir):
    nothing = POLICIES / "do_nothing.json"
    summary = await run_rollouts(config(tmp_path, tiny_model_dir, backend=f"scripted:{nothing}"))
    episodes = finals(tmp_path / "run")
    assert len(episodes) == summary.slots
    assert all(e.outcome == Outcome.failed and e.reward < 1 for e in episodes), [
        (e.task, e.outcome, e.reward) for e in episodes if e.outcome != Outcome.failed or e.reward >= 1
    ]
    summary = await run_rollouts(
        config(tmp_path, tiny_model_dir, backend=f"scripted:{POLICIES / 'wrong_solution.py'}", run=tmp_path / "wrong")
    )
    episodes = finals(tmp_path / "wrong")
    assert all(e.outcome == Outcome.failed and e.reward < 1 for e in episodes), [
        (e.task, e.outcome, e.reward, e.outcome_reason) for e in episodes if e.outcome != Outcome.failed
    ]


@pytest.mark.parametrize("harness", ["claude-code", "codex", "openclaw"])
async def test_oracle_through_real_harnesses_in_containers(docker_ready, tmp_path, tiny_model_dir, harness):
    status = bundle_status(default_bundle_dir())
    if not status.get(harness):
        unavailable(f"{harness} is not in the harness bundle: run `openforge harness install`")
    ids = ["append-db-setting", "count-bash-users", "csv-top-scorer", "fix-mean", "write-json-config"]
    await run_rollouts(config(tmp_path, tiny_model_dir, harnesses=[harness], task_ids=ids, split="heldout"))
    episodes = finals(tmp_path / "run")
    assert sorted(e.task for e in episodes) == sorted(ids)
    assert all(e.outcome == Outcome.passed for e in episodes), [(e.task, e.outcome, e.outcome_reason) for e in episodes]
    with TrajectoryStore.open(tmp_path / "run") as store:
        for e in episodes:
            assert e.metadata["harness_version"] == status[harness]
            calls = [c for c in store.list_calls(e.id) if not c.side_call]
            assert len(calls) >= 2 and all(c.dialect for c in calls)
            # the harness's time split: launch to first call (its start), the calls, the rest (its tools)
            t = e.metadata["timings"]
            assert 0 < t["harness_start_s"] and 0 < t["model_s"] and t["harness_start_s"] + t["model_s"] < t["agent_s"]
            assert t["harness_start_s"] < min(c.started_at for c in calls) - e.created_at


async def test_sandbox_isolation_seen_from_inside(docker_ready, tmp_path, tiny_model_dir, monkeypatch):
    tasks = tmp_path / "tasks"
    make_task(tasks, "probe")
    run = tmp_path / "run"
    # the admin listener's port on the host; from inside, 127.0.0.1 is the container's own loopback
    import openforge.proxy.server as server

    original = server.running_proxy

    def spying(cfg):
        ctx = original(cfg)

        class Wrapped:
            async def __aenter__(self):
                proxy = await ctx.__aenter__()
                monkeypatch.setenv("CHAOS_ADMIN_PORT", proxy.admin_url.rsplit(":", 1)[1])
                return proxy

            async def __aexit__(self, *exc):
                return await ctx.__aexit__(*exc)

        return Wrapped()

    monkeypatch.setattr("openforge.rollout.orchestrator.running_proxy", spying)
    await run_rollouts(config(tmp_path, tiny_model_dir, tasks=[tasks], backend=f"scripted:{CHAOS}", run=run))
    (episode,) = finals(run)
    with TrajectoryStore.open(run) as store:
        last = store.list_calls(episode.id)[-1]
    from openforge.dialects import DIALECTS

    seen = next(
        m.content
        for m in DIALECTS["chat_completions"].decode(last.request_body).conversation.messages
        if m.role == "tool"
    )
    assert seen.splitlines()[0] == "NET:lo", seen  # no network interface but loopback
    assert "TESTS:absent" in seen  # the tests enter only after the harness exits
    assert "ADMIN:unreachable" in seen
    assert episode.outcome == Outcome.failed  # done.txt was never made: graded, reward 0


async def test_failure_classes(docker_ready, tmp_path, tiny_model_dir, monkeypatch):
    tasks = tmp_path / "tasks"
    make_task(tasks, "kill-container")
    make_task(tasks, "hang")
    make_task(tasks, "verifier-crash", test_sh="echo 'assertion machinery broke' >&2\nexit 3\n")
    make_task(tasks, "oom", memory_mb=256)
    make_task(tasks, "forkbomb")
    make_task(tasks, "proxy-fail")
    make_task(tasks, "kill-harness")
    run = tmp_path / "run"
    monkeypatch.setenv("CHAOS_RUN_LABEL", run_label(run))
    await run_rollouts(
        config(
            tmp_path,
            tiny_model_dir,
            tasks=[tasks],
            backend=f"scripted:{CHAOS}",
            run=run,
            concurrency=1,
            max_attempts=1,
            agent_timeout_s=15,
        )
    )
    outcomes = {e.task: (e.outcome, e.outcome_reason, e.metadata) for e in finals(run)}
    assert outcomes["kill-container"][0] == Outcome.sandbox_error, outcomes["kill-container"]
    # the agent's own hang or crash is its failure (reward 0), never an infrastructure failure to hide behind
    assert outcomes["hang"][0] == Outcome.failed and outcomes["hang"][1].startswith("agent timeout:")
    assert outcomes["kill-harness"][0] == Outcome.failed and outcomes["kill-harness"][1].startswith(
        "agent: react exited"
    )
    assert outcomes["verifier-crash"][0] == Outcome.verifier_error
    assert "exited 3" in outcomes["verifier-crash"][1]
    # the agent's own command was OOM-killed; the harness survived and the episode was graded
    assert outcomes["oom"][0] == Outcome.failed and outcomes["oom"][2]["transcript"].get("oom_killed")
    assert outcomes["forkbomb"][0] == Outcome.failed, outcomes["forkbomb"]
    assert outcomes["proxy-fail"][0] == Outcome.proxy_error and "on fire" in outcomes["proxy-fail"][1]
    with TrajectoryStore.open(run) as store:
        report = build_report(store)
    assert report["graded"] == 4  # oom, hang, forkbomb, kill-harness; infrastructure failures are not samples
    assert report["outcomes"]["timeout"] == 0
    assert not [n for n in managed_containers() if run_label(run) in n]


async def test_harness_crash_is_retried_then_final(docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    make_task(tasks, "any")
    run = tmp_path / "run"
    await run_rollouts(
        config(
            tmp_path,
            tiny_model_dir,
            tasks=[tasks],
            run=run,
            max_attempts=2,
            harness_options={"react": {"python": "python3.99"}},
        )
    )
    with TrajectoryStore.open(run) as store:
        episodes = store.list_episodes()
    assert [e.attempt for e in episodes] == [0, 1]
    assert all(e.outcome == Outcome.harness_crash for e in episodes)
    assert [e.metadata["final"] for e in episodes] == [False, True]


async def test_run_directory_in_use_needs_resume(docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    make_task(tasks, "one")
    await run_rollouts(config(tmp_path, tiny_model_dir, tasks=[tasks]))
    with pytest.raises(RolloutError, match="--resume"):
        await run_rollouts(config(tmp_path, tiny_model_dir, tasks=[tasks]))
    summary = await run_rollouts(config(tmp_path, tiny_model_dir, tasks=[tasks], resume=True))
    assert summary.skipped == 1 and summary.done == 0


LIBRARY_RUN = """
import sys
from pathlib import Path
from rich.console import Console
from openforge.rollout import RolloutConfig
from openforge.rollout.run import run_episodes
tasks, model, policy, run = map(Path, sys.argv[1:])
config = RolloutConfig(tasks=[tasks], harnesses=["react"], sandbox="docker", concurrency=2, model=model,
                       backend=f"scripted:{policy}", run=run,
                       image_map={"debian:bookworm-slim": "openforge-base:bookworm"})
run_episodes(config, Console())
"""


def test_a_library_callers_sigterm_leaves_no_sandbox(docker_ready, tmp_path, tiny_model_dir):
    """A script that runs episodes through the library (not the CLI, which installs its own handler) and is
    sent SIGTERM (kill, a job scheduler) stops as on Ctrl-C: its sandboxes are removed, nothing is left running."""
    tasks, run = tmp_path / "tasks", tmp_path / "run"
    for i in range(12):
        make_task(tasks, f"slow-{i}")
    argv = [sys.executable, "-c", LIBRARY_RUN, str(tasks), str(tiny_model_dir), str(POLICIES / "slow_then_done.py")]
    proc = subprocess.Popen([*argv, str(run)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and not ((run / "trajectories.db").exists() and finals(run)):
        time.sleep(0.5)
    assert proc.poll() is None, proc.stdout.read().decode()
    assert [n for n in managed_containers() if run_label(run) in n]  # the run's sandboxes are up
    proc.send_signal(signal.SIGTERM)
    out, _ = proc.communicate(timeout=120)
    assert "RolloutInterrupted" in out.decode(), out.decode()[-2000:]
    assert not [n for n in managed_containers() if run_label(run) in n]
    assert len(finals(run)) < 12


def communicate_or_dump(proc: subprocess.Popen, timeout: float) -> bytes:
    """The output of an `openforge` command that exits within `timeout`; a hung one is failed with its threads'
    stacks (its SIGUSR1 dump) and killed."""
    try:
        return proc.communicate(timeout=timeout)[0]
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGUSR1)
        time.sleep(2)
        proc.kill()
        out = proc.communicate()[0].decode(errors="replace")
        pytest.fail(f"the command did not exit {timeout:g} s after the signal; its threads:\n{out[-12000:]}")


@pytest.mark.parametrize("stop", [signal.SIGINT, signal.SIGTERM], ids=["ctrl-c", "sigterm"])
def test_ctrl_c_leaves_nothing_and_resume_finishes(stop, docker_ready, tmp_path, tiny_model_dir):
    tasks = tmp_path / "tasks"
    # 12 slow episodes, 2 at a time (~20 s): room for the interrupt to land mid-run on a loaded machine (with 8,
    # a CI run under load once finished all of them before the signal arrived)
    for i in range(12):
        make_task(tasks, f"slow-{i}")
    run = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "openforge.cli",
        "rollout",
        "--tasks",
        str(tasks),
        "--harness",
        "react",
        "--sandbox",
        "docker",
        "--concurrency",
        "2",
        "--model",
        str(tiny_model_dir),
        "--backend",
        f"scripted:{POLICIES / 'slow_then_done.py'}",
        "--run",
        str(run),
        "--image-map",
        "debian:bookworm-slim=openforge-base:bookworm",
    ]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        time.sleep(0.5)
        if (run / "trajectories.db").exists() and len(finals(run)) >= 2:
            break
    assert proc.poll() is None, proc.stdout.read().decode()
    proc.send_signal(stop)  # SIGTERM is handled as Ctrl-C
    out = communicate_or_dump(proc, 120)
    assert proc.returncode == 130, out.decode()[-2000:]
    assert not [n for n in managed_containers() if run_label(run) in n]
    before = {e.metadata["slot"]: e.id for e in finals(run)}
    assert 2 <= len(before) < 12
    done = subprocess.run(argv + ["--resume"], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    after = {e.metadata["slot"]: e.id for e in finals(run)}
    assert len(after) == 12
    assert all(after[slot] == episode_id for slot, episode_id in before.items())  # nothing redone
