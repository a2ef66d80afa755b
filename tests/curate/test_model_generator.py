"""The model generator: a generator behind an OpenAI-compatible API (serve-model with a scripted policy standing
in for a generator model — no real generator model can run here) is asked for the six files, its reply parsed,
its candidate run through every stage, sent back with the evidence of its failure, and its fix accepted."""

from __future__ import annotations

from openforge.curate import CurateConfig, run_curation
from openforge.curate.ledger import Ledger
from openforge.inference.scripted import ScriptedBackend
from openforge.inference.serve import create_app
from support.curate import SEEDS, routing_hacks
from support.inference import ServerThread
from support.paths import POLICIES


def test_a_generator_model_behind_an_api_proposes_and_refines(docker_ready, tmp_path, tiny_model):
    app = create_app(ScriptedBackend(POLICIES / "task_writer.py", tiny_model), model_name="generator")
    with ServerThread(app) as server:
        config = CurateConfig(
            out=tmp_path / "out",
            seeds=SEEDS,
            generator=f"openai:{server.url}/v1",
            candidates=2,
            refine_rounds=1,
            sandbox="docker",
        )
        with routing_hacks():  # the hack suite's stage, with a few hacks: the generator is what is tested here
            report = run_curation(config)
    ledger = Ledger.load(tmp_path / "out")
    first, again = ledger.candidates["cand-0000"], ledger.candidates["cand-0001"]
    assert (first.status, first.reason) == ("refined", "oracle_failed")
    assert "FAIL: reversed.txt" in first.detail
    assert (again.status, again.stage, again.reason) == ("rejected", "prune", "duplicate")  # the same task twice
    fixed = ledger.candidates["cand-0000-r1"]
    assert fixed.status == "accepted" and fixed.pass_rate is None  # no solver: no difficulty, no band
    assert first.generator_tokens.input > 0 and first.generator_tokens.output > 0  # the API's own usage
    assert report.last_line == "accepted 1 of 2 candidates" and report.total.generator_tokens.output > 0
    assert "no solver configured" in " ".join(report.notes)
