"""Each fault kind in Docker sandboxes, through the shell hook each harness's shell sources: with the react
harness every kind, with the real Claude Code, Codex and OpenClaw binaries a transient failure and a
read-only file. The fault fires at the agent's first command and is recorded on the episode; the recorded
model calls are what the harness sent (the fault reaches the model only as the tool result)."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import unavailable
from openforge.core import Outcome
from openforge.dialects import DIALECTS
from openforge.harness import get_adapter
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.rollout import run_rollouts
from openforge.rollout.config import RolloutConfig
from openforge.store import TrajectoryStore
from support.paths import POLICIES
from support.rollout import IMAGE_MAP

POLICY = POLICIES / "fault_recovery.py"
MESSAGES = {
    "transient": "bash: fork: Resource temporarily unavailable",
    "missing_dir": "cfg/app.ini: No such file or directory",
    "permission": "cfg/app.ini: Permission denied",
    "disk_full": "cfg/app.ini: No space left on device",
    "hang": "",  # each harness words its own timeout
    "flaky_service": "svc: error: failed to connect to the service: Connection refused",
}


def service_task(root: Path) -> Path:
    """Append what the task's service answers (`svc get k`) to cfg/app.ini, which exists and is empty."""
    d = root / "svc-append"
    for sub in ("environment", "tests", "solution"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text("Append what `svc get k` prints to cfg/app.ini.\n")
    (d / "task.toml").write_text(
        'version = "1.0"\n[metadata]\nid = "svc-append"\n'
        'fault_targets = { missing_dir = "cfg", permission = "cfg/app.ini", service = "svc" }\n'
        "[verifier]\ntimeout_sec = 30.0\n[agent]\ntimeout_sec = 600\n"
        "[environment]\ncpus = 1\nmemory_mb = 512\npids_limit = 128\n"
    )
    (d / "environment" / "Dockerfile").write_text(
        "FROM debian:bookworm-slim\nWORKDIR /app\n"
        "RUN mkdir -p cfg && touch cfg/app.ini cfg/.keep && chown -R 1000:1000 /app "
        "&& printf '#!/bin/sh\\necho k=42\\n' > /usr/local/bin/svc && chmod 755 /usr/local/bin/svc\n"
    )
    (d / "tests" / "test.sh").write_text(
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        '[ "$(cat /app/cfg/app.ini)" = "k=42" ] && echo 1 > /logs/verifier/reward.txt '
        "|| echo 0 > /logs/verifier/reward.txt\n"
    )
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\nsvc get k >> cfg/app.ini\n")
    return root


async def _episode(tmp_path, model, harness: str, kind: str, **react_options):
    tasks = service_task(tmp_path / "tasks")
    config = RolloutConfig(
        tasks=[tasks],
        harnesses=[harness],
        sandbox="docker",
        model=model,
        backend=f"scripted:{POLICY}",
        run=tmp_path / "run",
        image_map=IMAGE_MAP,
        max_attempts=1,
        faults=f"{kind}:1",
        harness_options={"react": {"max_steps": 5, **react_options}},
    )
    await run_rollouts(config)
    with TrajectoryStore.open(tmp_path / "run") as store:
        (episode,) = store.list_episodes()
        calls = [c for c in store.list_calls(episode.id) if not c.side_call]
    return episode, calls


def _check(episode, calls, harness: str, kind: str, tiny_model) -> str:
    (record,) = episode.metadata["faults"]
    assert record["kind"] == kind and record["applicable"] and record["fired"], (record, episode.outcome_reason)
    assert record["command"] == 1
    dialect = DIALECTS[get_adapter(harness).dialect]
    for call in calls:  # what the harness sent, rendered; the fault is not in any of it but a tool result
        assert tiny_model.decode(call.prompt_ids) == tiny_model.render_text(
            dialect.decode(call.request_body).conversation
        )
    conversation = dialect.decode(calls[1].request_body).conversation
    first = next(m.content for m in conversation.messages if m.role == "tool")
    assert MESSAGES[kind] in first, first
    return first


@pytest.mark.parametrize("kind", list(MESSAGES))
async def test_each_fault_fires_in_docker_with_react(docker_ready, tmp_path, tiny_model_dir, tiny_model, kind):
    episode, calls = await _episode(tmp_path, tiny_model_dir, "react", kind, command_timeout_s=3)
    first = _check(episode, calls, "react", kind, tiny_model)
    if kind == "hang":
        assert "[command timed out after 3 s]" in first  # react's own command timeout fired
    assert episode.outcome == Outcome.passed, (episode.outcome_reason, first)


@pytest.mark.parametrize("harness", ["claude-code", "codex", "openclaw"])
@pytest.mark.parametrize("kind", ["transient", "permission"])
async def test_real_harnesses_meet_faults_in_docker(docker_ready, tmp_path, tiny_model_dir, tiny_model, harness, kind):
    if not bundle_status(default_bundle_dir()).get(harness):
        unavailable(f"{harness} is not in the harness bundle: run `openforge harness install`")
    episode, calls = await _episode(tmp_path, tiny_model_dir, harness, kind)
    _check(episode, calls, harness, kind, tiny_model)
    assert episode.outcome == Outcome.passed, episode.outcome_reason
