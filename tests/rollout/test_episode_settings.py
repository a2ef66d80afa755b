"""`EpisodeSettings`: where and how an episode runs is declared once, with one set of defaults, and embedded by
every config that runs episodes (`RolloutConfig`, `TrainConfig`, `VerlLoopConfig`); one rule says what reaches
the harness's adapter and the proxy; a key that moved still works, with a warning naming the new key; a bad
value is named with its field and the fix."""

from __future__ import annotations

import logging
import warnings
from pathlib import Path

import pytest
import yaml

from openforge.config import ConfigError, load_config, validate_config
from openforge.proxy.service import ProxySettings
from openforge.rollout.config import RolloutConfig
from openforge.rollout.settings import EpisodeSettings
from openforge.train.config import TrainConfig
from openforge.train.verl.config import VerlLoopConfig

CONFIGS = [RolloutConfig, TrainConfig, VerlLoopConfig]
FAMILIES = {"tasks": {"families": ["create_file"]}}


def minimal(cls: type) -> dict:
    """The fewest fields each config needs."""
    return {RolloutConfig: {"tasks": ["t"], "model": "m", "run": "r"}, TrainConfig: FAMILIES, VerlLoopConfig: {}}[cls]


@pytest.mark.parametrize("cls", CONFIGS)
def test_every_config_that_runs_episodes_embeds_the_one_declaration(cls):
    assert issubclass(cls, EpisodeSettings)
    redeclared = set(EpisodeSettings.model_fields) & set(cls.__annotations__)
    assert not redeclared, f"{cls.__name__} declares {redeclared} again"
    made = cls.model_validate(minimal(cls))
    assert {k: getattr(made, k) for k in EpisodeSettings.model_fields} == EpisodeSettings().model_dump()


def test_one_set_of_defaults():
    s = EpisodeSettings()
    assert (s.sandbox, s.max_attempts, s.image_map, s.harness_options, s.agent_user, s.proxy_listen) == (
        "docker",
        3,
        {},
        {},
        None,
        "127.0.0.1:0",
    )
    assert s.max_new_tokens == ProxySettings().max_new_tokens == 4096  # the run's cap is the proxy's default


@pytest.mark.parametrize("cls", CONFIGS)
def test_the_token_cap_reaches_the_harness_unless_its_options_say_otherwise(cls):
    config = cls.model_validate(
        {**minimal(cls), "max_new_tokens": 300, "harness_options": {"claude-code": {"tools": ["Bash"]}}}
    )
    assert config.adapter_options("react") == {"max_tokens": 300}  # react's own per-reply cap
    assert config.adapter_options("claude-code") == {"tools": ["Bash"]}  # no cap of its own to set
    own = cls.model_validate({**minimal(cls), "max_new_tokens": 300, "harness_options": {"react": {"max_tokens": 50}}})
    assert own.adapter_options("react") == {"max_tokens": 50}
    assert config.proxy_settings()["max_new_tokens"] == 300


def test_a_training_runs_in_process_react_follows_the_same_rule():
    config = TrainConfig.model_validate(
        {**FAMILIES, "max_new_tokens": 300, "harness_options": {"react": {"max_steps": 2}}}
    )
    react = config.react()
    assert (react.max_tokens, react.max_steps) == (300, 2)


def test_a_moved_key_still_works_with_a_warning_naming_the_new_key(tmp_path, caplog):
    old = {**FAMILIES, "rl": {"steps": 2, "max_new_tokens": 96}}
    with (
        pytest.warns(DeprecationWarning, match=r"rl\.max_new_tokens is deprecated: it is now max_new_tokens"),
        caplog.at_level(logging.WARNING, logger="openforge.config"),
    ):
        config = TrainConfig.model_validate(old)
    assert config.max_new_tokens == 96 and config.rl.steps == 2
    assert "it is now max_new_tokens" in caplog.text  # what a person running the CLI sees on stderr
    assert old["rl"] == {"steps": 2, "max_new_tokens": 96}  # the caller's mapping is left as it was
    path = tmp_path / "old.yaml"
    path.write_text(yaml.safe_dump(old))
    with pytest.warns(DeprecationWarning):
        assert load_config(path, TrainConfig).max_new_tokens == 96
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the new key alone warns of nothing
        assert TrainConfig.model_validate({**FAMILIES, "max_new_tokens": 96}).max_new_tokens == 96


def test_the_old_and_the_new_key_together_are_refused_naming_both():
    with pytest.raises(
        ConfigError,
        match=r"rl\.max_new_tokens and max_new_tokens are both set.*keep only "
        r"max_new_tokens",
    ):
        validate_config({**FAMILIES, "max_new_tokens": 64, "rl": {"max_new_tokens": 96}}, TrainConfig, "train.yaml")


@pytest.mark.parametrize("cls", CONFIGS)
@pytest.mark.parametrize(
    ("fields", "named"),
    [
        ({"sandbox": "dockr"}, "sandbox = 'dockr': must be 'docker', 'local', 'kubernetes' or 'auto'"),
        ({"harness_options": {"react": {"max_stepz": 2}}}, "harness_options"),
        ({"harness_options": {"reakt": {}}}, "unknown harness"),
        ({"max_new_tokens": 0}, "max_new_tokens = 0: must be greater than or equal to 1"),
        ({"proxy_options": {"max_new_tokens": 5}}, "max_new_tokens: set with the run's own option"),
        ({"max_attemps": 2}, "max_attemps: unknown field; allowed fields here:"),
    ],
)
def test_a_bad_setting_is_named_with_its_field_and_the_fix(cls, fields, named):
    with pytest.raises(ConfigError) as error:
        validate_config({**minimal(cls), **fields}, cls, source="config.yaml")
    assert named in str(error.value)


def test_harness_options_name_the_harness_and_the_option():
    with pytest.raises(ConfigError, match=r"max_stepz"):
        validate_config({"harness_options": {"react": {"max_stepz": 2}}}, VerlLoopConfig)


def test_the_shipped_examples_use_the_new_keys(recwarn):
    repo = Path(__file__).resolve().parents[2]
    for path in sorted((repo / "examples" / "train").glob("*.yaml")):
        data = yaml.safe_load(path.read_text())
        data["model"] = "tiny"  # some name a model directory not present here
        validate_config(data, TrainConfig, source=str(path))
    loop = yaml.safe_load((repo / "examples" / "verl" / "agent_loop.yaml").read_text())[0]["openforge"]
    assert VerlLoopConfig.model_validate(loop).max_attempts == 1  # dropped at once, as it says
    assert not [w for w in recwarn if issubclass(w.category, DeprecationWarning)]
