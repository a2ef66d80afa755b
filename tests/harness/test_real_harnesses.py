"""The real `claude`, `codex` and `openclaw` binaries (and the built-in `react` harness) against the real
proxy, driven by a scripted policy.

Each completes a task that needs two tool calls, where the second call's arguments carry a nonce that the
policy read out of the first tool *result* as the proxy decoded it. Then, from the store: Claude Code and
Codex episodes have zero continuity breaks; OpenClaw's breaks carry the named reason only; every spliced
prompt decodes to the same text as rendering that call's conversation from scratch.
"""

from __future__ import annotations

import pytest

from openforge.dialects import DIALECTS
from openforge.harness import LaunchContext, get_adapter
from openforge.harness.base import run_local
from openforge.store import TrajectoryStore
from support.harness_bundle import harness_bundle
from support.paths import POLICIES
from support.proxy_process import start_proxy

POLICY = POLICIES / "nonce_harness.py"
HARNESSES = ["react", "claude-code", "codex", "openclaw"]
ALLOWED_BREAKS = {"react": set(), "claude-code": set(), "codex": set(), "openclaw": {"context_message_moved"}}


@pytest.fixture(scope="module")
def proxy(tmp_path_factory, tiny_model_dir):
    p = start_proxy(tmp_path_factory.mktemp("harness-run"), tiny_model_dir, f"scripted:{POLICY}")
    yield p
    p.stop()


@pytest.mark.parametrize("harness", HARNESSES)
def test_real_harness_through_the_proxy(harness, proxy, tmp_path, tiny_model):
    adapter = get_adapter(harness)
    bundle = harness_bundle() if adapter.component else tmp_path  # the built-in react harness needs no bundle
    episode = proxy.new_episode(task="nonce", harness=harness)
    work, home = tmp_path / "work", tmp_path / "home"
    work.mkdir()
    home.mkdir()
    launch = adapter.launch(
        LaunchContext(
            bundle, home, work, proxy.url, episode["key"], "tiny", "Make a nonce, then save it to result.txt."
        )
    )
    result = run_local(launch, adapter, timeout=240)
    assert result.returncode == 0 and not result.timed_out, (result.stdout[-3000:], result.stderr[-3000:])
    proxy.end_episode(episode["episode_id"])

    nonce = (work / "nonce.txt").read_text().strip()
    assert len(nonce) == 12
    assert (work / "result.txt").read_text().strip() == nonce  # read from the first tool result

    with TrajectoryStore.open(proxy.run) as store:
        calls = [c for c in store.list_calls(episode["episode_id"]) if not c.side_call]
    assert len(calls) >= 3 and all(c.call_error is None for c in calls)
    breaks = {c.break_reason for c in calls[1:] if c.break_reason}
    assert breaks <= ALLOWED_BREAKS[harness], breaks
    for prev, nxt in zip(calls, calls[1:]):
        if nxt.break_reason is None and nxt.segment == prev.segment:
            assert nxt.prompt_ids[: len(prev.prompt_ids) + len(prev.output_ids)] == prev.prompt_ids + prev.output_ids
    if harness != "openclaw":
        assert {c.segment for c in calls} == {0}
    dialect = DIALECTS[adapter.dialect]
    for call in calls:
        conversation = dialect.decode(call.request_body).conversation
        assert tiny_model.decode(call.prompt_ids) == tiny_model.render_text(conversation), call.index
