"""Options more than one command takes, and the parsing of option values: a wrong value is an `OptionError`
naming the option (exit status 2)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, TypeVar

import typer

from openforge.cli.errors import OptionError

if TYPE_CHECKING:
    from openforge.core.json_types import JSONObject
    from openforge.proxy.settings import ProxyOptions

T = TypeVar("T")

ProxyOptionOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--proxy-option",
        help="KEY=VALUE setting of the run's proxy (repeatable), e.g. generation_timeout_s=300, "
        "header_timeout_s, body_timeout_s, max_connections, max_calls_in_flight_per_episode, stream_keepalive_s.",
    ),
]
ImageMapOpt = Annotated[
    list[str] | None,
    typer.Option(
        "--image-map",
        help="FROM=TO: use local image TO for FROM (repeatable); over the task tree's own image-map.yaml, "
        "which applies without being named.",
    ),
]
FaultsOpt = Annotated[
    str | None,
    typer.Option(
        "--faults",
        help="Faults to inject into the environment, e.g. transient:0.3,missing_dir:0.2 (kinds: "
        "transient, missing_dir, permission, disk_full, hang, flaky_service, or all; options: exclusive, seed=N, "
        "hang_s=S). eval runs every episode without and with them and reports both.",
    ),
]


def parsed(option: str, parse: Callable[[str], T], value: str) -> T:
    """`parse(value)`; its ValueError becomes an OptionError that names `option`."""
    try:
        return parse(value)
    except ValueError as e:
        raise OptionError(f"{option}: {e}") from None


def one_of(option: str, value: str | None, allowed: tuple[str | None, ...], shown: str) -> None:
    """OptionError unless `value` is one of `allowed`: "OPTION 'VALUE' is not supported; use `shown`"."""
    if value not in allowed:
        raise OptionError(f"{option} {value!r} is not supported; use {shown}")


def key_values(pairs: list[str] | None, what: str) -> JSONObject:
    """KEY=VALUE pairs; each VALUE is read as YAML (numbers and booleans become numbers and booleans)."""
    import yaml  # PyYAML's loader (0.1 s) only for a command given such pairs

    out: JSONObject = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise OptionError(f"{what} {pair!r}: expected KEY=VALUE")
        out[key.strip()] = yaml.safe_load(value) if value.strip() else ""
    return out


def parse_image_map(pairs: list[str] | None) -> dict[str, str]:
    """`--image-map FROM=TO` entries as a mapping (ImageMapError, a configuration error, names a bad one)."""
    from openforge.tasks import ImageMap  # the tasks room (0.2 s) only for a command that runs tasks

    return ImageMap.parse(pairs or []).to_dict()


def parse_proxy_options(pairs: list[str] | None) -> ProxyOptions:
    """`--proxy-option KEY=VALUE` entries, checked and converted as the run's proxy takes them."""
    from pydantic import ValidationError

    from openforge.config import describe_validation_error
    from openforge.proxy.server import ProxyConfig  # the proxy room (0.2 s) only for a command that runs one
    from openforge.proxy.settings import check_proxy_options

    try:
        return check_proxy_options(key_values(pairs, "--proxy-option"))
    except ValidationError as e:
        raise OptionError(describe_validation_error(e, ProxyConfig, "--proxy-option")) from None
    except ValueError as e:
        raise OptionError(f"--proxy-option: {e}") from None


def existing_run(run_dir: Path) -> Path:
    """`run_dir` if it holds a trajectory store; else an OptionError asking whether it is a run directory."""
    if not (run_dir / "trajectories.db").is_file():
        raise OptionError(f"{run_dir} holds no trajectories.db: is it a run directory?")
    return run_dir
