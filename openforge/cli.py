"""The `openforge` command line. Thin: each command parses options and calls into the package."""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Annotated, Optional

import typer
from rich.console import Console
from rich.markup import escape

from openforge import __version__
from openforge.rollout.config import RolloutConfig

console = Console()
err_console = Console(stderr=True)

app = typer.Typer(
    help="OpenForge: train LLM agents with RL through the real harnesses they run in.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)


def _terminate_like_ctrl_c(signum, frame) -> None:
    """SIGTERM (kubectl delete, systemd, a CI runner's timeout) stops a command as Ctrl-C does: sandboxes are
    destroyed and finished episodes kept, instead of the process dying with its containers left running."""
    handler = signal.getsignal(signal.SIGINT)
    if callable(handler):
        handler(signal.SIGINT, frame)  # asyncio's (cancels the main task) or Python's default (KeyboardInterrupt)
    else:
        raise KeyboardInterrupt


def _print_version(value: bool) -> None:
    if value:
        console.print(f"openforge {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[bool, typer.Option("--version", callback=_print_version, is_eager=True,
                                          help="Print OpenForge's version and exit.")] = False,
) -> None:
    signal.signal(signal.SIGTERM, _terminate_like_ctrl_c)


# What each optional module is installed with (`pip install 'openforge-rl[EXTRA]'`): a command that needs one
# that is missing says which extra to install instead of printing an ImportError's traceback.
_EXTRA_OF_MODULE = {
    "torch": "engine", "transformers": "engine", "safetensors": "engine", "docker": "docker",
    "kubernetes": "kubernetes", "matplotlib": "report", "pyarrow": "report", "tensorboard": "tensorboard",
    "wandb": "wandb", "mlflow": "mlflow", "trackio": "trackio", "verl": "verl",
}


def missing_extra_message(error: ModuleNotFoundError) -> str | None:
    """The fix for a missing optional module, or None when the module is not an optional one."""
    top = (error.name or "").split(".")[0]
    extra = _EXTRA_OF_MODULE.get(top)
    if extra is None:
        return None
    message = f"this command needs {top}, which is not installed: pip install 'openforge-rl[{extra}]'"
    if top == "torch" or extra == "engine":
        message += (" and PyTorch, which is not a dependency (an unpinned torch pulls a CUDA build): install the "
                    "build for your machine first, e.g. the CPU build as scripts/setup.sh does")
    return message


def main() -> None:
    """The `openforge` command (console entry point)."""
    try:
        app()
    except ModuleNotFoundError as e:
        message = missing_extra_message(e)
        if message is None:
            raise
        err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
        raise SystemExit(2) from None


model_app = typer.Typer(help="Build and inspect model directories.", no_args_is_help=True)
app.add_typer(model_app, name="model")
tasks_app = typer.Typer(help="Validate and generate Harbor-format tasks.", no_args_is_help=True)
app.add_typer(tasks_app, name="tasks")
harness_app = typer.Typer(help="Install and check the real harnesses (Claude Code, Codex CLI, OpenClaw).", no_args_is_help=True)
app.add_typer(harness_app, name="harness")
k8s_app = typer.Typer(help="Kubernetes: the manifests a run needs, and cleanup of a run's pods.", no_args_is_help=True)
app.add_typer(k8s_app, name="k8s")


def fail(message: str, code: int = 2) -> None:
    """Print the error (as plain text: `openforge-rl[engine]` is not markup; not wrapped, so a command in it can
    be copied) and exit with `code` (2: a misconfiguration, told once, with its fix)."""
    err_console.print(f"[bold red]error:[/] {escape(message)}", soft_wrap=True)
    raise typer.Exit(code)


def interrupted(e: BaseException) -> None:
    """Ctrl-C or SIGTERM stopped a training run: say where and how to go on, exit 130 (as the shell does)."""
    where = str(e) if str(e) else "interrupted: finished work is kept; continue with --resume"
    err_console.print(f"[yellow]{escape(where)}[/]", soft_wrap=True)
    raise typer.Exit(130)


@app.command()
def version() -> None:
    """Print OpenForge's version."""
    console.print(__version__)


@model_app.command("tiny")
def model_tiny(
    out_dir: Path = typer.Argument(..., help="Directory to write the model to (created if missing)."),
    seed: int = typer.Option(0, help="Seed for the tokenizer corpus and the weights."),
    vocab_size: Optional[int] = typer.Option(None, help="Tokenizer vocabulary (default 1,024): another vocabulary "
                                             "makes another tokenizer, e.g. a teacher the student cannot share ids with."),
    config: Optional[Path] = typer.Option(None, help="YAML file with the model's shape (TinyModelSpec fields)."),
) -> None:
    """Build the tiny random-init model and its tokenizer locally (no download)."""
    from pydantic import ValidationError

    from openforge.config import ConfigError, describe_validation_error, load_config
    from openforge.models import TinyModelSpec, build_tiny_model

    try:
        spec = load_config(config, TinyModelSpec) if config else TinyModelSpec(seed=seed)
        if vocab_size is not None:
            spec = TinyModelSpec(**{**spec.model_dump(), "vocab_size": vocab_size})
    except ConfigError as e:
        fail(str(e))
    except ValidationError as e:
        fail(describe_validation_error(e, TinyModelSpec, "options"))
    path = build_tiny_model(out_dir, spec=spec)
    console.print(f"tiny model written to [bold]{path}[/]")


