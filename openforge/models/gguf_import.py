"""Import a GGUF file as a Hugging Face model directory: transformers dequantises it (any architecture it can
read), the weights are saved as plain safetensors without a quantisation config, and the import is checked by
comparing the saved model's logits with the GGUF-loaded model's on a few prompts. The directory records where it
came from (`openforge-source.json`: file, hash, quantisation, package).

Needs the `engine` extra and `gguf` (the `gguf` extra); both are imported when an import runs."""

from __future__ import annotations

import hashlib
import json
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from openforge.core.errors import ModelError

__all__ = ["CHECK_PROMPTS", "GGUFHeader", "ImportReport", "ModelImportError", "import_gguf", "read_gguf_header"]

SOURCE_FILE = "openforge-source.json"
CHECK_PROMPTS = (
    "The capital of France is",
    "def add(a, b):\n    return",
    "<|im_start|>user\nList the files in /tmp.<|im_end|>\n<|im_start|>assistant\n",
)
# dequantised weights are float32 in both models: the saved model must give the same logits up to float noise
LOGITS_TOLERANCE = 1e-4


class ModelImportError(ModelError, ValueError):
    """A model file cannot be imported (an architecture or quantisation transformers cannot read, a file that
    is not GGUF, logits that differ after the import); the message names it and what can be done."""


@dataclass(frozen=True)
class GGUFHeader:
    """What a GGUF file says about itself, read without loading its tensors."""

    architecture: str
    name: str | None
    file_type: str | None  # the dominant quantisation, e.g. "Q4_1" (GGUF's general.file_type)
    tensor_types: dict[str, int]  # type name -> tensors of that type


@dataclass
class ImportReport:
    """What an import did: where the model went, what it came from and how far its logits moved."""

    out: Path
    header: GGUFHeader
    sha256: str
    parameters: int
    logits_max_abs_diff: float
    source: dict[str, Any] = field(default_factory=dict)


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def read_gguf_header(path: Path) -> GGUFHeader:
    """The architecture, name and quantisation of a GGUF file (`ModelImportError` if it is not one)."""
    import gguf

    try:
        reader = gguf.GGUFReader(str(path))
    except (ValueError, OSError, IndexError) as e:
        raise ModelImportError(f"{path} is not a GGUF file transformers can read ({e})") from None

    def text(key: str) -> str | None:
        f = reader.fields.get(key)
        return None if f is None else bytes(f.parts[f.data[0]]).decode("utf-8", "replace")

    architecture = text("general.architecture")
    if architecture is None:
        raise ModelImportError(f"{path} names no architecture (general.architecture): not a model GGUF file")
    file_type = None
    if (ft := reader.fields.get("general.file_type")) is not None:
        value = int(ft.parts[ft.data[0]][0])
        known = {t.value: t.name for t in gguf.LlamaFileType}
        file_type = known[value].removeprefix("MOSTLY_") if value in known else None
    types: dict[str, int] = {}
    for t in reader.tensors:
        types[t.tensor_type.name] = types.get(t.tensor_type.name, 0) + 1
    return GGUFHeader(architecture, text("general.name"), file_type, types)


def _check_readable(path: Path, header: GGUFHeader) -> None:
    """Refuse, before the slow load, what transformers cannot dequantise: an architecture it has no mapping for,
    a tensor type gguf's dequantiser does not implement."""
    import gguf
    import numpy as np
    from transformers.modeling_gguf_pytorch_utils import GGUF_SUPPORTED_ARCHITECTURES

    if header.architecture not in GGUF_SUPPORTED_ARCHITECTURES:
        raise ModelImportError(
            f"{path.name}: architecture {header.architecture!r} cannot be read from GGUF by the installed "
            f"transformers (it reads {', '.join(sorted(GGUF_SUPPORTED_ARCHITECTURES))}); use the model's Hugging "
            "Face release instead, or a transformers version that reads it"
        )
    plain = {"F32", "F16", "BF16"}
    for name in set(header.tensor_types) - plain:
        qtype = gguf.GGMLQuantizationType[name]
        block, size = gguf.GGML_QUANT_SIZES[qtype]
        try:
            gguf.quants.dequantize(np.zeros((1, size), dtype=np.uint8), qtype)
        except NotImplementedError:
            raise ModelImportError(
                f"{path.name}: its {name} tensors cannot be dequantised by the installed gguf package; use a "
                "file of another quantisation (Q4_0, Q4_1, Q8_0, Q4_K, ... or F16)"
            ) from None


