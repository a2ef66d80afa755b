"""Generators: what writes candidate tasks, and rewrites them with the evidence of their failure.

- `scripted:FILE` — a **scripted generator**: a Python file defining `propose(request) -> dict | None` (the
  task's files, path → text; None: nothing more to propose) and optionally `refine(files, evidence, round) ->
  dict | None` (None: it gives up). It writes a fixed mix, to test the pipeline; it makes no new tasks.
- `openai:URL`, `anthropic:URL` — a model behind an API (`model_generator.py`), asked for the six files.
"""

from __future__ import annotations

import importlib.util
import inspect
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Protocol

from openforge.core.errors import ModelError
from openforge.curate.ledger import Tokens


@dataclass
class SeedTask:
    """A task the generator is grounded in: its id and files (path → text)."""

    id: str
    files: dict[str, str]

    @property
    def instruction(self) -> str:
        return self.files.get("instruction.md", "").strip()


@dataclass
class ProposalRequest:
    """What one proposal is asked for: the `index`-th candidate, on `topic` (or none), grounded in `seeds`."""

    index: int
    topic: str | None
    seeds: list[SeedTask] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)


@dataclass
class Evidence:
    """Why a candidate failed: the stage, a short reason code, and what was seen (build log, test output)."""

    stage: str
    reason: str
    detail: str


@dataclass
class Proposal:
    files: dict[str, str]
    tokens: Tokens = field(default_factory=Tokens)


class GeneratorError(ModelError, RuntimeError):
    """The generator cannot be used (a script that does not load, an upstream that does not answer)."""


class Generator(Protocol):
    name: str

    async def propose(self, request: ProposalRequest) -> Proposal | None: ...

    async def refine(self, files: dict[str, str], evidence: Evidence, round: int) -> Proposal | None: ...

    async def close(self) -> None: ...


class ScriptedGenerator:
    """A scripted generator (see the module docstring)."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.name = f"scripted:{self.path}"
        module = _load(self.path)
        propose, refine = getattr(module, "propose", None), getattr(module, "refine", None)
        if not callable(propose):
            raise GeneratorError(f"{self.path} must define propose(request) -> dict of files, or None")
        # the script's functions, sync or async; what they return is checked (`_checked`)
        self._propose: Callable[[ProposalRequest], object] = propose
        self._refine: Callable[[dict[str, str], Evidence, int], object] | None = refine if callable(refine) else None

    async def propose(self, request: ProposalRequest) -> Proposal | None:
        files = await _maybe_await(self._propose(request))
        return None if files is None else Proposal(_checked(files, self.path))

    async def refine(self, files: dict[str, str], evidence: Evidence, round: int) -> Proposal | None:
        if self._refine is None:
            return None
        new = await _maybe_await(self._refine(dict(files), evidence, round))
        return None if new is None else Proposal(_checked(new, self.path))

    async def close(self) -> None:
        return None


def make_generator(spec: str, options: dict[str, Any] | None = None) -> Generator:
    kind, _, arg = spec.partition(":")
    if kind == "scripted":
        return ScriptedGenerator(Path(arg))
    from openforge.curate.model_generator import ModelGenerator

    return ModelGenerator(spec, options or {})


def _load(path: Path) -> ModuleType:
    if not path.is_file():
        raise GeneratorError(f"scripted generator {path} does not exist")
    spec = importlib.util.spec_from_file_location(f"openforge_generator_{uuid.uuid4().hex}", path)
    if spec is None or spec.loader is None:  # a suffix Python does not import (only .py files are scripts)
        raise GeneratorError(f"scripted generator {path} is not a Python file: name it NAME.py")
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as e:  # noqa: BLE001 - the script is the user's: say what broke
        raise GeneratorError(f"{path} failed to import: {type(e).__name__}: {e}") from e
    return module


async def _maybe_await(value: object) -> object:
    return await value if inspect.isawaitable(value) else value


def _checked(files: object, path: Path) -> dict[str, str]:
    if not isinstance(files, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in files.items()):
        raise GeneratorError(f"{path} returned {type(files).__name__}, not a dict of path → text")
    return files
