"""`openforge tasks curate` end to end in Docker, on the **scripted generator** (examples/curate: a known mix)
with the scripted solver: every candidate ends at the right stage with the right reason, the report and the
funnel say so, a second run resumes without redoing anything, and the accepted tasks score 1.0 under the oracle
through `openforge eval`. Also: the hack suite is one switch, and the command's help."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from openforge.cli import app
from openforge.curate import CurateConfig, run_curation
from openforge.curate.checks import check_grading
from openforge.curate.files import write_task_dir
from openforge.curate.ledger import Ledger
from openforge.sandbox import get_provider
from openforge.tasks import ImageMap, load_task, load_tasks
from support.curate import EXPECTED, SCRIPTED_GENERATOR, SCRIPTED_SOLVER, SEEDS, mix, routing_hacks

pytestmark = pytest.mark.timeout(900)

# the module's curation runs the hack suite against every candidate that grades soundly (five): with
# `routing_hacks`, 150 s -> 53 s here


@pytest.fixture(scope="module")
def curated(tmp_path_factory, tiny_model_dir, docker_ready):
    out = tmp_path_factory.mktemp("curate") / "out"
    config = CurateConfig(
        out=out,
        seeds=SEEDS,
        topics=["small file tasks"],
        generator=f"scripted:{SCRIPTED_GENERATOR}",
        candidates=len(EXPECTED),
        refine_rounds=1,
        sandbox="docker",
        heldout_fraction=0.25,
        solver={
            "backend": f"scripted:{SCRIPTED_SOLVER}",
            "model": str(tiny_model_dir),
            "harness": "react",
            "attempts": 2,
        },
    )
    with routing_hacks():
        report = run_curation(config)
    return config, out, report


def test_every_candidate_ends_at_the_right_stage_with_the_right_reason(curated):
    _, out, report = curated
    ledger = Ledger.load(out)
    ended = {c.lineage: (c.id, c.status, c.stage, c.reason) for c in ledger.final()}
    assert ended == EXPECTED
    first = ledger.candidates["cand-0009"]  # fixed only after a refine round
    assert (first.status, first.stage, first.reason) == ("refined", "test", "oracle_failed")
    assert ledger.candidates["cand-0009-r1"].round == 1
    assert "returned a non-zero code" in ledger.candidates["cand-0004"].detail  # the build log is the evidence
    assert "81% similar to candidate cand-0000" in ledger.candidates["cand-0008"].detail
    assert all(ledger.candidates[c].pass_rate == 0.5 for c in ("cand-0000", "cand-0001", "cand-0002", "cand-0009-r1"))
    assert ledger.candidates["cand-0003"].pass_rate == 0.0
    assert ledger.candidates["cand-0005"].refine_declined  # the generator was asked, and gave up


def test_the_report_has_the_funnel_the_split_and_the_cost(curated):
    _, out, report = curated
    assert report.last_line == "accepted 4 of 11 candidates"
    assert report.funnel == [
        ("proposed", 11),
        ("passed prune", 9),
        ("built", 8),
        ("grade soundly", 5),
        ("difficulty estimated", 5),
        ("accepted", 4),
    ]
    assert report.rejected["test"] == {"hackable": 1, "oracle_failed": 1, "solved_by_doing_nothing": 1}
    assert (report.sent_back, report.refined, report.fixed_by_refine) == (6, 1, 1)  # every fixable failure, once
    assert (report.train, report.heldout) == (3, 1)
    assert report.per_accepted.seconds > 0 and report.per_accepted.solver_tokens.output > 0
    assert report.per_accepted.generator_tokens.input == 0  # a scripted generator uses no model
    markdown = (out / "report.md").read_text()
    assert markdown.rstrip().endswith("accepted 4 of 11 candidates") and "The paper: about 16 min and $4" in markdown
    rejected = {r["id"]: r for r in json.loads((out / "rejected.json").read_text())}
    assert rejected["cand-0006"]["reason"] == "solved_by_doing_nothing" and "cand-0009" in rejected
    tasks = load_tasks(out / "tasks")
    assert sorted(t.id for t in tasks) == ["cand-0000", "cand-0001", "cand-0002", "cand-0009"]
    assert sorted(t.split for t in tasks) == ["heldout", "train", "train", "train"]


def test_a_second_run_resumes_without_redoing_anything(curated):
    config, out, _ = curated
    before = Ledger.load(out)
    report = run_curation(config)
    after = Ledger.load(out)
    assert report.last_line == "accepted 4 of 11 candidates"
    assert {k: c.model_dump(exclude={"split"}) for k, c in after.candidates.items()} == {
        k: c.model_dump(exclude={"split"}) for k, c in before.candidates.items()
    }
    assert after.elapsed_s >= before.elapsed_s
    assert len(list((out / "difficulty").iterdir())) == 2  # the solver ran once per round, not again


def test_the_accepted_tasks_score_1_under_the_oracle(curated, tiny_model_dir, tmp_path):
    _, out, _ = curated
    run = tmp_path / "eval"
    result = CliRunner().invoke(
        app,
        [
            "eval",
            "--tasks",
            str(out / "tasks"),
            "--backend",
            "oracle",
            "--model",
            str(tiny_model_dir),
            "--run",
            str(run),
            "--sandbox",
            "docker",
            "--image-map",
            "debian:bookworm-slim=openforge-base:bookworm",
        ],
    )
    assert result.exit_code == 0, result.output
    report = json.loads((run / "report.json").read_text())
    assert report["pass_at_k"]["1"] == 1.0 and report["outcomes"]["passed"] == 4


async def test_the_hack_suite_is_one_switch(docker_ready, tmp_path):
    write_task_dir(tmp_path / "hackable", mix()[7])
    task = load_task(tmp_path / "hackable")
    provider = get_provider("docker")
    image_map = ImageMap.from_config(CurateConfig.model_fields["image_map"].get_default(call_default_factory=True))
    try:
        assert await check_grading(task, provider, image_map, "curate-test", hack_suite=False) is None
        reason, detail = await check_grading(task, provider, image_map, "curate-test", hack_suite=True)
    finally:
        await provider.cleanup("curate-test")
        await provider.close()
    assert reason == "hackable" and "'touch-mentioned-paths'" in detail


def test_the_command_explains_itself(tmp_path):
    result = CliRunner().invoke(app, ["tasks", "curate", "--help"])
    assert result.exit_code == 0 and "propose → prune → build → test → refine → select" in result.output
    bad = CliRunner().invoke(app, ["tasks", "curate", "--out", str(tmp_path), "--generator", "scripted:x.py"])
    assert bad.exit_code == 2 and "topics = []: value error, give seeds (task directories) or topics" in " ".join(
        bad.output.split()
    )
