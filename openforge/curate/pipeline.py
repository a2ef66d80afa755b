"""The curation pipeline: propose → prune → build → test (grading, then difficulty) → refine (bounded rounds)
→ select, over a ledger written after every step (so running it again on the same OUT resumes), with a progress
bar per stage. The stages' rules live in their own modules (see the package docstring); this one runs them.

OUT holds: `proposals/ID.json` (what the generator wrote), `candidates/ID/` (each version as a task
directory), `difficulty/round-N/` (the solver's episodes), `ledger.json`, and at the end `tasks/train/` and
`tasks/heldout/` (the accepted tasks, named by their lineage), `rejected.json`, `report.json`, `report.md`.
"""

from __future__ import annotations

import asyncio
import json
import shutil
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from openforge.core.errors import ConfigurationError, Interrupted
from openforge.core.runlock import RunDirBusy, locked_run_dir
from openforge.core.similarity import ShingleIndex
from openforge.curate.build import build_environment
from openforge.curate.checks import check_grading
from openforge.curate.config import CurateConfig
from openforge.curate.difficulty import SolverInterrupted, solver_attempts
from openforge.curate.files import problems, read_task_files, write_task_dir
from openforge.curate.generators import Evidence, Generator, GeneratorError, ProposalRequest, SeedTask, make_generator
from openforge.curate.ledger import Candidate, Ledger
from openforge.curate.prune import duplicate_of, leaked_tests, schema_problems, task_text
from openforge.curate.report import CurateReport, build_report, write_report
from openforge.curate.select import out_of_band, split
from openforge.rollout.orchestrator import run_label
from openforge.sandbox import SandboxProvider, get_provider
from openforge.tasks import ImageMap, TaskLoadError, load_task, load_tasks

# Failures a generator can fix with the evidence; duplicates, a failed generator or solver, and the band are not.
REFINABLE = frozenset(
    {
        "schema",
        "leaks_tests",
        "build_failed",
        "build_timeout",
        "integrity",
        "verifier_error",
        "solved_by_doing_nothing",
        "oracle_failed",
        "wrong_passes",
        "hackable",
    }
)


class CurateError(ConfigurationError, RuntimeError):
    """The run cannot start or go on; the message says what to do."""


class CurateInterrupted(Interrupted, CurateError):
    """Ctrl-C or SIGTERM stopped the run: what finished is in the ledger; the same command resumes."""


@dataclass
class Session:
    config: CurateConfig
    out: Path
    ledger: Ledger
    generator: Generator
    provider: SandboxProvider
    image_map: ImageMap
    label: str
    seeds: list[SeedTask]
    existing: ShingleIndex
    console: Console
    progress: Progress

    def save(self) -> None:
        self.ledger.save(self.out)

    def proposal(self, candidate: Candidate) -> dict[str, str]:
        return json.loads((self.out / "proposals" / f"{candidate.id}.json").read_text())

    def task_dir(self, candidate: Candidate) -> Path:
        return self.out / "candidates" / candidate.id


def run_curation(config: CurateConfig, console: Console | None = None) -> CurateReport:
    """The whole pipeline into `config.out` (resuming what an earlier run there did); returns the report."""
    out = Path(config.out).resolve()
    try:
        with locked_run_dir(out):
            return asyncio.run(_curate(config.model_copy(update={"out": out}), out, console or Console()))
    except RunDirBusy as e:
        raise CurateError(str(e)) from None
    except KeyboardInterrupt:
        raise CurateInterrupted("interrupted: run the same command again to resume") from None


