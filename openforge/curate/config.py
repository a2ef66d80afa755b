"""What a curation run is (YAML for `openforge tasks curate --config`, or options; errors name the field).

out: curated/                       # the run directory: candidates, ledger, accepted tasks, report
seeds: [examples/tasks/train/append-setting]     # seed task directories (grounding; never duplicated)
topics: ["text processing with sed and awk"]
generator: scripted:examples/curate/scripted_generator.py     # or openai:URL / anthropic:URL
candidates: 12
solver: {backend: "vllm:http://gpu:8000", model: models/policy, harness: react, attempts: 8}
band: [0.1, 0.9]
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from openforge.tasks.images import DEFAULT_IMAGE_MAP


class SolverSettings(BaseModel):
    """The independent model that attempts each tested task `attempts` times (its pass rate is the task's
    estimated difficulty): any backend spec through a chosen harness. `model`: the model directory the proxy
    renders with (default: the tiny model, built into OUT/solver-model — enough for scripted or API solvers)."""

    model_config = ConfigDict(extra="forbid")

    backend: str
    model: Path | None = None
    harness: str = "react"
    attempts: int = Field(default=4, ge=1)
    harness_options: dict[str, dict[str, Any]] = Field(default_factory=dict)
    max_new_tokens: int = Field(default=1024, ge=1)
    concurrency: int = Field(default=4, ge=1)

    @field_validator("harness")
    @classmethod
    def _known(cls, v: str) -> str:
        from openforge.harness import check_harness_names

        return check_harness_names([v])[0]


class Prices(BaseModel):
    """Dollars per million tokens, to report a cost per accepted task."""

    model_config = ConfigDict(extra="forbid")

    input: float = Field(ge=0)
    output: float = Field(ge=0)


class CurateConfig(BaseModel):
    model_config = ConfigDict(extra="forbid")

    out: Path = Path("curated")
    seeds: list[Path] = Field(default_factory=list)
    topics: list[str] = Field(default_factory=list, validate_default=True)
    existing: list[Path] = Field(default_factory=list)  # more task dirs candidates must not duplicate
    generator: str
    generator_options: dict[str, Any] = Field(default_factory=dict)  # e.g. {"model": "kimi-k2"} for openai:URL
    candidates: int = Field(default=8, ge=1)
    concurrency: int = Field(default=4, ge=1)  # proposals, and sandboxed checks, at once
    sandbox: Literal["docker", "local"] = "docker"
    image_map: dict[str, str] = Field(default_factory=lambda: dict(DEFAULT_IMAGE_MAP))
    duplicate_similarity: float = Field(default=0.7, gt=0.0, le=1.0)  # see prune.py
    hack_suite: bool = True
    refine_rounds: int = Field(default=1, ge=0)
    solver: SolverSettings | None = None  # None: no difficulty estimate, the band is not applied
    band: tuple[float, float] = (0.1, 0.9)
    heldout_fraction: float = Field(default=0.2, ge=0.0, lt=1.0)
    seed: int = 0
    prices: Prices | None = None

    @field_validator("topics")
    @classmethod
    def _something_to_go_on(cls, v: list[str], info: ValidationInfo) -> list[str]:
        if not v and not info.data.get("seeds"):
            raise ValueError("give seeds (task directories) or topics (a line each) to ground the generator in")
        return v

    @field_validator("band")
    @classmethod
    def _band(cls, v: tuple[float, float]) -> tuple[float, float]:
        if not 0.0 <= v[0] <= v[1] <= 1.0:
            raise ValueError("give [low, high] with 0 <= low <= high <= 1")
        return v

    @field_validator("generator")
    @classmethod
    def _generator_spec(cls, v: str) -> str:
        kind = v.partition(":")[0]
        if kind not in ("scripted", "openai", "anthropic") or not v.partition(":")[2]:
            raise ValueError(f"generator {v!r}: use scripted:FILE (a scripted generator), openai:URL or anthropic:URL")
        return v
