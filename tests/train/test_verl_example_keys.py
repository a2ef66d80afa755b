"""examples/verl/run_grpo.sh passes only keys veRL 0.9.1's trainer config has (its generated YAML), the LoRA
and asynchronous-GRPO ones included, with values its checks accept."""

from __future__ import annotations

import re
import subprocess

from conftest import unavailable
from support.paths import REPO
from support.verl import VERL_CONFIG

SCRIPT = REPO / "examples" / "verl" / "run_grpo.sh"


def verl_config():
    try:
        import verl
        from omegaconf import OmegaConf
    except ImportError as e:
        unavailable(f"veRL is not importable ({e}): run scripts/prepare-test-env.sh")
    from pathlib import Path

    return OmegaConf.load(Path(verl.__file__).parent.parent / VERL_CONFIG)


def overrides(env: dict[str, str]) -> dict[str, str]:
    """The key=value overrides the script hands veRL with `env` set (python3 stands in for veRL's entry point)."""
    probe = "import json, sys; print(json.dumps(sys.argv[1:]))"
    script = SCRIPT.read_text().replace("python3 -m verl.trainer.main_ppo", f"python3 -c '{probe}'")
    out = subprocess.run(  # $0 is the script's own path, as when it is run
        ["bash", "-c", script, str(SCRIPT)], env={"PATH": "/usr/bin:/bin", **env}, capture_output=True, text=True
    )
    assert out.returncode == 0, out.stderr
    import json

    return dict(arg.split("=", 1) for arg in json.loads(out.stdout.strip().splitlines()[-1]))


def has_key(config, key: str) -> bool:
    node = config
    for part in key.split("."):
        if part not in node.keys():  # keys(), not `in`: a required value (`???`) is a key all the same
            return False
        node = node._get_node(part)
    return True


def test_every_key_of_the_example_is_one_of_verls():
    config = verl_config()
    written = set(re.findall(r"^\s*([a-z_]+(?:\.[a-z_0-9]+)+)=", SCRIPT.read_text(), re.M))
    missing = sorted(k for k in written if not has_key(config, k))
    assert not missing, f"keys veRL 0.9.1 does not have: {missing}"
    assert {"trainer.v1.sampler.max_off_policy_threshold", "actor_rollout_ref.model.lora_rank"} <= written


def test_lora_and_staleness_map_to_verls_settings():
    plain = overrides({})
    assert "actor_rollout_ref.model.lora_rank" not in plain and "trainer.v1.trainer_mode" not in plain
    both = overrides({"LORA_RANK": "32", "MAX_STALENESS": "2"})
    assert both["actor_rollout_ref.model.lora_rank"] == "32" and both["actor_rollout_ref.model.lora_alpha"] == "64"
    assert both["actor_rollout_ref.rollout.load_format"] == "safetensors"
    assert both["trainer.v1.trainer_mode"] == "colocate_async"
    assert both["trainer.v1.sampler.max_off_policy_threshold"] == "2"  # veRL requires an int > 0: 0 is sync
    assert both["trainer.v1.sampler.max_off_policy_strategy"] == "drop"
    assert both["algorithm.rollout_correction.rollout_is"] == "token"
