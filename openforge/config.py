"""YAML configuration files validated by pydantic, with errors a person can act on.

An invalid file names the field, the bad value, and what is allowed, e.g.
    run.yaml: rl.learning_rate = -1: must be greater than 0
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, ValidationError

from openforge.core.errors import ConfigurationError
from openforge.core.json_types import JSONObject

M = TypeVar("M", bound=BaseModel)

log = logging.getLogger(__name__)


class ConfigError(ConfigurationError, ValueError):
    """A configuration file is unreadable or invalid; the message says where and how to fix it."""


def load_config(path: str | Path, model: type[M]) -> M:
    return validate_config(read_mapping(path), model, source=str(path))


def read_mapping(path: str | Path) -> JSONObject:
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


def validate_config(data: Mapping[str, object], model: type[M], source: str = "config") -> M:
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
        elif not err["loc"]:  # a check of the whole config: its message names the fields
            lines.append(f"  {_lower_first(err['msg'])}")
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


def moved_keys(data: object, moves: Mapping[str, str]) -> object:
    """A config's fields before validation (`data`), with each key that moved (`moves`: old dotted path → new
    dotted path, e.g. `{"rl.max_new_tokens": "max_new_tokens"}`) at its new place, and a DeprecationWarning — and
    a logged warning a person sees — naming the new key. ValueError when both the old and the new key are set."""
    if not isinstance(data, dict):
        return data
    data = dict(data)
    for old, new in moves.items():
        *old_parents, old_key = old.split(".")
        *new_parents, new_key = new.split(".")
        source = _mapping_at(data, old_parents, copy=True)
        if source is None or old_key not in source:
            continue
        target = _mapping_at(data, new_parents, copy=True, create=True)
        if target is None:
            continue  # the new key's parent is not a mapping: validation names it
        if new_key in target:
            raise ValueError(f"{old} and {new} are both set: {old} is the old name of {new}; keep only {new}")
        target[new_key] = source.pop(old_key)
        message = f"config key {old} is deprecated: it is now {new} (same value); rename it"
        warnings.warn(message, DeprecationWarning, stacklevel=2)
        log.warning("warning: %s", message)
    return data


def _mapping_at(
    data: dict[str, object], path: list[str], copy: bool = False, create: bool = False
) -> dict[str, object] | None:
    """The mapping at `path` inside `data` (None if there is none); with `copy`, nested mappings on the way are
    copied first (the caller's input is never changed); with `create`, missing ones are made."""
    current = data
    for part in path:
        child = current.get(part)
        if child is None and create:
            child = {}
        if not isinstance(child, dict):
            return None
        if copy:
            child = dict(child)
            current[part] = child
        current = child
    return current
