"""The viewer's pages over a synthetic train-like run, served in process: every page renders, everything the run
holds is escaped, the server is read-only and strict about its parameters, the token view carries the
assembler's masks, and a GRPO group shows the trainer's advantages. (Real runs in a real browser:
test_browser.py.)"""

from __future__ import annotations

import hashlib
import json
import re
from html.parser import HTMLParser

import pytest
from starlette.testclient import TestClient

from openforge.store import TrajectoryStore
from openforge.train.advantages import group_advantages
from openforge.train.assemble import assemble
from openforge.view.app import create_app
from openforge.view.discover import discover
from openforge.view.library import Library
from support.viewer_runs import SCREENSHOTS, make_run


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    root = tmp_path_factory.mktemp("train-like")
    named = make_run(root / "rl")
    make_run(root / "eval" / "after-000000", seed=1)
    make_run(root / "worker-host-123", seed=2)
    (root / "steps.jsonl").write_text(
        "".join(
            json.dumps(
                {
                    "step": i,
                    "reward": 0.2 * i,
                    "pass_rate": 0.1 * i,
                    "groups": 4,
                    "groups_with_signal": i,
                    "tokens": 100,
                    "merge_rate": 1.0,
                    "policy_version": i + 1,
                    "seconds": 1.0,
                    # asynchronous GRPO and LoRA (the last step; older records have none of it)
                    **(
                        {
                            "staleness": {"0": 3, "1": 1},
                            "stale_groups_dropped": 2,
                            "behaviour_ratio_mean": 1.0123,
                            "behaviour_ratio_max": 2.75,
                            "behaviour_ratio_truncated": 0.0625,
                            "lora": True,
                        }
                        if i == 2
                        else {}
                    ),
                }
            )
            + "\n"
            for i in range(3)
        )
        + "{truncated"
    )
    (root / "evals.jsonl").write_text(json.dumps({"after_steps": 0, "pass_at_1": 0.25, "graded": 4}) + "\n")
    (root / "analysis.json").write_text(json.dumps({"recovery": {"rate": 0.5}, "tool_mix": {"shell": 0.75}}))
    (root / "tasks").mkdir()
    library = Library([root])
    with TestClient(create_app(library)) as client:
        yield client, root, named
    library.close()


def get(client, url: str, status: int = 200) -> str:
    response = client.get(url)
    assert response.status_code == status, (url, response.text[-2000:])
    if status == 200:
        assert "script-src" not in response.headers["content-security-policy"]  # no script allowed at all
        assert response.headers["content-security-policy"].startswith("default-src 'none'")
        assert "<script" not in response.text.lower()
    return response.text


def test_discovery_finds_every_store_and_skips_the_rest(site):
    _, root, _ = site
    run = discover(root)
    assert [s.label for s in run.stores] == ["eval/after-000000", "rl", "worker-host-123"]
    assert [s.kind for s in run.stores] == ["eval", "rl", "worker"]
    assert run.kind == "train" and len(run.files.steps) == 3
    assert run.files.problems and "steps.jsonl line 4" in run.files.problems[0]  # a line being written: skipped


def test_every_page_renders(site):
    client, _, named = site
    assert "train-like" in get(client, "/")
    page = get(client, "/run?run=0")
    for chart in ("chart-reward", "chart-signal", "chart-policy", "chart-heldout"):
        assert f'id="{chart}"' in page
    assert "recovery.rate" in page and "tool_mix.shell" in page  # behaviour metrics from analysis.json
    steps = page[page.index('id="steps"') :]
    row = steps[steps.index('<tr><td class="n">2</td>') :].split("</tr>")[0]  # the step table, latest first
    assert "0:3 1:1" in row and ">2<" in row and "1.01 · 2.75 · 6.2%" in row and ">on<" in row
    assert "the container died: OOM" in page  # infrastructure failures with their reasons
    assert get(client, "/episodes?run=0&store=rl").count('href="/episode?') == len(named)
    for episode in named.values():
        get(client, f"/episode?run=0&store=rl&id={episode.id}")
    get(client, "/groups?run=0&store=rl&step=1")
    get(client, "/group?run=0&store=rl&step=1&task=grp-signal&harness=react")
    page = get(client, "/compare?a=0:rl&b=0:eval/after-000000")
    assert 'id="compare-tasks"' in page and "grp-signal · react" in page
    get(client, "/episodes?run=0&store=worker-host-123&sort=tokens&desc=1&harness=react&final=1&page=1")


def test_agent_written_markup_is_text(site):
    client, _, named = site
    page = get(client, f"/episode?run=0&store=rl&id={named['markup'].id}")
    assert "&lt;script&gt;document.title=&#39;pwned&#39;&lt;/script&gt;" in page
    assert "&lt;img src=x onerror=" in page
    assert "<img" not in page and 'onerror="' not in page
    image = get(client, f"/episode?run=0&store=rl&id={named['image'].id}")
    assert '<span class="media">[image omitted' in image


