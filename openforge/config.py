"""YAML configuration files validated by pydantic, with errors a person can act on.

An invalid file names the field, the bad value, and what is allowed, e.g.
    run.yaml: rl.learning_rate = -1: must be greater than 0
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from openforge.core.errors import ConfigurationError

M = TypeVar("M", bound=BaseModel)


class ConfigError(ConfigurationError, ValueError):
    """A configuration file is unreadable or invalid; the message says where and how to fix it."""


def load_config(path: str | Path, model: type[M]) -> M:
    return validate_config(read_mapping(path), model, source=str(path))


def read_mapping(path: str | Path) -> dict[str, Any]:
    """A YAML file's top-level mapping (not validated yet); ConfigError when missing or not a mapping."""
    path = Path(path)
    if not path.is_file():
        raise ConfigError(f"{path}: no such config file")
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as e:
        raise ConfigError(f"{path}: not valid YAML: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: the top level must be a mapping of fields, got {type(data).__name__}")
    return data


def validate_config(data: dict[str, Any], model: type[M], source: str = "config") -> M:
    try:
        return model.model_validate(data)
    except ValidationError as e:
        raise ConfigError(describe_validation_error(e, model, source)) from None


def describe_validation_error(error: ValidationError, model: type[BaseModel], source: str) -> str:
    lines = [f"{source}: {error.error_count()} invalid field(s)"]
    for err in error.errors():
        field = ".".join(str(p) for p in err["loc"]) or "(top level)"
        if err["type"] == "extra_forbidden":
            allowed = _allowed_fields(model, err["loc"][:-1])
            hint = f"unknown field; allowed fields here: {', '.join(allowed)}" if allowed else "unknown field"
            lines.append(f"  {field}: {hint}")
        elif err["type"] == "missing":
            lines.append(f"  {field}: required, but missing")
        else:
            lines.append(f"  {field} = {err.get('input')!r}: {_lower_first(err['msg'])}")
    return "\n".join(lines)


def _allowed_fields(model: type[BaseModel], loc: tuple) -> list[str]:
    """Field names of the (nested) model at `loc`, when it is a plain chain of sub-models."""
    current: Any = model
    for part in loc:
        field = getattr(current, "model_fields", {}).get(part)
        if field is None or not (isinstance(field.annotation, type) and issubclass(field.annotation, BaseModel)):
            return []
        current = field.annotation
    return sorted(getattr(current, "model_fields", {}))


def _lower_first(s: str) -> str:
    s = s.replace("Input should be", "must be")
    return s[:1].lower() + s[1:]