@model_app.command("info")
def model_info(model: str = typer.Argument(..., help="A Hugging Face-format model directory, or a Hub id "
                                            "ORG/NAME[@REVISION] (read from the Hugging Face cache, fetched if "
                                            "missing unless HF_HUB_OFFLINE=1).")) -> None:
    """Show a model directory's tokenizer, context length and tool-call format."""
    from openforge.models import ModelDir, ModelDirError

    try:
        m = ModelDir(model)
    except ModelDirError as e:
        fail(str(e))
    console.print(
        f"path: {m.path}\nvocab: {m.vocab_size}\nmax context: {m.max_context}\n"
        f"eos ids: {m.eos_token_ids}\npad id: {m.pad_token_id}\ntool-call format: {m.tool_call_format}"
    )


@harness_app.command("install")
def harness_install(
    harness: Optional[list[str]] = typer.Option(None, "--harness", help="Install only these (repeatable); default: all."),
    bundle: Optional[Path] = typer.Option(None, help="Bundle directory (default: $OPENFORGE_HOME/harnesses)."),
    force: bool = typer.Option(False, help="Reinstall even what is already installed."),
) -> None:
    """Install the pinned, tested harness versions from npm into a local bundle and print their versions."""
    from openforge.harness import ALL_HARNESSES, BundleError, default_bundle_dir, install_harnesses

    try:
        versions = install_harnesses(bundle, tuple(harness or ALL_HARNESSES), console=console, force=force)
    except BundleError as e:
        fail(str(e))
    for name, v in versions.items():
        console.print(f"[green]✓[/] {name} {v}")
    console.print(f"bundle: {bundle or default_bundle_dir()}")


@harness_app.command("list")
def harness_list(bundle: Optional[Path] = typer.Option(None, help="Bundle directory.")) -> None:
    """Show each known harness, the dialect it speaks, and the version installed in the bundle."""
    from rich.table import Table

    from openforge.harness import ADAPTERS, bundle_status
    from openforge.harness.bundle import pinned_versions

    status, pinned_by_component = bundle_status(bundle), pinned_versions()
    table = Table("harness", "dialect", "pinned", "installed")
    for name, adapter in sorted(ADAPTERS.items()):
        pinned = pinned_by_component.get(adapter.component, "-") if adapter.component else "built in"
        table.add_row(name, adapter.dialect, str(pinned), str(status.get(name) or "-") if adapter.component else "built in")
    console.print(table)


@harness_app.command("image")
def harness_image(
    bundle: Optional[Path] = typer.Option(None, help="Bundle directory (default: $OPENFORGE_HOME/harnesses)."),
    base: str = typer.Option("openforge-base:bookworm", help="Local base image (needs `cp`; never pulled)."),
    tag: Optional[str] = typer.Option(None, help="Local tag (default: openforge-harnesses:<manifest hash>)."),
    push: Optional[str] = typer.Option(None, "--push", help="Registry (host, optionally /path) to tag and push the image to, e.g. registry.example/team."),
) -> None:
    """Build the harness bundle image for Kubernetes sandboxes (an init container copies the bundle from it)."""
    from openforge.harness import BundleError, default_bundle_dir
    from openforge.harness.image import build_harness_image

    try:
        built = build_harness_image(bundle or default_bundle_dir(), base=base, tag=tag, push=push)
    except BundleError as e:
        fail(str(e))
    console.print(f"built [bold]{built.tag}[/]")
    for ref in built.pushed:
        console.print(f"pushed [bold]{ref}[/]: use it with --sandbox-option harness_image={ref}")


@k8s_app.command("manifests")
def k8s_manifests(
    run: str = typer.Option(..., "--run", help="Run name (labels the run's NetworkPolicy and the proxy)."),
    namespace: str = typer.Option("openforge", help="Namespace of the proxy, the orchestrator and the sandboxes."),
    proxy_image: Optional[str] = typer.Option(None, help="Image with openforge installed, for the proxy (default: "
                                              "openforge:<version>, as scripts/build-image.sh builds it)."),
    backend: str = typer.Option("embedded", help="The proxy's inference backend (embedded | vllm:URL | sglang:URL)."),
    model_pvc: Optional[str] = typer.Option(None, help="PersistentVolumeClaim holding the model directory."),
    runs_pvc: Optional[str] = typer.Option(None, help="PersistentVolumeClaim for run directories (default: emptyDir)."),
    admin_token_secret: Optional[str] = typer.Option(None, help="Secret (key `token`) with the proxy's admin token."),
    run_label: Optional[str] = typer.Option(None, help="Sandbox label of the run, if not the run name (see `rollout`)."),
    dns: bool = typer.Option(False, help="Also let sandboxes reach kube-dns :53 (off: they reach the proxy by its "
                             "Service's cluster IP, and a name server would be a tunnel out)."),
) -> None:
    """Print (multi-document YAML) everything a run needs: Namespace, proxy Deployment + Service, RBAC for the
    orchestrator, NetworkPolicies. Apply with `kubectl apply -f -`."""
    from openforge.sandbox.kubernetes.manifests import PROXY_IMAGE, run_manifests, to_yaml

    objects = run_manifests(run, namespace_name=namespace, proxy_image=proxy_image or PROXY_IMAGE, backend=backend,
                            model_pvc=model_pvc, runs_pvc=runs_pvc, admin_token_secret=admin_token_secret,
                            allow_dns=dns, run_label=run_label)
    typer.echo(to_yaml(objects), nl=False)


