"""Query-string parameters of the viewer's pages, read with errors that name the parameter and what it takes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import overload
from urllib.parse import urlencode

from openforge.core.errors import RequestError

MAX_TEXT = 500  # longer filter text is refused, not truncated silently


class BadParameter(RequestError, ValueError):
    pass


# With a default, a parameter always has a value: the overloads say so to the pages that read it.
@overload
def text(params: Mapping[str, str], name: str, default: str) -> str: ...
@overload
def text(params: Mapping[str, str], name: str, default: None = None) -> str | None: ...
def text(params: Mapping[str, str], name: str, default: str | None = None) -> str | None:
    value = params.get(name)
    if value is None or value == "":
        return default
    if len(value) > MAX_TEXT:
        raise BadParameter(f"{name}: at most {MAX_TEXT} characters")
    return value


def required(params: Mapping[str, str], name: str) -> str:
    value = text(params, name)
    if value is None:
        raise BadParameter(f"{name}: required")
    return value


@overload
def integer(
    params: Mapping[str, str], name: str, default: int, lo: int | None = None, hi: int | None = None
) -> int: ...
@overload
def integer(
    params: Mapping[str, str], name: str, default: None = None, lo: int | None = None, hi: int | None = None
) -> int | None: ...
def integer(
    params: Mapping[str, str], name: str, default: int | None = None, lo: int | None = None, hi: int | None = None
) -> int | None:
    value = text(params, name)
    if value is None:
        return default
    try:
        number = int(value)
    except ValueError:
        raise BadParameter(f"{name}: expected a whole number, got {value!r}") from None
    if (lo is not None and number < lo) or (hi is not None and number > hi):
        raise BadParameter(f"{name}: must be between {lo} and {hi}, got {number}")
    return number


def number(params: Mapping[str, str], name: str) -> float | None:
    value = text(params, name)
    if value is None:
        return None
    try:
        return float(value)
    except ValueError:
        raise BadParameter(f"{name}: expected a number, got {value!r}") from None


def flag(params: Mapping[str, str], name: str) -> bool:
    return text(params, name, "") in ("1", "on", "true", "yes")


def choice(params: Mapping[str, str], name: str, allowed: tuple[str, ...], default: str) -> str:
    value = text(params, name, default)
    if value not in allowed:
        raise BadParameter(f"{name}: one of {', '.join(allowed)}, not {value!r}")
    return value


def url(path: str, **query: object) -> str:
    """`path?query` with the parameters that are set (None and "" left out), encoded."""
    kept = {k: v for k, v in query.items() if v is not None and v != "" and v is not False}
    kept = {k: (1 if v is True else v) for k, v in kept.items()}
    return f"{path}?{urlencode(kept)}" if kept else path
