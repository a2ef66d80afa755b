"""The shipped GUI tasks (examples/gui-tasks) through the built-in computer-use harness in real Docker sandboxes,
as `openforge eval` runs them: the oracle's demonstrations (solution/actions.json, through the harness's GUI tools
only) score 1.0 on every task, a policy that does nothing scores 0.0, and nothing is left running (the
`docker_ready` fixture checks the containers). The analysis reads the GUI steps with their kinds."""

from __future__ import annotations

import json
import subprocess

import pytest

from conftest import unavailable
from openforge.analysis.trace import trace_calls
from openforge.core import Outcome
from openforge.harness import get_adapter
from openforge.harness.tools import ToolKind
from openforge.rollout import RolloutConfig, run_rollouts
from openforge.store import TrajectoryStore
from support.paths import REPO

pytestmark = pytest.mark.timeout(1800)  # four sandboxes and graders per run, on a loaded 2-core machine

GUI_TASKS = REPO / "examples" / "gui-tasks"
TASK_IDS = ["order-cheapest-keyboard", "ship-pending-order", "swap-featured-mouse", "update-customer-city"]


@pytest.fixture(scope="module")
def gui_image(docker_ready):
    r = subprocess.run(["bash", str(REPO / "scripts/build-gui-image.sh")], capture_output=True, text=True)
    if r.returncode != 0:
        unavailable(f"cannot build the GUI image openforge-gui:bookworm: {r.stderr[-2000:]}")


def _config(tmp_path, model, backend, name, task_ids=TASK_IDS) -> RolloutConfig:
    return RolloutConfig(
        tasks=[GUI_TASKS],
        task_ids=task_ids,
        harnesses=["computer-use"],
        sandbox="docker",
        model=model,
        backend=backend,
        run=tmp_path / name,
        max_attempts=1,
        concurrency=2,
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
