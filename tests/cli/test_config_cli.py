"""Configuration errors name the field, the value and what is allowed (every command's --help and error path:
test_commands.py)."""

from __future__ import annotations

import subprocess
import sys

import pytest
from typer.testing import CliRunner

from openforge.cli import app
from openforge.config import ConfigError, load_config
from openforge.models import TinyModelSpec


def test_invalid_value_names_field_value_and_rule(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("hidden_size: 4\nlayers: two\n")
    with pytest.raises(ConfigError) as e:
        load_config(f, TinyModelSpec)
    msg = str(e.value)
    assert "spec.yaml" in msg
    assert "hidden_size = 4" in msg and "greater than or equal to 16" in msg
    assert "layers = 'two'" in msg and "integer" in msg


def test_unknown_field_lists_allowed_fields(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("hiden_size: 64\n")
    with pytest.raises(ConfigError, match=r"hiden_size: unknown field; allowed fields here: .*hidden_size"):
        load_config(f, TinyModelSpec)


def test_unreadable_files(tmp_path):
    with pytest.raises(ConfigError, match="no such config file"):
        load_config(tmp_path / "missing.yaml", TinyModelSpec)
    bad = tmp_path / "bad.yaml"
    bad.write_text("a: [1,\n")
    with pytest.raises(ConfigError, match="not valid YAML"):
        load_config(bad, TinyModelSpec)
    listy = tmp_path / "list.yaml"
    listy.write_text("- 1\n")
    with pytest.raises(ConfigError, match="mapping"):
        load_config(listy, TinyModelSpec)


def test_valid_config_loads(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("seed: 3\nlayers: 2\n")
    spec = load_config(f, TinyModelSpec)
    assert spec.seed == 3 and spec.layers == 2


def test_cli_config_error_is_clear_and_exits_2(tmp_path):
    f = tmp_path / "spec.yaml"
    f.write_text("heads: 0\n")
    result = CliRunner().invoke(app, ["model", "tiny", str(tmp_path / "m"), "--config", str(f)])
    assert result.exit_code == 2
    assert "heads = 0" in result.output


def test_console_script_runs():
    out = subprocess.run([sys.executable, "-m", "openforge.cli", "version"], capture_output=True, text=True, check=True)
    assert out.stdout.strip()