async def _curate(config: CurateConfig, out: Path, console: Console) -> CurateReport:
    ledger = Ledger.load(out)
    if ledger.generator and ledger.generator != config.generator:
        raise CurateError(
            f"{out} was curated with the generator {ledger.generator!r}, not {config.generator!r}: "
            "choose a new output directory"
        )
    ledger.generator = config.generator
    seeds, existing = _grounding(config)
    try:
        generator = make_generator(config.generator, config.generator_options)
    except (GeneratorError, ValueError) as e:
        raise CurateError(str(e)) from None
    provider = get_provider(config.sandbox)
    label = run_label(out)
    started = time.monotonic()
    columns = (
        TextColumn("[bold]{task.description:<10}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TextColumn("{task.fields[info]}"),
    )
    try:
        await provider.cleanup(label)
        with Progress(*columns, console=console) as progress:
            s = Session(
                config,
                out,
                ledger,
                generator,
                provider,
                ImageMap.from_config(config.image_map),
                label,
                seeds,
                existing,
                console,
                progress,
            )
            await propose(s)
            for round_ in range(config.refine_rounds + 1):
                await prune(s)
                await _each(s, "build", build)
                await _each(s, "test", test)
                await difficulty(s, round_)
                if round_ == config.refine_rounds or not await refine(s, round_):
                    break
            select(s)
    except SolverInterrupted as e:
        raise CurateInterrupted(f"{e}: run the same command again to resume") from None
    finally:
        ledger.elapsed_s = round(ledger.elapsed_s + time.monotonic() - started, 2)
        ledger.save(out)
        try:
            await asyncio.shield(provider.cleanup(label))
        finally:
            await provider.close()
            await generator.close()
    accepted = write_tasks(out, ledger, config)
    report = build_report(ledger, config, accepted)
    write_report(out, report, ledger, console)
    return report


def _grounding(config: CurateConfig) -> tuple[list[SeedTask], ShingleIndex]:
    """The seed tasks (shown to the generator) and the index of every task a candidate must not duplicate."""
    try:
        seeds = [SeedTask(t.id, read_task_files(t.path)) for t in load_tasks(config.seeds)] if config.seeds else []
        existing = load_tasks(config.existing) if config.existing else []
    except TaskLoadError as e:
        raise CurateError(f"seeds / existing: {e}") from None
    index = ShingleIndex()
    for seed in seeds:
        index.add(f"existing task {seed.id}", *task_text(seed.files))
    for t in existing:
        index.add(f"existing task {t.id}", *task_text(read_task_files(t.path)))
    return seeds, index


# ---- stages ------------------------------------------------------------------------------------------------------


async def propose(s: Session) -> None:
    todo = [i for i in range(s.config.candidates) if _lineage(i) not in s.ledger.candidates]
    bar = s.progress.add_task("propose", total=len(todo), info=s.generator.name)
    limit = asyncio.Semaphore(s.config.concurrency)
    topics = s.config.topics

    async def one(index: int) -> None:
        topic = topics[index % len(topics)] if topics else None
        candidate = Candidate(id=_lineage(index), lineage=_lineage(index), topic=topic)
        t0 = time.monotonic()
        async with limit:
            try:
                proposal = await s.generator.propose(ProposalRequest(index, topic, s.seeds, topics))
            except GeneratorError as e:
                candidate.rejected_at("propose", "generator_failed", str(e), time.monotonic() - t0)
                proposal = None
        if proposal is None and candidate.status == "pending":
            s.progress.advance(bar)
            return  # the generator has nothing more to propose
        if proposal is not None:
            candidate.generator_tokens = proposal.tokens
            _store_proposal(s, candidate, proposal.files)
            candidate.passes("propose", time.monotonic() - t0)
        s.ledger.candidates[candidate.id] = candidate
        s.save()
        s.progress.advance(bar)

    await asyncio.gather(*(one(i) for i in todo))


async def prune(s: Session) -> None:
    """In id order: a candidate is a duplicate of an earlier one that is still in the running, never the reverse."""
    waiting = sorted(s.ledger.waiting_for("prune"), key=lambda c: c.id)
    bar = s.progress.add_task("prune", total=len(waiting), info="")
    for candidate in waiting:
        t0 = time.monotonic()
        files = s.proposal(candidate)
        verdict = _prune_one(s, candidate, files)
        if verdict is None:
            candidate.passes("prune", time.monotonic() - t0)
        else:
            candidate.rejected_at("prune", *verdict, seconds=time.monotonic() - t0)
        s.save()
        s.progress.advance(bar)


def _prune_one(s: Session, candidate: Candidate, files: dict[str, str]) -> tuple[str, str] | None:
    found = problems(files)
    if found:
        return "schema", "; ".join(found)
    write_task_dir(s.task_dir(candidate), files)
    found = schema_problems(files, s.task_dir(candidate))
    if found:
        return "schema", "; ".join(found)
    leak = leaked_tests(files)
    if leak:
        return "leaks_tests", leak
    index = ShingleIndex()
    for other in s.ledger.candidates.values():
        if other.lineage != candidate.lineage and other.status in ("pending", "accepted") and "prune" in other.passed:
            index.add(f"candidate {other.id}", *task_text(s.proposal(other)))
    for text_index in (s.existing, index):
        duplicate = duplicate_of(text_index, files, s.config.duplicate_similarity)
        if duplicate:
            return "duplicate", f"{duplicate[1]:.0%} similar to {duplicate[0]}"
    return None


async def build(s: Session, candidate: Candidate) -> tuple[str, str] | None:
    return await build_environment(load_task(s.task_dir(candidate)), s.provider, s.image_map, s.label)


async def test(s: Session, candidate: Candidate) -> tuple[str, str] | None:
    return await check_grading(load_task(s.task_dir(candidate)), s.provider, s.image_map, s.label, s.config.hack_suite)


async def _each(
    s: Session, stage: str, check: Callable[[Session, Candidate], Awaitable[tuple[str, str] | None]]
) -> None:
    """Run a sandboxed check on every candidate waiting for `stage`, `concurrency` at once."""
    waiting = s.ledger.waiting_for(stage)
    bar = s.progress.add_task(stage, total=len(waiting), info="")
    limit = asyncio.Semaphore(s.config.concurrency)

    async def one(candidate: Candidate) -> None:
        async with limit:
            t0 = time.monotonic()
            verdict = await check(s, candidate)
        if verdict is None:
            candidate.passes(stage, time.monotonic() - t0)
        else:
            candidate.rejected_at(stage, *verdict, seconds=time.monotonic() - t0)
        s.save()
        s.progress.advance(bar)

    await asyncio.gather(*(one(c) for c in waiting))


async def difficulty(s: Session, round_: int) -> None:
    waiting = s.ledger.waiting_for("difficulty")
    solver = s.config.solver
    if not waiting:
        return
    if solver is None:  # nothing to estimate with: the band is not applied
        for candidate in waiting:
            candidate.passes("difficulty")
        s.save()
        return
    s.console.print(f"difficulty: {solver.backend} through {solver.harness}, {solver.attempts} attempt(s) per task")
    t0 = time.monotonic()
    dirs = {c.id: s.task_dir(c) for c in waiting}
    results = await solver_attempts(
        dirs,
        solver,
        _solver_model(s),
        s.out / "difficulty" / f"round-{round_}",
        s.config.sandbox,
        s.config.image_map,
        s.console,
    )
    share = (time.monotonic() - t0) / len(waiting)
    for candidate in waiting:
        attempts = results[candidate.id]
        candidate.solver_tokens = attempts.tokens
        if attempts.graded == 0:
            detail = "; ".join(attempts.failures) or "no attempt ran"
            candidate.rejected_at("difficulty", "solver_failed", f"no attempt could be graded: {detail}", share)
            continue
        candidate.pass_rate, candidate.graded = attempts.passed / attempts.graded, attempts.graded
        candidate.passes("difficulty", share)
    s.save()


async def refine(s: Session, round_: int) -> bool:
    """Send this round's fixable failures back to the generator with their evidence; True if any came back."""
    failed = [
        c
        for c in s.ledger.candidates.values()
        if c.round == round_ and c.status == "rejected" and c.reason in REFINABLE and not c.refine_declined
    ]
    bar = s.progress.add_task("refine", total=len(failed), info=f"round {round_ + 1}")
    limit = asyncio.Semaphore(s.config.concurrency)
    made = 0

    async def one(candidate: Candidate) -> None:
        nonlocal made
        evidence = Evidence(candidate.stage or "", candidate.reason or "", candidate.detail)
        t0 = time.monotonic()
        async with limit:
            try:
                proposal = await s.generator.refine(s.proposal(candidate), evidence, round_ + 1)
            except GeneratorError as e:  # not a refusal: a later run asks again
                s.console.print(f"[yellow]refining {candidate.id} failed[/]: {e}")
                s.progress.advance(bar)
                return
        if proposal is not None:
            child = Candidate(
                id=f"{candidate.lineage}-r{round_ + 1}",
                lineage=candidate.lineage,
                round=round_ + 1,
                topic=candidate.topic,
                generator_tokens=proposal.tokens,
            )
            _store_proposal(s, child, proposal.files)
            child.passes("propose", time.monotonic() - t0)
            s.ledger.candidates[child.id] = child
            candidate.status = "refined"
            made += 1
        else:
            candidate.refine_declined = True
        s.save()
        s.progress.advance(bar)

    await asyncio.gather(*(one(c) for c in failed if f"{c.lineage}-r{round_ + 1}" not in s.ledger.candidates))
    return made > 0 or any(c.round == round_ + 1 for c in s.ledger.candidates.values())


def select(s: Session) -> None:
    for candidate in s.ledger.waiting_for("select"):
        verdict = out_of_band(candidate, s.config.band) if s.config.solver is not None else None
        if verdict is None:
            candidate.passes("select")
            candidate.status = "accepted"
        else:
            candidate.rejected_at("select", *verdict)
    s.save()


def write_tasks(out: Path, ledger: Ledger, config: CurateConfig) -> list[Candidate]:
    """The accepted tasks as OUT/tasks/{train,heldout}/LINEAGE (rewritten whole: the split is of all of them)."""
    accepted = sorted((c for c in ledger.candidates.values() if c.status == "accepted"), key=lambda c: c.lineage)
    splits = split(accepted, config.heldout_fraction, config.seed)
    shutil.rmtree(out / "tasks", ignore_errors=True)
    for candidate in accepted:
        where = candidate.split = splits[candidate.id]
        shutil.copytree(out / "candidates" / candidate.id, out / "tasks" / where / candidate.lineage)
    ledger.save(out)
    return accepted


def _lineage(index: int) -> str:
    return f"cand-{index:04d}"


def _store_proposal(s: Session, candidate: Candidate, files: dict[str, str]) -> None:
    path = s.out / "proposals" / f"{candidate.id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(files, indent=1))


def _solver_model(s: Session) -> Path:
    """The solver's model directory: the configured one, else the tiny model built once into OUT/solver-model."""
    solver = s.config.solver
    assert solver is not None
    if solver.model is not None:
        return solver.model
    path = s.out / "solver-model"
    if not (path / "model.safetensors").is_file():
        from openforge.models import build_tiny_model

        build_tiny_model(path, seed=s.config.seed)
    return path
