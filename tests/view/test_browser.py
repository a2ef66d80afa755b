"""`openforge view` on real runs made here — a Docker `eval` with the react harness and real Claude Code (the
oracle, and a scripted policy whose tool result and reply carry `<script>` / `onerror=` markup), and a short
`openforge train` run — with every page loaded in headless Chromium (Debian's `chromium`, driven over the
DevTools protocol): no console error, the expected elements in the DOM, the token view's masks and logprobs
equal to the assembler's, the injected markup inert. Screenshots go to runs/test-artifacts/viewer/ (with
OPENFORGE_UPDATE_DOCS_IMAGES=1 the README's are refreshed in docs/images/). The same runs are exported as ATIF
and checked with Harbor's own validator.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlencode

import httpx
import pytest
import yaml
from typer.testing import CliRunner

from conftest import unavailable
from openforge.cli import app
from openforge.harness.bundle import bundle_status, default_bundle_dir
from openforge.store import TrajectoryStore
from openforge.train.assemble import assemble
from openforge.view.atif import export_atif
from support.browser import CHROMIUM, Browser
from support.harbor import harbor_python, validate
from support.paths import EXAMPLES, POLICIES, REPO
from support.rollout import IMAGE_MAP

# making the runs (Docker episodes with two harnesses, a train run) takes a few minutes on 2 cores
pytestmark = pytest.mark.timeout(1200)

ARTIFACTS = REPO / "runs" / "test-artifacts" / "viewer"
DOC_IMAGES = REPO / "docs" / "images"
TASKS = ["fix-mean", "write-json-config"]


def _eval(run: Path, tasks: Path, model: Path, backend: str, samples: int) -> None:
    args = [
        "eval",
        "--tasks",
        str(tasks),
        "--harness",
        "react,claude-code",
        "--sandbox",
        "docker",
        "--samples",
        str(samples),
        "--concurrency",
        "4",
        "--model",
        str(model),
        "--backend",
        backend,
        "--run",
        str(run),
        "--max-attempts",
        "2",
    ]
    for source, target in IMAGE_MAP.items():
        args += ["--image-map", f"{source}={target}"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output


@pytest.fixture(scope="module")
def runs(tmp_path_factory, tiny_model_dir, docker_ready) -> dict[str, Path]:
    if not bundle_status(default_bundle_dir()).get("claude-code"):
        unavailable("claude-code is not in the harness bundle: run `openforge harness install`")
    root = tmp_path_factory.mktemp("viewer-runs")
    tasks = root / "tasks"
    for task in TASKS:
        shutil.copytree(EXAMPLES / "heldout" / task, tasks / task)
    paths = {"oracle": root / "eval-oracle", "probe": root / "eval-probe", "train": root / "train"}
    _eval(paths["oracle"], tasks, tiny_model_dir, "oracle", samples=2)
    _eval(paths["probe"], tasks, tiny_model_dir, f"scripted:{POLICIES / 'markup_probe.py'}", samples=1)
    config = root / "train.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "run": str(paths["train"]),
                "model": str(tiny_model_dir),
                "tasks": {"families": ["create_file", "append_line"]},
                "harnesses": ["react"],
                "sandbox": "docker",
                "max_new_tokens": 32,
                "harness_options": {"react": {"max_steps": 1, "tools": ["bash"]}},
                "rl": {"steps": 2, "prompts": 2, "group": 4, "eval_every": 1, "eval_instances": 4},
                "validate_tasks": False,  # the tasks' check against the reward hacks: tests/rollout/test_task_gate.py
            }
        )
    )
    result = CliRunner().invoke(app, ["train", "--config", str(config)])
    assert result.exit_code == 0, result.output
    return paths


@pytest.fixture(scope="module")
def viewer(runs):
    """`openforge view` on the three runs, as a user starts it (port 0: the URL it prints)."""
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "openforge.cli",
            "view",
            str(runs["oracle"]),
            str(runs["probe"]),
            str(runs["train"]),
            "--port",
            "0",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**os.environ, "COLUMNS": "200"},
    )
    try:
        line = proc.stdout.readline()
        found = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert found, f"openforge view did not print its URL: {line!r}"
        yield found.group(0).rstrip("/")
    finally:
        proc.terminate()
        proc.wait(20)


@pytest.fixture(scope="module")
def browser():
    if not Path(CHROMIUM).is_file():
        unavailable("Debian's chromium is not installed (scripts/prepare-test-env.sh installs it)")
    with Browser() as b:
        yield b


def url(base: str, path: str, **query) -> str:
    return f"{base}{path}?{urlencode(query)}" if query else f"{base}{path}"


def episodes_of(run: Path, **filters) -> list:
    with TrajectoryStore.open(run, readonly=True) as store:
        return store.list_episodes(**filters)


def check(browser: Browser, address: str, selector: str, shot: str) -> None:
    """Load a page: no console error, no failed load, `selector` present; screenshot it."""
    load = browser.load(address)
    assert not load.errors and not load.dialogs, (address, load.errors, load.dialogs)
    assert browser.evaluate(f"document.querySelector({selector!r}) !== null"), (address, selector)
    assert browser.evaluate("document.querySelectorAll('script').length") == 0
    browser.screenshot(ARTIFACTS / f"{shot}.png")


def test_every_page_loads_without_errors(runs, viewer, browser):
    check(browser, url(viewer, "/"), "#runs tbody tr", "index")
    for i, name in enumerate(("oracle", "probe", "train")):
        check(browser, url(viewer, "/run", run=i), "#stores tbody tr", f"run-{name}")
    assert browser.evaluate("document.querySelectorAll('svg.chart').length") >= 4  # the train run's curves
    for i, label in [(0, "."), (1, "."), (2, "rl"), (2, "eval/after-000000"), (2, "eval/after-000002")]:
        check(
            browser,
            url(viewer, "/episodes", run=i, store=label),
            "#episodes tbody tr td a",
            f"episodes-{i}-{label.replace('/', '-')}",
        )
    check(
        browser,
        url(viewer, "/episodes", run=0, store=".", sort="tokens", desc=1, harness="claude-code"),
        "#episodes th.sorted",
        "episodes-sorted",
    )
    for i, name in enumerate(("oracle", "probe")):
        for harness in ("react", "claude-code"):
            episode = episodes_of(runs[name], harness=harness)[0]
            check(
                browser,
                url(viewer, "/episode", run=i, store=".", id=episode.id),
                "section.call",
                f"episode-{name}-{harness}",
            )
            assert browser.evaluate("document.querySelectorAll('section.sample span.t').length") > 0
            assert browser.evaluate("document.querySelector('#verifier').textContent").strip()
    trained = episodes_of(runs["train"] / "rl")[0]
    check(browser, url(viewer, "/episode", run=2, store="rl", id=trained.id), "section.sample", "episode-train")
    check(browser, url(viewer, "/groups", run=2, store="rl"), "#groups tbody tr td a", "groups")
    check(
        browser,
        url(viewer, "/group", run=2, store="rl", step=0, task=trained.task, harness="react"),
        "#members article.card",
        "group",
    )
    assert browser.evaluate("document.querySelectorAll('#members article.card').length") == 4
    check(browser, url(viewer, "/compare", a="0:.", b="1:."), "#compare-tasks tbody tr", "compare")
    assert browser.evaluate("document.querySelectorAll('#compare-tasks tbody tr').length") == 2 * len(TASKS)
    check(
        browser,
        url(viewer, "/compare", a="2:eval/after-000000", b="2:eval/after-000002"),
        "#compare-summary",
        "compare-checkpoints",
    )


_DOM_SAMPLES = """[...document.querySelectorAll('section.sample')].map(s => [...s.querySelectorAll('span.t')].map(
    t => [t.classList.contains('m1') ? 1 : 0, t.dataset.lp === undefined ? null : Number(t.dataset.lp)]))"""


@pytest.mark.parametrize("which", ["oracle-claude-code", "oracle-react", "train"])
def test_token_view_is_the_assemblers(runs, viewer, browser, which):
    if which == "train":
        store_dir, run, label = runs["train"] / "rl", 2, "rl"
        episode = episodes_of(store_dir)[-1]
    else:
        store_dir, run, label = runs["oracle"], 0, "."
        episode = episodes_of(store_dir, harness=which.split("-", 1)[1])[0]
    load = browser.load(url(viewer, "/episode", run=run, store=label, id=episode.id))
    assert not load.errors
    shown = browser.evaluate(_DOM_SAMPLES)
    with TrajectoryStore.open(store_dir, readonly=True) as store:
        samples, _ = assemble([(store.get_episode(episode.id), store.list_calls(episode.id))], final_only=False)
    assert samples and len(shown) == len(samples)
    for tokens, sample in zip(shown, samples):
        assert [m for m, _ in tokens] == sample.loss_mask
        trained = [(lp, want) for (m, lp), want in zip(tokens, sample.logprobs) if m]
        assert trained and all(abs(lp - want) < 1e-4 for lp, want in trained)
    if which == "oracle-claude-code":
        browser.screenshot_element("#tokens", ARTIFACTS / "token-view.png", max_height=1400)


def test_injected_markup_does_not_execute(runs, viewer, browser):
    for harness in ("react", "claude-code"):
        for episode in episodes_of(runs["probe"], harness=harness):
            load = browser.load(url(viewer, "/episode", run=1, store=".", id=episode.id))
            assert not load.errors and not load.dialogs
            assert browser.evaluate("document.title") == f"Episode {episode.id[:8]} · OpenForge"
            assert browser.evaluate("document.querySelectorAll('script, img, [onerror]').length") == 0
            text = browser.evaluate("document.body.innerText")
            assert "<script>document.title='pwned'</script>" in text  # shown, as text
            assert "<img src=x onerror=\"document.title='pwned'\">" in text
    browser.screenshot(ARTIFACTS / "episode-markup.png")
    # the response headers forbid script outright, should anything ever slip through
    csp = httpx.get(url(viewer, "/")).headers["content-security-policy"]
    assert csp.startswith("default-src 'none'") and "script-src" not in csp


def test_real_runs_export_as_valid_atif(runs, tmp_path):
    python = harbor_python()
    if python is None:
        unavailable("Harbor's validator is not installed (scripts/prepare-test-env.sh makes .venv/harbor)")
    files = []
    for name, run in runs.items():
        done = export_atif(run, tmp_path / name)
        assert done.episodes > 0
        files += sorted((tmp_path / name).rglob("trajectory.json"))
    errors = {path: errs for path, errs in validate(python, files).items() if errs}
    assert not errors, errors
    import json

    claude = [json.loads(f.read_text()) for f in (tmp_path / "oracle").glob("*/trajectory.json")]
    claude = [t for t in claude if t["agent"]["name"] == "claude-code"]
    assert claude and all(t["agent"]["version"] != "unknown" for t in claude)
    bash = [s for t in claude for s in t["steps"] for c in s.get("tool_calls", []) if c["function_name"] == "Bash"]
    assert bash and all(s["observation"]["results"] for s in bash)  # each tool call's result attached to it
    assert all(s["metrics"]["completion_token_ids"] for t in claude for s in t["steps"] if s["source"] == "agent")


README_SHOTS = {
    "run-train": "viewer-run.png",
    "episodes-0-.": "viewer-episodes.png",
    "episode-oracle-claude-code": "viewer-episode.png",
    "token-view": "viewer-tokens.png",
    "group": "viewer-group.png",
    "compare": "viewer-compare.png",
}


def test_zz_readme_screenshots(viewer, browser):
    """The README's screenshots, cropped to a readable height; copied into docs/images/ when asked."""
    for shot in README_SHOTS:
        assert (ARTIFACTS / f"{shot}.png").is_file(), shot
    if os.environ.get("OPENFORGE_UPDATE_DOCS_IMAGES") == "1":
        from PIL import Image

        DOC_IMAGES.mkdir(parents=True, exist_ok=True)
        for shot, name in README_SHOTS.items():
            with Image.open(ARTIFACTS / f"{shot}.png") as image:
                image.crop((0, 0, image.width, min(image.height, 1500))).save(DOC_IMAGES / name, optimize=True)