def test_an_episodes_screenshots_are_shown_beside_the_calls_that_sent_them(site):
    client, _, named = site
    page = get(client, f"/episode?run=0&store=rl&id={named['image'].id}")
    hashes = [hashlib.sha256(shot).hexdigest() for shot in SCREENSHOTS]
    for index, sha in enumerate(hashes):  # call 1 sends both: shown with call 0, which sent it first, only
        section = page[page.index(f'id="call-{index}"') :].split("</section>")[0]
        assert section.count("<img ") == 1 and f"sha256={sha}" in section, section
    assert 'id="image-count">2 sent' in page
    for sha, shot in zip(hashes, SCREENSHOTS):
        response = client.get(f"/image?run=0&store=rl&sha256={sha}")
        assert response.status_code == 200 and response.content == shot
        assert response.headers["content-type"] == "image/png"
        assert response.headers["x-content-type-options"] == "nosniff"
    assert "no image" in get(client, "/image?run=0&store=rl&sha256=" + "0" * 64, 404)
    assert "no image" in get(client, "/image?run=0&store=rl&sha256=../../trajectories.db", 404)
    assert "sha256" in get(client, "/image?run=0&store=rl", 400)
    assert "has no store" in get(client, f"/image?run=0&store=/etc&sha256={hashes[0]}", 404)


def test_read_only_and_strict(site):
    client, _, named = site
    for method in ("post", "put", "delete", "patch"):
        assert getattr(client, method)("/episodes?run=0&store=rl").status_code == 405
    assert "sort: one of" in get(client, "/episodes?run=0&store=rl&sort=key", 400)
    assert "page: expected a whole number" in get(client, "/episodes?run=0&store=rl&page=x", 400)
    assert "no run number 7" in get(client, "/run?run=7", 404)
    assert "has no store" in get(client, "/episodes?run=0&store=../../etc", 404)
    assert "has no store" in get(client, "/episodes?run=0&store=/etc", 404)
    assert "no episode" in get(client, "/episode?run=0&store=rl&id=nope", 404)
    assert "A: expected" not in get(client, "/compare?a=0:rl")
    assert "expected RUN:STORE" in get(client, "/compare?a=rl&b=0:rl", 400)
    with TrajectoryStore.open(next(iter(site[1].glob("rl"))), readonly=True) as store:
        assert store.count_episodes() == len(named)  # nothing written by any of it


class _Tokens(HTMLParser):
    """Per token-view sample: the loss mask of every token span."""

    def __init__(self):
        super().__init__()
        self.samples: list[list[int]] = []

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        classes = (attrs.get("class") or "").split()
        if tag == "section" and "sample" in classes:
            self.samples.append([])
        elif tag == "span" and "t" in classes and self.samples and "legend" not in classes:
            self.samples[-1].append(1 if "m1" in classes else 0)


def test_token_view_masks_are_the_assemblers(site):
    client, root, named = site
    for name in ("markup", "break", "parse", "call_error"):
        episode = named[name]
        parser = _Tokens()
        parser.feed(get(client, f"/episode?run=0&store=rl&id={episode.id}"))
        with TrajectoryStore.open(root / "rl", readonly=True) as store:
            samples, _ = assemble([(store.get_episode(episode.id), store.list_calls(episode.id))], final_only=False)
        assert parser.samples == [s.loss_mask for s in samples], name
    assert len(parser.samples) >= 1
    infra = get(client, f"/episode?run=0&store=rl&id={named['infra'].id}")
    assert 'id="no-samples"' in infra and "sandbox error" in infra
    per_call = _Tokens()
    per_call.feed(get(client, f"/episode?run=0&store=rl&id={named['break'].id}&mode=per-call"))
    assert len(per_call.samples) == 3  # one per call with output


def test_group_page_shows_the_trainers_advantages(site):
    client, _, named = site
    page = get(client, "/group?run=0&store=rl&step=1&task=grp-signal&harness=react")
    expected = group_advantages([1.0, 0.0, 0.0, 0.0], ["g"] * 4).tolist()
    shown = [float(v) for v in re.findall(r'<span class="adv [a-z]*">([+-][0-9.]+)</span>', page)]
    assert shown == pytest.approx(expected, abs=1e-3) and shown[0] > 0
    flat = get(client, "/group?run=0&store=rl&step=1&task=grp-flat&harness=react")
    assert "no signal" in flat and 'class="adv ' not in flat


def test_view_command_refuses_a_directory_without_stores(tmp_path):
    from typer.testing import CliRunner

    from openforge.cli import app

    result = CliRunner().invoke(app, ["view", str(tmp_path), "--port", "0"])
    assert result.exit_code == 2 and "holds no trajectories.db" in " ".join(result.output.split())
