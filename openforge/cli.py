"""The `openforge` command line. Thin: each command parses options and calls into the package."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

from openforge import __version__

console = Console()
err_console = Console(stderr=True)

app = typer.Typer(
    help="OpenForge: train LLM agents with RL through the real harnesses they run in.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
model_app = typer.Typer(help="Build and inspect model directories.", no_args_is_help=True)
app.add_typer(model_app, name="model")


def fail(message: str, code: int = 2) -> None:
    err_console.print(f"[bold red]error:[/] {message}")
    raise typer.Exit(code)


@app.command()
def version() -> None:
    """Print OpenForge's version."""
    console.print(__version__)


@model_app.command("tiny")
def model_tiny(
    out_dir: Path = typer.Argument(..., help="Directory to write the model to (created if missing)."),
    seed: int = typer.Option(0, help="Seed for the tokenizer corpus and the weights."),
    config: Optional[Path] = typer.Option(None, help="YAML file with the model's shape (TinyModelSpec fields)."),
) -> None:
    """Build the tiny random-init model and its tokenizer locally (no download)."""
    from openforge.config import ConfigError, load_config
    from openforge.models import TinyModelSpec, build_tiny_model

    try:
        spec = load_config(config, TinyModelSpec) if config else TinyModelSpec(seed=seed)
    except ConfigError as e:
        fail(str(e))
    path = build_tiny_model(out_dir, spec=spec)
    console.print(f"tiny model written to [bold]{path}[/]")


@model_app.command("info")
def model_info(model: Path = typer.Argument(..., help="A Hugging Face-format model directory.")) -> None:
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


@app.command("serve-model")
def serve_model_cmd(
    model: Path = typer.Option(..., help="Model directory to serve."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, help="Port to listen on."),
    seed: int = typer.Option(0, help="Default sampling seed."),
) -> None:
    """Serve the embedded backend over HTTP with the subset of vLLM's API that OpenForge's vllm client uses."""
    from openforge.inference.serve import serve_model

    serve_model(model, host=host, port=port, seed=seed)


@app.command()
def export(
    run_dir: Path = typer.Argument(..., help="Run directory holding trajectories.db."),
    format: str = typer.Option("jsonl", "--format", help="jsonl or parquet."),
    out: Path = typer.Option(..., help="File to write."),
) -> None:
    """Export every recorded call of a run, one record per call."""
    from openforge.store import TrajectoryStore
    from openforge.store.export import export_calls

    if format not in ("jsonl", "parquet"):
        fail(f"--format {format!r} is not supported; use jsonl or parquet")
    if not (run_dir / "trajectories.db").is_file():
        fail(f"{run_dir} holds no trajectories.db: is it a run directory?")
    with TrajectoryStore.open(run_dir) as store:
        n = export_calls(store, out, format=format)
    console.print(f"wrote {n} calls to [bold]{out}[/]")


@app.command()
def quickstart(
    run: Path = typer.Option(Path("runs/quickstart"), "--run", help="Run directory."),
    seed: int = typer.Option(0, help="Seed for the model and sampling."),
) -> None:
    """The main job on the embedded defaults (for now: build the tiny model, serve it, make one recorded call)."""
    from openforge.quickstart import run_quickstart

    run_quickstart(run, seed=seed, console=console)


if __name__ == "__main__":
    app()