@k8s_app.command("cleanup")
def k8s_cleanup(
    run: str = typer.Option(..., "--run", help="Run directory, or the run's sandbox label."),
    namespace: str = typer.Option("openforge", help="Namespace of the sandboxes."),
    kubeconfig: Optional[str] = typer.Option(None, help="kubeconfig file (default: in-cluster, else ~/.kube/config)."),
    context: Optional[str] = typer.Option(None, help="kubeconfig context."),
) -> None:
    """Delete every leftover pod of a run (label openforge.run) and its NetworkPolicy, e.g. after a crash."""
    import asyncio

    from openforge.rollout.orchestrator import run_label
    from openforge.sandbox import SandboxError, get_provider

    label = run_label(Path(run)) if Path(run).is_dir() else run

    async def clean() -> int:
        provider = get_provider("kubernetes", namespace=namespace, kubeconfig=kubeconfig, context=context)
        try:
            return await provider.cleanup(label)
        finally:
            await provider.close()

    try:
        removed = asyncio.run(clean())
    except SandboxError as e:
        fail(str(e))
    console.print(f"removed {removed} pod(s) of run {label} in namespace {namespace}")


@app.command("serve-model")
def serve_model_cmd(
    model: Path = typer.Option(..., help="Model directory to serve, or a Hugging Face Hub id ORG/NAME[@REVISION]."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    seed: int = typer.Option(0, help="Default sampling seed."),
    backend: str = typer.Option("embedded", help="embedded | scripted:FILE (a scripted policy, for tests)."),
    tool_call_parser: str = typer.Option("none", help="none: replies are the model's text; auto: tool calls and "
                                         "reasoning parsed out of it in the model's format (as vLLM's parser)."),
) -> None:
    """Serve the embedded backend over HTTP with the subset of vLLM's API that OpenForge's vllm client uses."""
    from openforge.inference import InvalidRequestError
    from openforge.inference.serve import serve_model
    from openforge.models import ModelDir, ModelDirError

    if tool_call_parser not in ("none", "auto"):
        fail(f"--tool-call-parser {tool_call_parser!r}: use none or auto")
    parse = None
    if tool_call_parser == "auto":
        from openforge.proxy.output_parser import parse_output

        try:
            tool_format = ModelDir(model).tool_call_format
        except ModelDirError as e:
            fail(str(e))

        def parse(text, tools):
            return parse_output(text, tool_format=tool_format, tools=tools)
    try:
        serve_model(model, host=host, port=port, seed=seed, backend=backend, parse_reply=parse)
    except InvalidRequestError as e:
        fail(str(e))


ProxyOptionOpt = Annotated[Optional[list[str]], typer.Option(
    "--proxy-option", help="KEY=VALUE setting of the run's proxy (repeatable), e.g. generation_timeout_s=300, "
    "header_timeout_s, body_timeout_s, max_connections, max_calls_in_flight_per_episode, stream_keepalive_s.")]


@app.command()
def proxy(
    model: Path = typer.Option(..., help="Model directory, or a Hugging Face Hub id ORG/NAME[@REVISION]: its "
                               "tokenizer and chat template render every call."),
    backend: str = typer.Option("embedded", help="embedded | vllm:URL | sglang:URL | scripted:FILE | openai:URL | "
                                "anthropic:URL (a model behind an API: key from $OPENFORGE_UPSTREAM_API_KEY)"),
    run: Path = typer.Option(..., "--run", help="Run directory: trajectories.db and proxy.json go here."),
    listen: Optional[str] = typer.Option("127.0.0.1:8100", help="HOST:PORT of the model API (port 0: any free)."),
    uds: Optional[Path] = typer.Option(None, help="Also serve the model API on this Unix socket (sandboxes reach it through a bridge)."),
    admin_listen: Optional[str] = typer.Option("127.0.0.1:8101", help="HOST:PORT of the admin API (may equal --listen)."),
    admin_uds: Optional[Path] = typer.Option(None, help="Serve the admin API on this Unix socket instead of TCP."),
    admin_token: Optional[str] = typer.Option(None, envvar="OPENFORGE_ADMIN_TOKEN", help="Admin API token (default: generated, written to RUN/proxy.json)."),
    served_model: Optional[str] = typer.Option(None, help="Model name reported to harnesses (default: the model directory's name)."),
    max_new_tokens: int = typer.Option(4096, help="Cap on tokens sampled per call, whatever the harness asks."),
    temperature: Optional[float] = typer.Option(None, help="Sample every call at this temperature (default: as requested)."),
    option: ProxyOptionOpt = None,
) -> None:
    """Run the recording proxy: harnesses call it as Anthropic / OpenAI; every call is served and recorded."""
    from pydantic import ValidationError

    from openforge.config import describe_validation_error
    from openforge.proxy.server import ProxyConfig, run_proxy
    from openforge.proxy.service import check_proxy_options

    try:
        settings = check_proxy_options(_key_values(option, "--proxy-option"))
    except ValidationError as e:
        fail(describe_validation_error(e, ProxyConfig, "--proxy-option"))
    except ValueError as e:
        fail(f"--proxy-option: {e}")
    try:
        config = ProxyConfig(
            **settings, model=model, backend=backend, run=run, listen=listen, uds=uds,
            admin_listen=None if admin_uds else admin_listen, admin_uds=admin_uds, admin_token=admin_token,
            served_model=served_model, max_new_tokens=max_new_tokens, temperature=temperature,
        )
    except ValidationError as e:
        fail(describe_validation_error(e, ProxyConfig, "options"))
    try:
        run_proxy(config)
    except (ValueError, OSError) as e:
        fail(str(e))


def _image_map(pairs: list[str] | None) -> dict[str, str]:
    from openforge.tasks import ImageMap, ImageMapError

    try:
        return ImageMap.parse(pairs or []).to_dict()
    except ImageMapError as e:
        fail(str(e))


def _rollout_config(**options):
    from pydantic import ValidationError

    from openforge.config import describe_validation_error

    try:
        return RolloutConfig(**options)
    except ValidationError as e:
        fail(describe_validation_error(e, RolloutConfig, "options"))


def _run_rollouts(config, report: bool) -> None:
    """The run's episodes; for `eval`, the report — with `--faults`, the episodes without faults in RUN and with
    faults in RUN/faults, both reported."""
    import asyncio

    from openforge.analysis import analyze_run, write_analysis
    from openforge.eval.report import write_report
    from openforge.eval.robustness import FAULTS_DIR
    from openforge.rollout import RolloutError, run_rollouts
    from openforge.store import TrajectoryStore

    faults = config.faults if report else None
    runs = [config] if faults is None else [config.model_copy(update={"faults": None}),
                                            config.model_copy(update={"run": config.run / FAULTS_DIR})]
    interrupted = False
    for run_config in runs:
        try:
            summary = asyncio.run(run_rollouts(run_config, console))
        except RolloutError as e:
            fail(str(e))
        label = f" ({'with' if run_config.faults else 'without'} faults)" if faults else ""
        console.print(f"{summary.done} episodes run{label}, {summary.skipped} already finished: "
                      + ", ".join(f"{k}={v}" for k, v in sorted(summary.outcomes.items()))
                      + (f" ({summary.tampered} failed for tampering with the verifier)" if summary.tampered else ""))
        interrupted = interrupted or summary.interrupted
        if interrupted:
            break
    if report and not interrupted:
        analysis = analyze_run(config.run)
        write_analysis(analysis, config.run)
        with TrajectoryStore.open(config.run) as store:
            write_report(store, config.run, console, analysis=analysis, faults=faults.text() if faults else None)
        console.print(f"report: {config.run / 'report.md'}, {config.run / 'report.json'}, "
                      f"{config.run / 'analysis.png'}")
    if interrupted:
        raise typer.Exit(130)
    if summary.done and not summary.graded:
        reasons = sorted(summary.failures.items(), key=lambda kv: -kv[1])
        fail("no episode could be graded; what stopped them:\n" + "\n".join(f"  {n} × {why}" for why, n in reasons[:5]),
             code=1)


# Options shared by `rollout` and `eval` (eval is rollout + a report).
TasksOpt = Annotated[list[Path], typer.Option("--tasks", help="Task directories, or roots holding them (Harbor layout).")]
HarnessOpt = Annotated[str, typer.Option(help="Harness(es), comma-separated: react, claude-code, codex, openclaw.")]
SandboxOpt = Annotated[str, typer.Option(help="docker, local or kubernetes.")]
SandboxOptionOpt = Annotated[Optional[list[str]], typer.Option(
    "--sandbox-option", help="KEY=VALUE option of the sandbox backend (repeatable), e.g. namespace=openforge.")]
ProxyListenOpt = Annotated[str, typer.Option(help="HOST:PORT of the run's proxy (model API); in-cluster 0.0.0.0:8100.")]
SamplesOpt = Annotated[int, typer.Option(help="Episodes per (task, harness); eval reports pass@k and pass^k up to it.")]
ConcurrencyOpt = Annotated[int, typer.Option(help="Episodes at once.")]
ModelOpt = Annotated[Path, typer.Option(help="Model directory (tokenizer, chat template, weights), or a Hugging Face "
                                        "Hub id ORG/NAME[@REVISION].")]
BackendOpt = Annotated[str, typer.Option(help="embedded | vllm:URL | sglang:URL | scripted:FILE | oracle | openai:URL | "
                                       "anthropic:URL (a model behind an API; key from $OPENFORGE_UPSTREAM_API_KEY)")]
RunOpt = Annotated[Path, typer.Option("--run", help="Run directory (eval writes report.md and report.json there).")]
SplitOpt = Annotated[Optional[str], typer.Option(help="Only tasks of this split (train or heldout).")]
ImageMapOpt = Annotated[Optional[list[str]], typer.Option("--image-map", help="FROM=TO: use local image TO for FROM (repeatable); over the task tree's own image-map.yaml, which applies without being named.")]
AttemptsOpt = Annotated[int, typer.Option(help="Tries per episode; only infrastructure failures are retried.")]
TimeoutOpt = Annotated[Optional[float], typer.Option(help="Harness wall-clock limit in seconds (default: each task's).")]
ResumeOpt = Annotated[bool, typer.Option(help="Continue a run: skip episodes already finished.")]
AgentUserOpt = Annotated[Optional[str], typer.Option(
    "--agent-user", help="Who the agent runs as in docker/kubernetes sandboxes: root (default, as Harbor tasks "
    "expect) or agent (unprivileged); default: each task's [agent] user, else root.")]
MaxNewTokensOpt = Annotated[Optional[int], typer.Option(
    help="Cap on tokens sampled per model call (default: RolloutConfig's); also react's own per-reply cap.")]
FaultsOpt = Annotated[Optional[str], typer.Option(
    "--faults", help="Faults to inject into the environment, e.g. transient:0.3,missing_dir:0.2 (kinds: "
    "transient, missing_dir, permission, disk_full, hang, flaky_service, or all; options: exclusive, seed=N, "
    "hang_s=S). eval runs every episode without and with them and reports both.")]


def _key_values(pairs: list[str] | None, what: str) -> dict:
    """KEY=VALUE pairs; each VALUE is read as YAML (numbers and booleans become numbers and booleans)."""
    import yaml

    out = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            fail(f"{what} {pair!r}: expected KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


def _rollout_default(name: str):
    """A `rollout` / `eval` option's default: the rollout config's own (one source)."""
    return RolloutConfig.model_fields[name].get_default(call_default_factory=True)


def _rollout_command(report: bool):
    """`rollout` and `eval` take the same options; `eval` also writes the report."""

    def command(tasks: TasksOpt, model: ModelOpt, run: RunOpt, harness: HarnessOpt = "react",
                sandbox: SandboxOpt = _rollout_default("sandbox"), samples: SamplesOpt = _rollout_default("samples"),
                concurrency: ConcurrencyOpt = _rollout_default("concurrency"),
                backend: BackendOpt = _rollout_default("backend"), split: SplitOpt = None,
                image_map: ImageMapOpt = None, max_attempts: AttemptsOpt = _rollout_default("max_attempts"),
                agent_timeout: TimeoutOpt = None, resume: ResumeOpt = False,
                sandbox_option: SandboxOptionOpt = None,
                proxy_listen: ProxyListenOpt = _rollout_default("proxy_listen"), proxy_option: ProxyOptionOpt = None,
                max_new_tokens: MaxNewTokensOpt = _rollout_default("max_new_tokens"),
                agent_user: AgentUserOpt = None, faults: FaultsOpt = None) -> None:
        config = _rollout_config(
            tasks=tasks, harnesses=[h.strip() for h in harness.split(",") if h.strip()], sandbox=sandbox,
            sandbox_options=_key_values(sandbox_option, "--sandbox-option"), proxy_listen=proxy_listen,
            proxy_options=_key_values(proxy_option, "--proxy-option"),
            samples=samples, concurrency=concurrency, model=model, backend=backend, run=run, split=split,
            image_map=_image_map(image_map), max_attempts=max_attempts, agent_timeout_s=agent_timeout,
            resume=resume, max_new_tokens=max_new_tokens, agent_user=agent_user, faults=faults,
        )
        _run_rollouts(config, report=report)

    return command


app.command("rollout", help="Run harness episodes on tasks, each in its own sandbox, graded by the task's hidden "
            "tests.")(_rollout_command(report=False))
app.command("eval", help="Rollouts plus a report: pass@k and pass^k per task, per harness and overall; outcome "
            "classes; replies cut off by a length cap or not parsed.")(_rollout_command(report=True))


@tasks_app.command("validate")
def tasks_validate(
    root: Path = typer.Argument(..., help="A task directory or a root holding several."),
    run: bool = typer.Option(False, "--run", help="Also run solve.sh (must score 1), wrong.sh (must score < 1) "
                             "and the built-in reward hacks (each must score < 1 or be flagged as tampering)."),
    sandbox: str = typer.Option("docker", help="Sandbox for --run: docker or local."),
    image_map: Optional[list[str]] = typer.Option(None, "--image-map", help="FROM=TO (repeatable)."),
    hacks: str = typer.Option("all", "--hacks", help="Reward hacks to try with --run: all, none, or names "
                              "(comma-separated; `openforge tasks hacks` lists them)."),
    report: Optional[Path] = typer.Option(None, "--report", help="With --run: write the results as JSON here "
                                          "(per task: scores, errors, every hack's verdict)."),
    concurrency: int = typer.Option(2, "--concurrency", min=1, help="Hack sandboxes at a time, per task."),
) -> None:
    """Check task directories: schema errors named; with --run, the reference and wrong solutions' scores and
    the reward hacks the verifier falls to."""
    import asyncio
    import json

    from openforge.rollout.hacks import select_hacks
    from openforge.rollout.validate import validate_task_by_running
    from openforge.tasks import ImageMap, ImageMapError, inspect_tree, load_tasks, tree_image_map

    try:
        chosen = select_hacks(hacks)
    except ValueError as e:
        fail(f"--hacks: {e}")

    reports = inspect_tree(root)
    if not reports:
        fail(f"no task directories under {root}")
    bad = 0
    for rep in reports:
        for w in rep.warnings:
            console.print(f"[yellow]warning[/] {rep.path}: {w}")
        for e in rep.errors:
            console.print(f"[red]error[/] {rep.path}: {e}")
        bad += bool(rep.errors)
    console.print(f"{len(reports) - bad}/{len(reports)} task directories are valid")
    if bad:
        raise typer.Exit(1)
    if not run:
        return
    from openforge.sandbox import get_provider

    try:  # the task tree's own image-map.yaml applies; --image-map entries override it
        mapping = tree_image_map([root])[0].merged(ImageMap.parse(image_map or []))
    except ImageMapError as e:
        fail(str(e))

    async def run_all():
        provider = get_provider(sandbox)
        try:
            return [await validate_task_by_running(t, provider, mapping, hacks=chosen, concurrency=concurrency)
                    for t in load_tasks([root])]
        finally:
            await provider.close()

    results = asyncio.run(run_all())
    for r in results:
        console.print(("[green]✓[/] " if r.ok else "[red]✗[/] ") + r.summary())
        for h in r.hacks:
            if h.fell:
                console.print(f"    [red]falls to[/] {h.hack}: {h.description}")
    if chosen:
        fallen = sorted({h.hack for r in results for h in r.hacks if h.fell})
        console.print(f"reward hacks: {len(chosen)} tried per task; "
                      + (f"[red]fallen to[/]: {', '.join(fallen)}" if fallen else "none fallen to"))
    if report is not None:
        report.parent.mkdir(parents=True, exist_ok=True)
        report.write_text(json.dumps({"sandbox": sandbox, "hacks": [h.name for h in chosen],
                                      "tasks": [r.to_json() for r in results]}, indent=1))
        console.print(f"report: {report}")
    if not all(r.ok for r in results):
        raise typer.Exit(1)


@tasks_app.command("hacks")
def tasks_hacks() -> None:
    """List the built-in reward hacks `tasks validate --run` tries (name and what it does)."""
    from openforge.rollout.hacks import HACKS

    for h in HACKS:
        console.print(f"[bold]{h.name}[/]: {h.description}")


@tasks_app.command("generate")
def tasks_generate(
    out: Path = typer.Argument(..., help="Directory to write the task directories into."),
    family: str = typer.Option("all", help="Family name(s), comma-separated, or 'all'."),
    n: int = typer.Option(10, help="Tasks per family."),
    seed: int = typer.Option(0, help="Seed."),
    split: str = typer.Option("train", help="train or heldout."),
) -> None:
    """Write parameterised task instances (Harbor layout) drawn from the generator's families."""
    from openforge.tasks import generate_family_tasks

    try:
        paths = generate_family_tasks(family, out, n, seed=seed, split=split)
    except (KeyError, ValueError) as e:
        fail(str(e))
    console.print(f"wrote {len(paths)} tasks to {out}")


@tasks_app.command("curate")
def tasks_curate(
    config: Optional[Path] = typer.Option(None, help="YAML file of CurateConfig fields (examples/curate/curate.yaml); "
                                          "the options below override it."),
    out: Optional[Path] = typer.Option(None, help="Run directory: candidates, ledger, accepted tasks (OUT/tasks), report."),
    seed_task: Optional[list[Path]] = typer.Option(None, "--seed-task", help="A seed task directory or a root of them "
                                                   "(repeatable): the generator is grounded in them; never duplicated."),
    topic: Optional[list[str]] = typer.Option(None, "--topic", help="A topic to write tasks on (repeatable)."),
    generator: Optional[str] = typer.Option(None, help="openai:URL | anthropic:URL (a generator model; key from "
                                            "$OPENFORGE_UPSTREAM_API_KEY) | scripted:FILE (a scripted generator, for tests)."),
    candidates: Optional[int] = typer.Option(None, help="Candidates to propose."),
    solver: Optional[str] = typer.Option(None, help="Backend spec of the independent solver that estimates difficulty."),
    solver_model: Optional[Path] = typer.Option(None, help="The solver's model directory (default: the tiny model)."),
    solver_harness: Optional[str] = typer.Option(None, help="The harness the solver works through (default react)."),
    attempts: Optional[int] = typer.Option(None, help="Solver attempts per task (k)."),
    band: Optional[str] = typer.Option(None, help="LOW,HIGH: keep tasks whose estimated pass rate lies in it (0.1,0.9)."),
    refine_rounds: Optional[int] = typer.Option(None, help="Rounds of sending failures back to the generator."),
    sandbox: Optional[str] = typer.Option(None, help="docker or local."),
    image_map: ImageMapOpt = None,
    hack_suite: Optional[bool] = typer.Option(None, "--hack-suite/--no-hack-suite", help="Run the reward-hack suite."),
) -> None:
    """Make tasks: propose → prune → build → test → refine → select, resumable; the funnel, the rejections with
    their reasons, and time and tokens per accepted task in OUT/report.md."""
    from openforge.config import ConfigError, read_mapping, validate_config
    from openforge.curate import CurateConfig, CurateError, run_curation

    try:
        data = read_mapping(config) if config else {}
        given = {"out": out, "seeds": seed_task, "topics": topic, "generator": generator, "candidates": candidates,
                 "refine_rounds": refine_rounds, "sandbox": sandbox, "hack_suite": hack_suite,
                 "image_map": _image_map(image_map) if image_map else None,
                 "band": [float(x) for x in band.split(",")] if band else None}
        data.update({k: v for k, v in given.items() if v is not None})
        solver_given = {"backend": solver, "model": solver_model, "harness": solver_harness, "attempts": attempts}
        if any(v is not None for v in solver_given.values()):
            data["solver"] = {**(data.get("solver") or {}), **{k: v for k, v in solver_given.items() if v is not None}}
        settings = validate_config(data, CurateConfig, source=str(config or "options"))
    except ConfigError as e:
        fail(str(e))
    except ValueError as e:
        fail(f"--band {band!r}: give LOW,HIGH, e.g. 0.1,0.9 ({e})")
    try:
        run_curation(settings, console)
    except CurateError as e:
        fail(str(e))
    except KeyboardInterrupt:
        err_console.print("[yellow]interrupted[/]: run the same command again to resume")
        raise typer.Exit(130)


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="Run directory holding trajectories.db."),
    format: str = typer.Option("jsonl", "--format", help="jsonl or parquet (one record per call), verl (a DataProto), "
                               "or atif (one ATIF trajectory.json per episode, in the directory --out)."),
    out: Path = typer.Option(..., help="File to write (atif: a directory)."),
    mode: str = typer.Option("merged", help="verl only: merged (one sample per continuity segment) or per-call."),
    pad_token_id: int | None = typer.Option(None, help="verl only: default, the pad id of the run's model."),
    model: Optional[Path] = typer.Option(None, help="atif only: the model directory whose tokenizer decodes replies "
                                         "(default: the one the run names or holds)."),
) -> None:
    """Export a run: every recorded call (jsonl, parquet), its assembled samples as a veRL DataProto (verl), or
    each episode as an ATIF trajectory (atif; any run layout: every store under RUN_DIR)."""
    from openforge.store import TrajectoryStore
    from openforge.store.export import export_calls

    if format not in ("jsonl", "parquet", "verl", "atif"):
        fail(f"--format {format!r} is not supported; use jsonl, parquet, verl or atif")
    if format == "atif":
        _export_atif(run_dir, out, model)
        return
    if not (run_dir / "trajectories.db").is_file():
        fail(f"{run_dir} holds no trajectories.db: is it a run directory?")
    if format == "verl":
        _export_verl(run_dir, out, mode, pad_token_id)
        return
    with TrajectoryStore.open(run_dir) as store:
        n = export_calls(store, out, format=format)
    console.print(f"wrote {n} calls to [bold]{out}[/]")


