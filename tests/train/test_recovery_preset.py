"""The recovery recipe's preset and `faults` in a training config."""

from __future__ import annotations

import pytest

from openforge.config import ConfigError
from openforge.faults import FaultKind
from openforge.tasks import RECOVERY_FAMILIES
from openforge.train.config import TrainConfig
from openforge.train.quickstart import quickstart_config


def test_recovery_recipe():
    c = quickstart_config(recipe="recovery")
    assert c.tasks.families == list(RECOVERY_FAMILIES) and str(c.run) == "runs/quickstart-recovery"
    assert c.react().max_steps == 3 and c.react().tools == ["bash"]
    assert set(c.rl_faults.rates) == {FaultKind.transient, FaultKind.missing_dir} and c.rl_faults.exclusive
    assert c.eval_faults.rates == {FaultKind.transient: 0.5, FaultKind.missing_dir: 0.5}
    assert quickstart_config().faults is None  # the default recipe has none
    with pytest.raises(ConfigError, match="unknown quickstart recipe 'recover'; known: default, recovery"):
        quickstart_config(recipe="recover")


def test_one_spec_stands_for_both_and_bad_specs_name_the_field():
    c = TrainConfig(tasks={"families": ["append_log"]}, faults="transient:0.5")
    assert c.rl_faults == c.eval_faults and c.rl_faults.rates == {FaultKind.transient: 0.5}
    assert TrainConfig.model_validate(c.model_dump(mode="json")) == c
    with pytest.raises(ValueError, match=r"faults.rl[\s\S]*rate of transient is 5"):
        TrainConfig(tasks={"families": ["append_log"]}, faults={"rl": "transient:5"})
