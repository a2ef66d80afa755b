"""Reading the verifier's reward: ``/logs/verifier/reward.json`` (its ``reward`` key) wins over ``reward.txt``."""

from __future__ import annotations

import json
import math

from openforge.core.errors import TaskError

REWARD_DIR = "/logs/verifier"
REWARD_JSON = f"{REWARD_DIR}/reward.json"
REWARD_TXT = f"{REWARD_DIR}/reward.txt"


class RewardError(TaskError, ValueError):
    """The verifier's output does not hold a usable reward; the message says which file and why."""


def _as_reward(value: object, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise RewardError(f"{where}: expected a number, got {value!r}")
    r = float(value)
    if not math.isfinite(r):
        raise RewardError(f"{where}: reward must be finite, got {value!r}")
    return r


def read_reward(json_text: str | None, txt_text: str | None) -> float:
    """The reward from the verifier's files' contents (None = the file does not exist).

    ``reward.json`` wins when present: a number, or an object whose ``reward`` key is the reward (an object
    with a single numeric value is accepted as well). Otherwise ``reward.txt`` must hold one float.
    """
    if json_text is not None:
        if not json_text.strip():
            raise RewardError("reward.json: empty")
        try:
            data = json.loads(json_text)
        except json.JSONDecodeError as e:
            raise RewardError(f"reward.json: not valid JSON ({e.msg} at line {e.lineno} column {e.colno})") from None
        if isinstance(data, dict):
            if "reward" in data:
                return _as_reward(data["reward"], "reward.json: 'reward'")
            numeric = {k: v for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
            if len(numeric) == 1:
                ((k, v),) = numeric.items()
                return _as_reward(v, f"reward.json: {k!r}")
            keys = ", ".join(map(repr, data)) or "none"
            raise RewardError(f"reward.json: no 'reward' key (keys: {keys})")
        return _as_reward(data, "reward.json")
    if txt_text is not None:
        s = txt_text.strip()
        if not s:
            raise RewardError("reward.txt: empty")
        try:
            value = float(s)
        except ValueError:
            shown = s if len(s) <= 60 else s[:57] + "..."
            raise RewardError(f"reward.txt: {shown!r} is not a number") from None
        return _as_reward(value, "reward.txt")
    raise RewardError(f"no reward: the verifier wrote neither {REWARD_JSON} nor {REWARD_TXT}")
