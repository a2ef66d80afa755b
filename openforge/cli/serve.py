"""The commands that serve until stopped: `serve-model`, `proxy` and `view`. Each imports its room when it
runs: serve-model's engine loads torch, which `openforge --help` and the light core must do without."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

from openforge.cli.errors import OptionError
from openforge.cli.options import ProxyOptionOpt, parse_proxy_options

console = Console()
err_console = Console(stderr=True)


def serve_model_cmd(
    model: Path = typer.Option(..., help="Model directory to serve, or a Hugging Face Hub id ORG/NAME[@REVISION]."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    seed: int = typer.Option(0, help="Default sampling seed."),
    backend: str = typer.Option("embedded", help="embedded | scripted:FILE (a scripted policy, for tests)."),
    tool_call_parser: str = typer.Option(
        "none",
        help="none: replies are the model's text; auto: tool calls and "
        "reasoning parsed out of it in the model's format (as vLLM's parser).",
    ),
) -> None:
    """Serve the embedded backend over HTTP with the subset of vLLM's API that OpenForge's vllm client uses."""
    if tool_call_parser not in ("none", "auto"):
        raise OptionError(f"--tool-call-parser {tool_call_parser!r}: use none or auto")
    from openforge.inference.serve import serve_model
    from openforge.proxy.output_parser import reply_parser

    parse = reply_parser(model) if tool_call_parser == "auto" else None
    serve_model(model, host=host, port=port, seed=seed, backend=backend, parse_reply=parse)


def proxy(
    model: Path = typer.Option(
        ...,
        help="Model directory, or a Hugging Face Hub id ORG/NAME[@REVISION]: its "
        "tokenizer and chat template render every call.",
    ),
    backend: str = typer.Option(
        "embedded",
        help="embedded | vllm:URL | sglang:URL | scripted:FILE | openai:URL | "
        "anthropic:URL (a model behind an API: key from $OPENFORGE_UPSTREAM_API_KEY)",
    ),
    run: Path = typer.Option(..., "--run", help="Run directory: trajectories.db and proxy.json go here."),
    listen: str | None = typer.Option("127.0.0.1:8100", help="HOST:PORT of the model API (port 0: any free)."),
    uds: Path | None = typer.Option(
        None, help="Also serve the model API on this Unix socket (sandboxes reach it through a bridge)."
    ),
    admin_listen: str | None = typer.Option("127.0.0.1:8101", help="HOST:PORT of the admin API (may equal --listen)."),
    admin_uds: Path | None = typer.Option(None, help="Serve the admin API on this Unix socket instead of TCP."),
    admin_token: str | None = typer.Option(
        None, envvar="OPENFORGE_ADMIN_TOKEN", help="Admin API token (default: generated, written to RUN/proxy.json)."
    ),
    served_model: str | None = typer.Option(
        None, help="Model name reported to harnesses (default: the model directory's name)."
    ),
    max_new_tokens: int = typer.Option(4096, help="Cap on tokens sampled per call, whatever the harness asks."),
    temperature: float | None = typer.Option(
        None, help="Sample every call at this temperature (default: as requested)."
    ),
    top_p: float | None = typer.Option(
        None, "--top-p", help="Sample every call with this nucleus mass, 0 < p <= 1 (default: as requested)."
    ),
    option: ProxyOptionOpt = None,
) -> None:
    """Run the recording proxy: harnesses call it as Anthropic / OpenAI; every call is served and recorded."""
    from openforge.config import validate_config
    from openforge.proxy.server import ProxyConfig, run_proxy

    config = validate_config(
        {
            **parse_proxy_options(option),
            "model": model,
            "backend": backend,
            "run": run,
            "listen": listen,
            "uds": uds,
            "admin_listen": None if admin_uds else admin_listen,
            "admin_uds": admin_uds,
            "admin_token": admin_token,
            "served_model": served_model,
            "max_new_tokens": max_new_tokens,
            "temperature": temperature,
            "top_p": top_p,
        },
        ProxyConfig,
        "options",
    )
    run_proxy(config)


def view(
    run_dirs: list[Path] = typer.Argument(..., help="Run directories (rollout, eval, train, quickstart, a veRL job)."),
    port: int = typer.Option(8321, help="Port to listen on (0: any free port)."),
    host: str = typer.Option(
        "127.0.0.1",
        help="Address to listen on. The viewer has no login: keep it on loopback and reach it through an SSH tunnel.",
    ),
    model: Path | None = typer.Option(
        None, help="Model directory whose tokenizer decodes the tokens (default: the one the run names or holds)."
    ),
) -> None:
    """A read-only trajectory viewer in the browser: reports and curves, episodes, conversations, token view,
    GRPO groups, comparisons."""
    from openforge.view.server import serve

    if host not in ("127.0.0.1", "localhost", "::1"):
        err_console.print(f"[yellow]warning:[/] serving on {host}: anyone who can reach it sees these runs")
    serve(
        run_dirs,
        host=host,
        port=port,
        model=model,
        announce=lambda url: console.print(f"viewer: {url}  (Ctrl-C to stop)", soft_wrap=True),
    )
