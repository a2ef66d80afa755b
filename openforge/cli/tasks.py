"""`openforge tasks`: validate, generate and curate Harbor-format tasks. The rooms are imported when a command
runs (the curation pipeline alone takes a second to import), not for `openforge --help`."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from openforge.cli.errors import OptionError
from openforge.cli.options import ImageMapOpt, parse_image_map, parsed

console = Console()
tasks_app = typer.Typer(help="Validate and generate Harbor-format tasks.", no_args_is_help=True)


@tasks_app.command("validate")
def tasks_validate(
    root: Path = typer.Argument(..., help="A task directory or a root holding several."),
    run: bool = typer.Option(
        False,
        "--run",
        help="Also run solve.sh (must score 1), wrong.sh (must score < 1) "
        "and the built-in reward hacks (each must score < 1 or be flagged as tampering).",
    ),
    sandbox: str = typer.Option("docker", help="Sandbox for --run: docker or local."),
    image_map: list[str] | None = typer.Option(None, "--image-map", help="FROM=TO (repeatable)."),
    hacks: str = typer.Option(
        "all",
        "--hacks",
        help="Reward hacks to try with --run: all, none, or names "
        "(comma-separated; `openforge tasks hacks` lists them).",
    ),
    report: Path | None = typer.Option(
        None,
        "--report",
        help="With --run: write the results as JSON here (per task: scores, errors, every hack's verdict).",
    ),
    concurrency: int = typer.Option(2, "--concurrency", min=1, help="Hack sandboxes at a time, per task."),
) -> None:
    """Check task directories: schema errors named; with --run, the reference and wrong solutions' scores and
    the reward hacks the verifier falls to."""
    from openforge.rollout.hacks import select_hacks
    from openforge.rollout.validate import validate_tasks

    chosen = parsed("--hacks", select_hacks, hacks)
    if not validate_tasks(
        root,
        console,
        run=run,
        sandbox=sandbox,
        image_map=image_map,
        hacks=chosen,
        concurrency=concurrency,
        report=report,
    ):
        raise typer.Exit(1)  # the check's verdict: a task is not valid


@tasks_app.command("hacks")
def tasks_hacks() -> None:
    """List the built-in reward hacks `tasks validate --run` tries (name and what it does)."""
    from openforge.rollout.hacks import HACKS

    for h in HACKS:
        console.print(f"[bold]{h.name}[/]: {h.description}")


@tasks_app.command("generate")
def tasks_generate(
    out: Path = typer.Argument(..., help="Directory to write the task directories into."),
    family: str = typer.Option(
        "all", help="Family name(s), comma-separated, or 'all'; 'web' / 'desktop' for the web / desktop (GUI) tasks."
    ),
    n: int = typer.Option(10, help="Tasks per family."),
    seed: int = typer.Option(0, help="Seed."),
    split: str = typer.Option("train", help="train or heldout."),
) -> None:
    """Write parameterised task instances (Harbor layout) drawn from the generator's families."""
    from openforge.tasks import generate_family_tasks

    paths = generate_family_tasks(family, out, n, seed=seed, split=split)
    console.print(f"wrote {len(paths)} tasks to {out}")


def _band(value: str) -> list[float]:
    try:
        return [float(x) for x in value.split(",")]
    except ValueError as e:
        raise OptionError(f"--band {value!r}: give LOW,HIGH, e.g. 0.1,0.9 ({e})") from None


@tasks_app.command("curate")
def tasks_curate(
    config: Path | None = typer.Option(
        None, help="YAML file of CurateConfig fields (examples/curate/curate.yaml); the options below override it."
    ),
    out: Path | None = typer.Option(
        None, help="Run directory: candidates, ledger, accepted tasks (OUT/tasks), report."
    ),
    seed_task: list[Path] | None = typer.Option(
        None,
        "--seed-task",
        help="A seed task directory or a root of them "
        "(repeatable): the generator is grounded in them; never duplicated.",
    ),
    topic: list[str] | None = typer.Option(None, "--topic", help="A topic to write tasks on (repeatable)."),
    generator: str | None = typer.Option(
        None,
        help="openai:URL | anthropic:URL (a generator model; key from "
        "$OPENFORGE_UPSTREAM_API_KEY) | scripted:FILE (a scripted generator, for tests).",
    ),
    candidates: int | None = typer.Option(None, help="Candidates to propose."),
    solver: str | None = typer.Option(None, help="Backend spec of the independent solver that estimates difficulty."),
    solver_model: Path | None = typer.Option(None, help="The solver's model directory (default: the tiny model)."),
    solver_harness: str | None = typer.Option(None, help="The harness the solver works through (default react)."),
    attempts: int | None = typer.Option(None, help="Solver attempts per task (k)."),
    band: str | None = typer.Option(None, help="LOW,HIGH: keep tasks whose estimated pass rate lies in it (0.1,0.9)."),
    refine_rounds: int | None = typer.Option(None, help="Rounds of sending failures back to the generator."),
    sandbox: str | None = typer.Option(None, help="docker or local."),
    image_map: ImageMapOpt = None,
    hack_suite: bool | None = typer.Option(None, "--hack-suite/--no-hack-suite", help="Run the reward-hack suite."),
) -> None:
    """Make tasks: propose → prune → build → test → refine → select, resumable; the funnel, the rejections with
    their reasons, and time and tokens per accepted task in OUT/report.md."""
    from openforge.config import read_mapping, validate_config
    from openforge.curate import CurateConfig, run_curation

    data: dict[str, object] = dict(read_mapping(config)) if config else {}  # fields, before validation
    given = {
        "out": out,
        "seeds": seed_task,
        "topics": topic,
        "generator": generator,
        "candidates": candidates,
        "refine_rounds": refine_rounds,
        "sandbox": sandbox,
        "hack_suite": hack_suite,
        "image_map": parse_image_map(image_map) if image_map else None,
        "band": _band(band) if band else None,
    }
    data.update({k: v for k, v in given.items() if v is not None})
    solver_given = {"backend": solver, "model": solver_model, "harness": solver_harness, "attempts": attempts}
    solver_fields = data.get("solver") or {}
    if any(v is not None for v in solver_given.values()) and isinstance(solver_fields, dict):  # else: validation says
        data["solver"] = {**solver_fields, **{k: v for k, v in solver_given.items() if v is not None}}
    run_curation(validate_config(data, CurateConfig, source=str(config or "options")), console)