def _export_atif(run_dir: Path, out: Path, model: Path | None) -> None:
    from openforge.view.atif import ATIF_VERSION, export_atif

    try:
        done = export_atif(run_dir, out, model)
    except FileNotFoundError as e:
        fail(str(e))
    console.print(f"wrote {done.episodes} {ATIF_VERSION} trajectories ({len(done.stores)} store(s)) to [bold]{out}[/]")


@app.command()
def analyze(
    run_dir: Path = typer.Argument(..., help="A run directory (rollout, eval, train, quickstart, a veRL worker)."),
    reference: Optional[Path] = typer.Option(
        None, help="The oracle's run on the same tasks and harnesses (coverage and efficiency); default: RUN/teacher."),
) -> None:
    """Behaviour metrics from the recorded calls: error recovery, self-verification, tool coverage and mix,
    format robustness, step efficiency; writes RUN/analysis.json, analysis.md and analysis.png."""
    from openforge.analysis import analyze_run, write_analysis

    if not run_dir.is_dir():
        fail(f"{run_dir} is not a directory")
    if reference is not None and not (reference / "trajectories.db").is_file():
        fail(f"--reference {reference} holds no trajectories.db: give the oracle's run directory")
    try:
        analysis = analyze_run(run_dir, reference)
    except FileNotFoundError as e:
        fail(str(e))
    write_analysis(analysis, run_dir, console)


