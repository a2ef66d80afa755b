"""`openforge model`: build and inspect model directories. The models room is imported when a command runs
(it loads the tokenizers library: 0.4 s that `openforge --help` does without)."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.console import Console

console = Console()
model_app = typer.Typer(help="Build and inspect model directories.", no_args_is_help=True)


@model_app.command("tiny")
def model_tiny(
    out_dir: Path = typer.Argument(..., help="Directory to write the model to (created if missing)."),
    seed: int = typer.Option(0, help="Seed for the tokenizer corpus and the weights."),
    vocab_size: int | None = typer.Option(
        None,
        help="Tokenizer vocabulary (default 1,024): another vocabulary "
        "makes another tokenizer, e.g. a teacher the student cannot share ids with.",
    ),
    config: Path | None = typer.Option(None, help="YAML file with the model's shape (TinyModelSpec fields)."),
) -> None:
    """Build the tiny random-init model and its tokenizer locally (no download)."""
    from openforge.config import load_config, validate_config
    from openforge.models import TinyModelSpec, build_tiny_model

    spec = load_config(config, TinyModelSpec) if config else validate_config({"seed": seed}, TinyModelSpec, "options")
    if vocab_size is not None:
        spec = validate_config({**spec.model_dump(), "vocab_size": vocab_size}, TinyModelSpec, "options")
    path = build_tiny_model(out_dir, spec=spec)
    console.print(f"tiny model written to [bold]{path}[/]")


@model_app.command("info")
def model_info(
    model: str = typer.Argument(
        ...,
        help="A Hugging Face-format model directory, or a Hub id "
        "ORG/NAME[@REVISION] (read from the Hugging Face cache, fetched if "
        "missing unless HF_HUB_OFFLINE=1).",
    ),
) -> None:
    """Show a model directory's tokenizer, context length and tool-call format."""
    from openforge.models import ModelDir

    m = ModelDir(model)
    console.print(
        f"path: {m.path}\nvocab: {m.vocab_size}\nmax context: {m.max_context}\n"
        f"eos ids: {m.eos_token_ids}\npad id: {m.pad_token_id}\ntool-call format: {m.tool_call_format}"
    )
