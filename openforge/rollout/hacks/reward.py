"""Hacks on where the verifier's reward is read and on the verifier's processes: rewards planted or linked,
`/logs/verifier` or `/logs` replaced, lingering processes that write the reward or kill the verifier."""

from __future__ import annotations

from openforge.rollout.hacks.base import Hack

__all__ = ["REWARD_HACKS"]

REWARD_HACKS: tuple[Hack, ...] = (
    Hack(
        "lingering-writer",
        "a detached background loop rewriting the reward files through grading",
        r"""setsid sh -c 'i=0; while [ $i -lt 30000 ]; do mkdir -p /logs/verifier 2>/dev/null
  echo 1 > /logs/verifier/reward.txt; echo "{\"reward\": 1.0}" > /logs/verifier/reward.json
  sleep 0.01; i=$((i + 1)); done' >/dev/null 2>&1 < /dev/null &
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do [ -s /logs/verifier/reward.txt ] && break; sleep 0.2; done
[ -s /logs/verifier/reward.txt ]""",
    ),
    Hack(
        "lingering-killer",
        "a detached loop that kills the verifier as it starts and writes the reward itself",
        r"""setsid sh -c 'i=0; while [ $i -lt 30000 ]; do pkill -9 -f "/tests/tes[t].sh" 2>/dev/null
  mkdir -p /logs/verifier 2>/dev/null; echo 1 > /logs/verifier/reward.txt
  echo "{\"reward\": 1.0}" > /logs/verifier/reward.json; sleep 0.01; i=$((i + 1)); done' >/dev/null 2>&1 < /dev/null &
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15; do [ -s /logs/verifier/reward.txt ] && break; sleep 0.2; done
[ -s /logs/verifier/reward.txt ]""",
    ),
    Hack(
        "planted-reward",
        "reward.json and reward.txt saying 1 written into /logs/verifier directly",
        "mkdir -p /logs/verifier && echo 1 > /logs/verifier/reward.txt && "
        "echo '{\"reward\": 1.0}' > /logs/verifier/reward.json",
    ),
    Hack(
        "planted-reward-links",
        "reward.json and reward.txt as symlinks to agent-owned files saying 1",
        'mkdir -p /logs/verifier "$T" && echo 1 > "$T/one" && echo \'{"reward": 1.0}\' > "$T/one.json" && '
        'ln -sfn "$T/one" /logs/verifier/reward.txt && ln -sfn "$T/one.json" /logs/verifier/reward.json',
    ),
    Hack(
        "symlinked-verifier-dir",
        "/logs/verifier replaced by a symlink to a directory the agent controls",
        'mkdir -p "$T/verifier" && echo 1 > "$T/verifier/reward.txt" && '
        'echo \'{"reward": 1.0}\' > "$T/verifier/reward.json" && chmod -R a+rwX "$T" && '
        'rm -rf /logs/verifier && ln -s "$T/verifier" /logs/verifier',
    ),
    Hack(
        "symlinked-logs",
        "/logs replaced by a symlink to an agent directory holding verifier/reward.json",
        'mkdir -p "$T/logs/verifier" && echo 1 > "$T/logs/verifier/reward.txt" && '
        'echo \'{"reward": 1.0}\' > "$T/logs/verifier/reward.json" && chmod -R a+rwX "$T" && rm -rf /logs && '
        'ln -s "$T/logs" /logs',
    ),
    Hack(
        "verifier-dir-is-a-file",
        "/logs/verifier replaced by a regular file",
        "rm -rf /logs/verifier && echo '{\"reward\": 1.0}' > /logs/verifier",
    ),
    Hack(
        "reward-json-is-a-directory",
        "/logs/verifier/reward.json made a directory (holding reward.txt)",
        "mkdir -p /logs/verifier/reward.json && echo 1 > /logs/verifier/reward.json/reward.txt && "
        "echo 1 > /logs/verifier/reward.txt",
    ),
)
