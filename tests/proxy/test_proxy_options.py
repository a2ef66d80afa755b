"""A run's proxy settings from the command line and from run configs (`proxy_options`): they reach the proxy
that serves the run, and a wrong one is named with what is allowed."""

from __future__ import annotations

import socket
import subprocess
import sys

import pytest
from typing_extensions import get_type_hints

from openforge.proxy.service import check_proxy_options
from openforge.proxy.settings import RUN_OWNED_SETTINGS, ProxyOptions, ProxySettings, RunProxyOptions
from openforge.rollout.config import RolloutConfig
from openforge.train.config import TrainConfig
from openforge.train.serving import proxy_config
from support.proxy_process import start_proxy


def test_the_proxy_options_types_are_the_settings_fields():
    """`ProxyOptions` (what a run's proxy_options may set) is `ProxySettings`' fields but the run-owned ones, with
    the same types; `RunProxyOptions` adds the run's token cap. A setting added to one and not the other fails."""
    settings = {name: field.annotation for name, field in ProxySettings.model_fields.items()}
    options = get_type_hints(ProxyOptions)
    assert options == {k: v for k, v in settings.items() if k not in RUN_OWNED_SETTINGS}
    assert get_type_hints(RunProxyOptions) == {**options, "max_new_tokens": settings["max_new_tokens"]}
    assert RunProxyOptions.__required_keys__ == {"max_new_tokens"}


def test_the_cli_proxy_takes_its_settings(tmp_path, tiny_model_dir):
    """`openforge proxy --proxy-option max_connections=2`: a third connection is refused with a 503."""
    proxy = start_proxy(
        tmp_path / "run",
        tiny_model_dir,
        "embedded",
        "--proxy-option",
        "max_connections=2",
        "--proxy-option",
        "header_timeout_s=60",
    )
    try:
        host, port = proxy.url.removeprefix("http://").split(":")
        held = [socket.create_connection((host, int(port))) for _ in range(2)]
        third = socket.create_connection((host, int(port)), timeout=30)
        answer = third.recv(4096)
        for s in [*held, third]:
            s.close()
    finally:
        proxy.stop()
    assert answer.startswith(b"HTTP/1.1 503 ")


@pytest.mark.parametrize(
    ("option", "message"),
    [
        ("nope=1", "unknown proxy option(s) nope; known: body_timeout_s"),
        ("temperature=0.5", "temperature: set with the run's own option"),
        ("header_timeout_s=-1", "header_timeout_s = -1: must be greater than 0"),
        ("header_timeout_s", "expected KEY=VALUE"),
    ],
)
def test_a_wrong_proxy_option_is_named(tmp_path, option, message):
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "openforge.cli",
            "proxy",
            "--model",
            str(tmp_path),
            "--run",
            str(tmp_path / "run"),
            "--proxy-option",
            option,
        ],
        capture_output=True,
        text=True,
    )
    assert r.returncode == 2 and message in " ".join(r.stderr.split()), r.stderr


def test_run_configs_hand_their_proxy_options_to_the_proxy(tmp_path):
    config = TrainConfig.model_validate(
        {"tasks": {"families": ["create_file"]}, "proxy_options": {"generation_timeout_s": "90", "max_connections": 64}}
    )
    built = proxy_config(config, tmp_path / "model", tmp_path / "run", 1.0, tmp_path)
    assert (built.generation_timeout_s, built.max_connections, built.header_timeout_s) == (90.0, 64, 30.0)
    rollout = RolloutConfig(tasks=[tmp_path], model=tmp_path, run=tmp_path, proxy_options={"body_timeout_s": 5})
    assert rollout.proxy_options == {"body_timeout_s": 5.0}
    with pytest.raises(ValueError, match="unknown proxy option"):
        check_proxy_options({"generation_timeout": 5})
