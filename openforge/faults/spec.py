"""Which faults to inject, how often: `--faults SPEC` and the `faults:` config block.

Text form (the command line), comma-separated:

    transient:0.3,missing_dir:0.2            each kind with its rate (chance per episode, drawn independently)
    all:0.1                                  every kind at that rate
    transient:0.5,missing_dir:0.5,exclusive  at most one fault per episode (rates then sum to at most 1)
    transient:1,seed=3,hang_s=600            options: seed (of the draws), hang_s (how long a hang lasts)

YAML form: the same as a mapping, `{transient: 0.3, missing_dir: 0.2, exclusive: true, seed: 3}`, or the
text form as one string. A bad kind, rate or option is named in the error with what is allowed.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from openforge.core.errors import ConfigurationError


class FaultKind(str, enum.Enum):
    """The faults the environment can throw at an agent (README "Fault injection" says what each does)."""

    transient = "transient"  # the first command that changes something fails once; it works when retried
    missing_dir = "missing_dir"  # a directory the straightforward solution expects is not there
    permission = "permission"  # a file the solution writes is read-only
    disk_full = "disk_full"  # writes in the work directory fail until a ballast file is deleted
    hang = "hang"  # the first command hangs: the harness's own command timeout must fire
    flaky_service = "flaky_service"  # the service the task talks to refuses the first connection


KIND_NAMES = ", ".join(k.value for k in FaultKind)


class FaultSpecError(ConfigurationError, ValueError):
    """A fault spec that cannot be read; the message names the part and what is allowed."""


class FaultSpec(BaseModel):
    """Rates per kind (0..1, the chance an episode gets that fault), the seed of the draws, `exclusive` (at
    most one fault per episode: one kind drawn with the rates as probabilities) and `hang_s` (how long a
    hanging command sleeps before it gives up by itself)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    rates: dict[FaultKind, float] = Field(default_factory=dict)
    seed: int = 0
    exclusive: bool = False
    hang_s: float = Field(default=3600.0, gt=0)

    @field_validator("rates")
    @classmethod
    def _rates_in_range(cls, v: dict[FaultKind, float]) -> dict[FaultKind, float]:
        for kind, rate in v.items():
            if not 0.0 <= rate <= 1.0:
                raise ValueError(f"rate of {kind.value} is {rate}: a rate is a probability, between 0 and 1")
        return v

    @model_validator(mode="after")
    def _exclusive_sums_to_one(self) -> FaultSpec:
        if self.exclusive and sum(self.rates.values()) > 1.0 + 1e-9:
            raise ValueError(
                f"with exclusive the rates are the chances of one kind each and must sum to at most "
                f"1, not {sum(self.rates.values()):g}"
            )
        return self

    @property
    def active(self) -> bool:
        return any(rate > 0 for rate in self.rates.values())

    def text(self) -> str:
        """The spec in its text form (parse_fault_spec reads it back)."""
        parts = [f"{k.value}:{r:g}" for k, r in self.rates.items()]
        if self.exclusive:
            parts.append("exclusive")
        if self.seed:
            parts.append(f"seed={self.seed}")
        if self.hang_s != 3600.0:
            parts.append(f"hang_s={self.hang_s:g}")
        return ",".join(parts)


OPTIONS = ("seed", "hang_s", "exclusive")


def parse_fault_spec(value: str | Mapping[str, object] | FaultSpec | None) -> FaultSpec | None:
    """A spec from its text form, a YAML mapping, or a FaultSpec; None (or "" / "none") for no faults.
    FaultSpecError names what is wrong."""
    if value is None or isinstance(value, FaultSpec):
        return value
    if isinstance(value, str):
        text = value.strip()
        if text.lower() in ("", "none", "off"):
            return None
        return _from_mapping(_text_to_mapping(text), source=repr(value))
    if isinstance(value, Mapping):
        if set(value) >= {"rates"}:  # the model's own dump
            try:
                return FaultSpec.model_validate(value)
            except ValueError as e:
                raise FaultSpecError(f"faults: {e}") from None
        return _from_mapping(value, source="faults")
    raise FaultSpecError(
        f"faults: expected a spec like 'transient:0.3,missing_dir:0.2' or a mapping, got {type(value).__name__}"
    )


def _text_to_mapping(text: str) -> dict[str, object]:
    out: dict[str, object] = {}
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        if part == "exclusive":
            out["exclusive"] = True
        elif "=" in part:
            key, _, val = part.partition("=")
            out[key.strip()] = val.strip()
        elif ":" in part:
            key, _, val = part.partition(":")
            out[key.strip()] = val.strip()
        else:
            raise FaultSpecError(
                f"fault spec part {part!r}: expected KIND:RATE (kinds: {KIND_NAMES}, or all), "
                f"OPTION=VALUE ({', '.join(OPTIONS[:2])}) or exclusive"
            )
    return out


def _from_mapping(data: Mapping[str, object], source: str) -> FaultSpec:
    rates: dict[FaultKind, float] = {}
    options: dict[str, Any] = {}  # seed, hang_s, exclusive: as given, FaultSpec validates them
    for key, val in data.items():
        key = str(key).strip().replace("-", "_")
        if key in OPTIONS:
            options[key] = val
            continue
        kinds = list(FaultKind) if key == "all" else [_kind(key, source)]
        rate = _rate(key, val, source)
        for kind in kinds:
            rates[kind] = rate
    try:
        return FaultSpec(rates=rates, **options)
    except ValueError as e:
        detail = "; ".join(err["msg"].removeprefix("Value error, ") for err in getattr(e, "errors", lambda: [])())
        detail = detail or str(e)
        raise FaultSpecError(f"{source}: {detail}") from None


def _kind(key: str, source: str) -> FaultKind:
    try:
        return FaultKind(key)
    except ValueError:
        raise FaultSpecError(
            f"{source}: unknown fault kind {key!r}; known: {KIND_NAMES} (or all), options: {', '.join(OPTIONS)}"
        ) from None


def _rate(key: str, val: object, source: str) -> float:
    not_a_number = FaultSpecError(f"{source}: rate of {key} is {val!r}: give a number between 0 and 1")
    if not isinstance(val, int | float | str):
        raise not_a_number
    try:
        rate = float(val)
    except ValueError:
        raise not_a_number from None
    if not 0.0 <= rate <= 1.0:
        raise FaultSpecError(f"{source}: rate of {key} is {rate:g}: a rate is a probability, between 0 and 1")
    return rate


__all__ = ["FaultKind", "FaultSpec", "FaultSpecError", "KIND_NAMES", "parse_fault_spec"]