def _export_verl(run_dir: Path, out: Path, mode: str, pad_token_id: int | None) -> None:
    if mode not in ("merged", "per-call"):
        fail(f"--mode {mode!r} is not supported; use merged or per-call")
    try:
        from openforge.train.verl.batch import export_run_dataproto

        rows, metrics = export_run_dataproto(run_dir, out, mode=mode, pad_token_id=pad_token_id)
    except ImportError as e:
        fail(f"--format verl needs veRL ({e}): pip install 'openforge-rl[verl]'")
    except ValueError as e:
        fail(str(e))
    dropped = sum(metrics["episodes_dropped"].values())
    console.print(f"wrote {rows} {mode} samples of {metrics['episodes_used']} episodes ({dropped} dropped) "
                  f"to [bold]{out}[/] (DataProto.load_from_disk)")


@app.command()
def view(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories (rollout, eval, train, quickstart, a veRL job)."),
    port: int = typer.Option(8321, help="Port to listen on (0: any free port)."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on. The viewer has no login: keep it on loopback "
                             "and reach it through an SSH tunnel."),
    model: Optional[Path] = typer.Option(None, help="Model directory whose tokenizer decodes the tokens (default: "
                                         "the one the run names or holds)."),
) -> None:
    """A read-only trajectory viewer in the browser: reports and curves, episodes, conversations, token view,
    GRPO groups, comparisons."""
    from openforge.view.server import serve

    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(f"[yellow]warning:[/] serving on {host}: anyone who can reach it sees these runs")
    try:
        serve(run_dirs, host=host, port=port, model=model,
              announce=lambda url: console.print(f"viewer: {url}  (Ctrl-C to stop)", soft_wrap=True))
    except (FileNotFoundError, OSError) as e:
        fail(str(e))


