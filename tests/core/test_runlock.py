"""One process per run directory: a second rollout / train / quickstart on a busy `--run` is refused before it
touches anything, and a crashed holder never leaves the directory stuck."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from openforge.cli import app
from openforge.core.runlock import RunDirBusy, locked_run_dir
from openforge.rollout import RolloutConfig, RolloutError, run_rollouts
from openforge.train.config import TrainConfig
from openforge.train.errors import TrainError
from openforge.train.pipeline import run_training
from support.paths import REPO

HOLD = (
    "import sys, time\nfrom openforge.core.runlock import locked_run_dir\n"
    "with locked_run_dir(sys.argv[1]):\n    print('held', flush=True)\n    time.sleep(600)\n"
)


@pytest.fixture
def held(tmp_path):
    """A run directory held by another process (its pid), released when the test ends."""
    run = tmp_path / "run"
    holder = subprocess.Popen([sys.executable, "-c", HOLD, str(run)], stdout=subprocess.PIPE, text=True)
    assert holder.stdout.readline().strip() == "held"
    yield run, holder
    holder.kill()
    holder.wait()


def test_a_busy_run_directory_is_refused_and_freed_when_its_holder_dies(held):
    run, holder = held
    with pytest.raises(RunDirBusy, match=f"pid {holder.pid}"):
        with locked_run_dir(run):
            pass
    os.kill(holder.pid, signal.SIGKILL)  # a crash: no clean-up code runs
    holder.wait()
    with locked_run_dir(run):
        with pytest.raises(RunDirBusy):  # held by this process now: a second holder is refused here too
            with locked_run_dir(run):
                pass


async def test_rollout_on_a_busy_run_directory_fails_before_starting(held, tiny_model_dir):
    run, holder = held
    config = RolloutConfig(
        tasks=[REPO / "examples" / "tasks"],
        harnesses=["react"],
        sandbox="local",
        model=tiny_model_dir,
        backend="oracle",
        run=run,
    )
    with pytest.raises(RolloutError, match="in use by pid"):
        await run_rollouts(config)
    assert not (run / "trajectories.db").exists()  # nothing opened, nothing cleaned up


def test_train_and_quickstart_on_a_busy_run_directory_fail_with_a_message(held):
    run, holder = held
    config = TrainConfig.model_validate(
        {
            "run": str(run),
            "model": "tiny",
            "tasks": {"families": ["create_file"]},
            "sandbox": "local",
            "rl": {"steps": 1},
        }
    )
    with pytest.raises(TrainError, match="in use by pid"):
        run_training(config)
    assert not (run / "config.yaml").exists()
    result = CliRunner().invoke(app, ["quickstart", "--run", str(run), "--smoke"])
    assert result.exit_code != 0 and f"in use by pid {holder.pid}" in " ".join(result.output.split())
    assert not (run / "model").exists()