def import_gguf(
    gguf_file: Path,
    out: Path,
    *,
    chat_template: str | None = None,
    source: dict[str, Any] | None = None,
    prompts: tuple[str, ...] = CHECK_PROMPTS,
) -> ImportReport:
    """Dequantise `gguf_file` into the model directory `out` (safetensors, tokenizer, config without
    quantisation); `chat_template` replaces the file's own; `source` adds to the recorded provenance (a package
    and its version). Checks the saved model's logits against the GGUF-loaded model's on `prompts`."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    gguf_file = Path(gguf_file)
    if not gguf_file.is_file():
        raise ModelImportError(f"{gguf_file} does not exist")
    header = read_gguf_header(gguf_file)
    _check_readable(gguf_file, header)
    where, name = str(gguf_file.parent), gguf_file.name
    try:
        tokenizer = AutoTokenizer.from_pretrained(where, gguf_file=name)
        loaded = AutoModelForCausalLM.from_pretrained(where, gguf_file=name, dtype=torch.float32)
    except (ValueError, NotImplementedError, KeyError) as e:
        raise ModelImportError(f"transformers cannot load {name}: {e}") from None
    loaded.eval()
    # save_pretrained refuses a GGUF-quantised model: rebuild it from its config without the quantisation
    config = loaded.config
    if hasattr(config, "quantization_config"):
        del config.quantization_config
    plain = AutoModelForCausalLM.from_config(config, dtype=torch.float32)
    plain.load_state_dict(loaded.state_dict())
    plain.eval()
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=out.parent, prefix=f".{out.name}-") as staging:
        plain.save_pretrained(staging, safe_serialization=True)
        tokenizer.save_pretrained(staging)
        if chat_template is not None:
            (Path(staging) / "chat_template.jinja").write_text(chat_template)
            _drop_template_from_tokenizer_config(Path(staging))
        saved = AutoModelForCausalLM.from_pretrained(staging, dtype=torch.float32).eval()
        diff = _max_logit_diff(loaded, saved, tokenizer, prompts)
        if diff > LOGITS_TOLERANCE:
            raise ModelImportError(
                f"{name}: the saved model's logits differ from the GGUF model's by {diff:.3g} (> {LOGITS_TOLERANCE})"
            )
        digest = file_sha256(gguf_file)
        recorded = {
            "file": name,
            "sha256": digest,
            "architecture": header.architecture,
            "name": header.name,
            "dequantised_from": header.file_type,
            "tensor_types": header.tensor_types,
            "logits_max_abs_diff": diff,
            "check_prompts": len(prompts),
            **(source or {}),
        }
        (Path(staging) / SOURCE_FILE).write_text(json.dumps(recorded, indent=2) + "\n")
        for item in Path(staging).iterdir():
            item.replace(out / item.name)
    parameters = sum(p.numel() for p in plain.parameters())
    return ImportReport(out, header, digest, parameters, diff, recorded)


def _drop_template_from_tokenizer_config(model_dir: Path) -> None:
    """chat_template.jinja is the template; a second one in tokenizer_config.json would only disagree."""
    path = model_dir / "tokenizer_config.json"
    if path.is_file():
        cfg = json.loads(path.read_text())
        if cfg.pop("chat_template", None) is not None:
            path.write_text(json.dumps(cfg, indent=2) + "\n")


def _max_logit_diff(a: Any, b: Any, tokenizer: Any, prompts: tuple[str, ...]) -> float:
    import torch

    worst = 0.0
    with torch.no_grad():
        for prompt in prompts:
            ids = tokenizer(prompt, return_tensors="pt").input_ids
            worst = max(worst, float((a(ids).logits - b(ids).logits).abs().max()))
    return worst