verl_app = typer.Typer(help="veRL integration: datasets for veRL's trainer.", no_args_is_help=True)
app.add_typer(verl_app, name="verl")


@verl_app.command("dataset")
def verl_dataset(
    tasks: list[Path] = typer.Option(..., "--tasks", help="Task directories or roots holding them (repeatable)."),
    harness: str = typer.Option("react", help="Harness name(s), comma-separated: one row per task per harness."),
    out: Path = typer.Option(..., help="Parquet file to write."),
    split: str | None = typer.Option(None, help="Keep one split only: train or heldout."),
) -> None:
    """Write veRL's training parquet: one row per (task, harness), agent loop `openforge`."""
    from openforge.tasks.loader import TaskLoadError
    from openforge.train.verl.dataset import write_dataset

    if split not in (None, "train", "heldout"):
        fail(f"--split {split!r} is not supported; use train or heldout")
    harnesses = [h.strip() for h in harness.split(",") if h.strip()]
    try:
        rows = write_dataset(tasks, harnesses, out, split=split)
    except (TaskLoadError, ValueError) as e:
        fail(str(e))
    console.print(f"wrote {rows} rows ({len(harnesses)} harness(es)) to [bold]{out}[/]")


@app.command()
def train(
    config: Path = typer.Option(..., "--config", help="YAML: run, model, backend, tasks (dirs or families), "
                                "harnesses, sandbox, sft, rl, evaluation. See examples/train/."),
    run: Optional[Path] = typer.Option(None, "--run", help="Run directory (default: the config's `run`)."),
    resume: bool = typer.Option(False, help="Continue from the last RL checkpoint and steps.jsonl."),
    faults: FaultsOpt = None,
) -> None:
    """SFT (optional) and GRPO through the real harnesses: a progress bar, one summary line per step
    (reward, pass rate, tokens, merge rate), and RUN/report.{json,md,png} (reward and held-out pass@1). With
    --faults, GRPO's episodes meet those faults and every evaluation runs without and with them (the
    config's `faults` block sets them apart)."""
    from openforge.config import ConfigError, read_mapping, validate_config
    from openforge.train.config import TrainConfig
    from openforge.train.errors import TrainError, TrainInterrupted
    from openforge.train.pipeline import run_training

    try:
        fields = read_mapping(config)
        if faults is not None:
            fields["faults"] = faults
        settings = validate_config(fields, TrainConfig, source=str(config))
        run_training(settings, run_dir=run, resume=resume, console=console)
    except (TrainInterrupted, KeyboardInterrupt) as e:
        interrupted(e)
    except (ConfigError, TrainError) as e:
        fail(str(e))


