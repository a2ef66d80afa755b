"""Behaviour metrics on episodes of the real `claude`, `codex` and `openclaw` binaries (and `react`), recorded
by the real proxy: each harness reports a failed command its own way (Claude Code's `is_error` flag, Codex's
`Process exited with code N`, OpenClaw's `(Command exited with code N)`, react's `[exit code N]`), and the
analysis must read every one as a failure through the adapter's taxonomy."""

from __future__ import annotations

from openforge.analysis import analyze_run
from openforge.core import Outcome
from openforge.harness import LaunchContext, get_adapter
from openforge.harness.base import run_local
from openforge.store import TrajectoryStore
from support.harness_bundle import harness_bundle
from support.paths import POLICIES
from support.proxy_process import start_proxy

HARNESSES = ["react", "claude-code", "codex", "openclaw"]


def test_error_recovery_and_self_verification_in_every_harness(tmp_path, tiny_model_dir):
    bundle = harness_bundle()
    proxy = start_proxy(tmp_path / "run", tiny_model_dir, f"scripted:{POLICIES / 'fail_write_check.py'}")
    try:
        for harness in HARNESSES:
            adapter = get_adapter(harness)
            episode = proxy.new_episode(task="fail-write-check", harness=harness)
            work, home = tmp_path / harness / "work", tmp_path / harness / "home"
            work.mkdir(parents=True)
            home.mkdir()
            launch = adapter.launch(
                LaunchContext(
                    bundle if adapter.component else tmp_path,
                    home,
                    work,
                    proxy.url,
                    episode["key"],
                    "tiny",
                    "Write hello to out.txt.",
                )
            )
            result = run_local(launch, adapter, timeout=240)
            assert result.returncode == 0, (harness, result.stderr[-2000:])
            proxy.end_episode(episode["episode_id"])
            assert (work / "out.txt").read_text() == "hello\n"
            with TrajectoryStore.open(proxy.run) as store:
                store.update_episode(
                    episode["episode_id"], outcome=Outcome.passed, reward=1.0, metadata={"final": True}
                )
    finally:
        proxy.stop()

    store = analyze_run(tmp_path / "run").stores[0]
    assert set(store.per_harness) == set(HARNESSES)
    for e in store.episodes:
        assert e.tool_steps == 3 and e.failed_steps == 1, e
        assert e.met_error and e.continued_after_error and e.recovered, e
        assert e.wrote and e.self_verified, e
        assert e.tool_mix == {"shell": 3}, e
        assert e.parse_errors == 0 and e.breaks == (0 if e.harness != "openclaw" else e.breaks)
    assert store.overall.recovery_rate == 1.0 and store.overall.shell_share == 1.0
