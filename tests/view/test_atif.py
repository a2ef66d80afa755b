"""`openforge export --format atif` on a synthetic run: one trajectory.json per episode, valid for Harbor's own
ATIF validator, with the exact token ids and logprobs, tool results attached to the calls they answer, and
reward, outcome and continuity breaks in `extra`. (The real runs — Docker eval with react and Claude Code, a
train run — are exported and validated in test_browser.py.)"""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from conftest import unavailable
from openforge.cli import app
from openforge.store import TrajectoryStore
from openforge.view.atif import ATIF_VERSION, INDEX_FILE, trajectory
from support.harbor import harbor_python, validate
from support.viewer_runs import MARKUP, make_run


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    run = tmp_path_factory.mktemp("atif-run")
    named = make_run(run)
    out = tmp_path_factory.mktemp("atif-out")
    result = CliRunner().invoke(app, ["export", str(run), "--format", "atif", "--out", str(out)])
    assert result.exit_code == 0, result.output
    assert f"wrote {len(named)} {ATIF_VERSION} trajectories" in result.output
    return run, named, out


def load(out, episode) -> dict:
    return json.loads((out / episode.id / "trajectory.json").read_text())


def test_every_episode_is_valid_for_harbors_validator(exported):
    _, named, out = exported
    python = harbor_python()
    if python is None:
        unavailable("Harbor's validator is not installed (scripts/prepare-test-env.sh makes .venv/harbor)")
    files = sorted(out.glob("*/trajectory.json"))
    assert len(files) == len(named)
    errors = {path: errs for path, errs in validate(python, files).items() if errs}
    assert not errors, errors
    index = [json.loads(line) for line in (out / INDEX_FILE).read_text().splitlines()]
    assert {row["episode_id"] for row in index} == {e.id for e in named.values()}


def test_harbors_validator_rejects_a_broken_trajectory(exported, tmp_path):
    """The check can fail: the same file with a step id out of sequence is refused."""
    _, named, out = exported
    python = harbor_python()
    if python is None:
        unavailable("Harbor's validator is not installed (scripts/prepare-test-env.sh makes .venv/harbor)")
    data = load(out, named["markup"])
    data["steps"][1]["step_id"] = 7
    bad = tmp_path / "trajectory.json"
    bad.write_text(json.dumps(data))
    assert validate(python, [bad])[str(bad)]


def test_tokens_logprobs_and_tool_results(exported):
    run, named, out = exported
    data = load(out, named["markup"])
    assert data["schema_version"] == ATIF_VERSION and data["session_id"] == named["markup"].id
    assert [s["source"] for s in data["steps"]] == ["system", "user", "agent", "agent"]
    with TrajectoryStore.open(run, readonly=True) as store:
        calls = store.list_calls(named["markup"].id)
    agents = [s for s in data["steps"] if s["source"] == "agent"]
    for step, call in zip(agents, calls):
        assert step["metrics"]["prompt_token_ids"] == call.prompt_ids
        assert step["metrics"]["completion_token_ids"] == call.output_ids
        assert step["metrics"]["logprobs"] == call.output_logprobs
        assert step["extra"]["openforge"]["call_index"] == call.index
    # the first call's reply is known from the harness's echo (no tokenizer in this run); its tool result is
    # the observation of that step, the markup kept verbatim as data
    first = agents[0]
    assert first["tool_calls"] == [
        {"tool_call_id": "call_1", "function_name": "bash", "arguments": {"command": "solve probe-markup"}}
    ]
    [result] = first["observation"]["results"]
    assert (result["source_call_id"], result["content"]) == ("call_1", MARKUP)
    # the last reply has no echo and no tokenizer: said so, with the token ids still there
    assert "reply_unavailable" in agents[1]["extra"]["openforge"]
    extra = data["extra"]["openforge"]
    assert (extra["reward"], extra["outcome"], extra["task"]) == (0.0, "failed", "probe-markup")
    assert data["final_metrics"]["total_completion_tokens"] == sum(len(c.output_ids) for c in calls)


def test_breaks_errors_and_infrastructure_failures(exported):
    _, named, out = exported
    brk = load(out, named["break"])
    assert brk["extra"]["openforge"]["continuity_breaks"] == [
        {"call_index": 2, "segment": 1, "reason": "history_rewritten"}
    ]
    last = brk["steps"][-1]
    assert last["extra"]["openforge"]["break_reason"] == "history_rewritten"
    assert any(s["source"] == "user" and "Summary so far" in s["message"] for s in brk["steps"])
    err = load(out, named["call_error"])
    assert err["steps"][-1]["extra"]["openforge"]["call_error"] == "backend failed: boom"
    infra = load(out, named["infra"])
    assert infra["extra"]["openforge"]["outcome"] == "sandbox_error"
    assert infra["extra"]["openforge"]["outcome_reason"] == "the container died: OOM"
    image = load(out, named["image"])
    user = next(s for s in image["steps"] if s["source"] == "user")
    assert "[image omitted" in user["message"]


def test_an_episode_without_calls_is_still_a_valid_trajectory():
    from openforge.core import Episode

    data = trajectory(Episode(id="e", key="k", task="t", harness="react"), [], None)
    assert len(data["steps"]) == 1 and data["steps"][0]["source"] == "system"