@app.command()
def quickstart(
    run: Optional[Path] = typer.Option(None, "--run", help="Run directory (default: runs/quickstart, or "
                                       "runs/quickstart-RECIPE with --recipe)."),
    seed: Optional[int] = typer.Option(None, help="Seed for the model, tasks and sampling (default 0, or the "
                                       "config's `seed`)."),
    config: Optional[Path] = typer.Option(None, help="YAML with TrainConfig fields laid over the quickstart's "
                                          "preset (e.g. `sft: {control: true}`)."),
    smoke: bool = typer.Option(False, help="A reduced run (minutes): checks the pipeline, not the learning."),
    recipe: str = typer.Option("default", help="default; recovery: GRPO with faults injected, evaluated "
                               "with and without faults (README: the recovery recipe); harnesses: trained "
                               "through the real Claude Code binary, evaluated in react, Claude Code and Codex "
                               "(README: learning inside the real harnesses)."),
) -> None:
    """The main job: tiny model → teacher trajectories through the react harness → SFT → GRPO → held-out
    evaluation of base, SFT and SFT+RL, with a report (`openforge train` on the quickstart's preset)."""
    from openforge.config import ConfigError, read_mapping
    from openforge.train.errors import TrainError, TrainInterrupted
    from openforge.train.quickstart import quickstart_config, run_quickstart

    try:
        overrides = read_mapping(config) if config else {}
        settings = quickstart_config(overrides, seed=seed, smoke=smoke, source=str(config or "quickstart"),
                                     recipe=recipe)
        title = "Quickstart report" + (f" (recipe {recipe})" if recipe != "default" else "")
        run_quickstart(run or settings.run, settings, console=console, title=title)
    except (TrainInterrupted, KeyboardInterrupt) as e:
        interrupted(e)
    except (ConfigError, TrainError) as e:
        fail(str(e))


if __name__ == "__main__":
    main()
