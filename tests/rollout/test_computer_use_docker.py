"""The shipped GUI tasks (examples/gui-tasks) through the built-in computer-use harness and through OpenClaw's
browser tool (the real binary from the bundle, its managed Chromium) in real Docker sandboxes, as `openforge eval`
runs them: the oracle's demonstrations (solution/actions.json, through the harness's GUI tools only) score 1.0 on
every task, a policy that does nothing scores 0.0, and nothing is left running (the `docker_ready` fixture checks
the containers). The analysis reads the GUI steps with their kinds. The shipped desktop tasks
(examples/desktop-tasks: Xvfb, GTK and AT-SPI in the desktop image, the task's desktop server) the same way
through computer-use."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import unavailable
from openforge.analysis.trace import trace_calls
from openforge.core import Outcome
from openforge.harness import get_adapter
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.harness.tools import ToolKind
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.store import TrajectoryStore
from support.paths import REPO

pytestmark = pytest.mark.timeout(1800)  # four sandboxes and graders per run, on a loaded 2-core machine

GUI_TASKS = REPO / "examples" / "gui-tasks"
TASK_IDS = ["order-cheapest-keyboard", "ship-pending-order", "swap-featured-mouse", "update-customer-city"]
DESKTOP_TASKS = REPO / "examples" / "desktop-tasks"
DESKTOP_IDS = ["add-new-contact", "favorite-work-contact", "same-city-as-colleague"]


@pytest.fixture(scope="module")
def gui_image(docker_ready):
    r = subprocess.run(["bash", str(REPO / "scripts/build-gui-image.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        unavailable(f"cannot build the GUI image openforge-gui:bookworm: {r.stderr[-2000:]}")


@pytest.fixture(scope="module")
def desktop_image(docker_ready):
    r = subprocess.run(["bash", str(REPO / "scripts/build-gui-image.sh"), "--desktop"], capture_output=True, text=True)
    if r.returncode != 0:
        unavailable(f"cannot build the desktop image openforge-desktop:bookworm: {r.stderr[-2000:]}")


def _config(
    tmp_path, model, backend, name, task_ids=TASK_IDS, harness="computer-use", tasks=GUI_TASKS, **kw
) -> RolloutConfig:
    return RolloutConfig(
        tasks=[tasks],
        task_ids=task_ids,
        harnesses=[harness],
        sandbox="docker",
        model=model,
        backend=backend,
        run=tmp_path / name,
        max_attempts=1,
        concurrency=2,
        **kw,
    )


async def test_the_oracle_solves_every_shipped_gui_task_through_computer_use(gui_image, tmp_path, tiny_model_dir):
    await run_rollouts(_config(tmp_path, tiny_model_dir, "oracle", "oracle"))
    adapter = get_adapter("computer-use")
    with TrajectoryStore.open(tmp_path / "oracle") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
        assert sorted(e.task for e in episodes) == TASK_IDS
        assert all(e.outcome == Outcome.passed and e.reward == 1.0 for e in episodes), [
            (e.task, e.outcome, e.outcome_reason) for e in episodes
        ]
        for e in episodes:
            demonstration = json.loads((GUI_TASKS / e.task / "solution" / "actions.json").read_text())
            steps = trace_calls(store.list_calls(e.id), adapter).steps
            assert [s.name for s in steps] == [a["tool"] for a in demonstration] + ["done"]
            assert not any(s.failed for s in steps)
            assert {s.kind for s in steps} <= {ToolKind.interact, ToolKind.navigate, ToolKind.other}
            assert e.metadata["transcript"]["browser_start_s"] > 0


async def test_a_policy_that_does_nothing_scores_0(gui_image, tmp_path, tiny_model_dir):
    policy = tmp_path / "noop.json"
    policy.write_text(json.dumps({"turns": ["I am done."]}))
    await run_rollouts(_config(tmp_path, tiny_model_dir, f"scripted:{policy}", "noop", TASK_IDS[:2]))
    with TrajectoryStore.open(tmp_path / "noop") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
    assert sorted(e.task for e in episodes) == TASK_IDS[:2]
    assert all(e.outcome == Outcome.failed and e.reward == 0.0 for e in episodes), [
        (e.task, e.outcome, e.outcome_reason) for e in episodes
    ]


async def test_the_oracle_solves_every_shipped_desktop_task_and_doing_nothing_scores_0(
    desktop_image, tmp_path, tiny_model_dir
):
    await run_rollouts(_config(tmp_path, tiny_model_dir, "oracle", "oracle", DESKTOP_IDS, tasks=DESKTOP_TASKS))
    adapter = get_adapter("computer-use")
    with TrajectoryStore.open(tmp_path / "oracle") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
        assert sorted(e.task for e in episodes) == DESKTOP_IDS
        assert all(e.outcome == Outcome.passed and e.reward == 1.0 for e in episodes), [
            (e.task, e.outcome, e.outcome_reason) for e in episodes
        ]
        for e in episodes:
            demonstration = json.loads((DESKTOP_TASKS / e.task / "solution" / "actions.json").read_text())
            calls = [c for c in store.list_calls(e.id) if not c.side_call]
            offered = {t["function"]["name"] for t in json.loads(calls[0].request_body)["tools"]}
            assert offered == {"snapshot", "click", "type", "select", "key", "scroll", "done"}  # no navigate
            first = json.loads(calls[0].request_body)["messages"][-1]["content"]
            assert 'window "Contacts"' in first and '[1] combobox "Contact"' in first  # the desktop's tree
            steps = trace_calls(calls, adapter).steps
            assert [s.name for s in steps] == [a["tool"] for a in demonstration] + ["done"]
            assert not any(s.failed for s in steps)
    # the screenshot observation: each action answered with the desktop's PNG (the oracle asks for the text too)
    shots = _config(
        tmp_path,
        tiny_model_dir,
        "oracle",
        "shots",
        DESKTOP_IDS[1:2],
        tasks=DESKTOP_TASKS,
        harness_options={"computer-use": {"observation": "screenshot"}},
    )
    await run_rollouts(shots)
    with TrajectoryStore.open(tmp_path / "shots") as store:
        (episode,) = [e for e in store.list_episodes() if e.metadata.get("final")]
        assert episode.outcome == Outcome.passed and episode.reward == 1.0, episode.outcome_reason
        results = [m for c in store.list_calls(episode.id) for m in json.loads(c.request_body)["messages"][-1:]]
        images = [p for m in results if isinstance(m["content"], list) for p in m["content"] if "image_url" in p]
        assert images and all(p["image_url"]["url"].startswith("data:image/png;base64,iVBOR") for p in images)
    policy = tmp_path / "noop.json"
    policy.write_text(json.dumps({"turns": ["I am done."]}))
    await run_rollouts(
        _config(tmp_path, tiny_model_dir, f"scripted:{policy}", "noop", DESKTOP_IDS[:1], tasks=DESKTOP_TASKS)
    )
    with TrajectoryStore.open(tmp_path / "noop") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
    assert [e.task for e in episodes] == DESKTOP_IDS[:1]
    assert all(e.outcome == Outcome.failed and e.reward == 0.0 for e in episodes), [
        (e.task, e.outcome, e.outcome_reason) for e in episodes
    ]


@pytest.fixture(scope="module")
def openclaw_bundle():
    if not bundle_status(default_bundle_dir()).get("openclaw"):
        unavailable("openclaw is not in the harness bundle: run `openforge harness install`")


# OpenClaw starts in ~12 s on an idle 2-core machine, several times that on a loaded one, and its first browser
# action starts Chromium: more than a GUI task's 300 s can be
OPENCLAW_TIMEOUT_S = 900


async def test_the_oracle_solves_every_shipped_gui_task_through_openclaws_browser(
    gui_image, openclaw_bundle, tmp_path, tiny_model_dir
):
    config = _config(
        tmp_path, tiny_model_dir, "oracle", "oracle", harness="openclaw", agent_timeout_s=OPENCLAW_TIMEOUT_S
    )
    await run_rollouts(config)
    adapter = get_adapter("openclaw")
    with TrajectoryStore.open(tmp_path / "oracle") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
        assert sorted(e.task for e in episodes) == TASK_IDS
        assert all(e.outcome == Outcome.passed and e.reward == 1.0 for e in episodes), [
            (e.task, e.outcome, e.outcome_reason) for e in episodes
        ]
        for e in episodes:
            demonstration = json.loads((GUI_TASKS / e.task / "solution" / "actions.json").read_text())
            calls = [c for c in store.list_calls(e.id) if not c.side_call]
            # its browser tool and nothing else: no shell, no files, no web fetch
            offered = [[t["function"]["name"] for t in json.loads(c.request_body)["tools"]] for c in calls]
            assert offered == [["browser"]] * len(calls)
            steps = trace_calls(calls, adapter).steps
            assert {s.name for s in steps} == {"browser"}
            assert steps[0].arguments["action"] == "navigate" and steps[0].kind is ToolKind.navigate  # the opening
            acts = [s for s in steps if s.kind is ToolKind.interact]
            assert len(acts) == sum(a["tool"] in ("click", "type", "select", "key") for a in demonstration)
            targeted = sum("target" in a for a in demonstration)
            assert sum(s.kind is ToolKind.observe for s in steps) == targeted  # a snapshot before each
            assert not any('"status": "error"' in (s.result or "") for s in steps)


async def test_a_policy_that_does_nothing_scores_0_through_openclaw(
    gui_image, openclaw_bundle, tmp_path, tiny_model_dir
):
    policy = tmp_path / "noop.json"
    policy.write_text(json.dumps({"turns": ["I am done."]}))
    config = _config(
        tmp_path,
        tiny_model_dir,
        f"scripted:{policy}",
        "noop",
        TASK_IDS[:1],
        "openclaw",
        agent_timeout_s=OPENCLAW_TIMEOUT_S,
    )
    await run_rollouts(config)
    with TrajectoryStore.open(tmp_path / "noop") as store:
        episodes = [e for e in store.list_episodes() if e.metadata.get("final")]
    assert [e.task for e in episodes] == TASK_IDS[:1]
    assert all(e.outcome == Outcome.failed and e.reward == 0.0 for e in episodes), [
        (e.task, e.outcome, e.outcome_reason) for e in episodes
    ]
