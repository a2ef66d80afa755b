"""The real `claude`, `codex` and `openclaw` binaries receive a reply's first piece while the rest is still being
generated: the proxy runs the gated policy (tests/policies/gated_stream.py), which holds its reply half-written
until a gate file appears; a relay between the harness and the proxy opens the gate when the first piece has
passed through it on the harness's own connection. A proxy that sent nothing before the reply was complete
would never open it (the policy then records a time-out and the test fails)."""

from __future__ import annotations

import pytest

from openforge.harness import LaunchContext, get_adapter
from openforge.harness.base import run_local
from openforge.store import TrajectoryStore
from support.harness_bundle import harness_bundle
from support.paths import POLICIES
from support.proxy_process import start_proxy
from support.tap import Tap

POLICY = POLICIES / "gated_stream.py"


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, tiny_model_dir):
    p = start_proxy(tmp_path_factory.mktemp("harness-stream-run"), tiny_model_dir, f"scripted:{POLICY}")
    yield p
    p.stop()


@pytest.mark.parametrize("harness", ["claude-code", "codex", "openclaw"])
def test_real_harness_receives_the_stream_while_it_is_generated(harness, proxy, tmp_path):
    adapter = get_adapter(harness)
    bundle = harness_bundle()
    gate = tmp_path / "gate"
    episode = proxy.new_episode(task="stream", harness=harness)
    host, _, port = proxy.url.removeprefix("http://").rpartition(":")
    # The marker: the last letters of the first piece, as the tiny model's tokens stream them one delta each.
    tap = Tap((host, int(port)), b'"E"', lambda: gate.write_text("open"))
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    try:
        launch = adapter.launch(
            LaunchContext(bundle, home, work, tap.url, episode["key"], "tiny", f"Reply with text only. GATE={gate}")
        )
        result = run_local(launch, adapter, timeout=240)
    finally:
        tap.close()
        gate.write_text("open")  # never leave the policy waiting
    assert result.returncode == 0 and not result.timed_out, (result.stdout[-3000:], result.stderr[-3000:])
    assert (tmp_path / "gate.released").exists() and not (tmp_path / "gate.timeout").exists()
    assert tap.fired.is_set()
    with TrajectoryStore.open(proxy.run) as store:
        calls = [c for c in store.list_calls(episode["episode_id"]) if not c.side_call]
    assert calls and all(c.call_error is None and c.metadata.get("streamed") for c in calls)
    assert "FIRST-PIECE second piece." in (result.stdout + result.stderr) or calls[0].output_ids
