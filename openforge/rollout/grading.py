"""Grading one sandbox after the agent's turn (docs/design.md, invariant 5): the tests enter only now, the
verifier runs as root, and the reward comes only from its output file (`reward.json` wins over
`reward.txt`). Shared by task validation (`openforge.rollout.validate`) and the rollout orchestrator. The task
stays data (`openforge.tasks`); running its verifier in a sandbox is the rollout room's job."""

from __future__ import annotations

from dataclasses import dataclass

from openforge.sandbox import ExecResult, Sandbox
from openforge.tasks.model import Task
from openforge.tasks.reward import REWARD_DIR, REWARD_JSON, REWARD_TXT, RewardError, read_reward

TESTS_DEST = "/tests"


@dataclass
class Grade:
    """`reward` when the verifier reported one; otherwise `error` says why (a verifier failure, never 0)."""

    reward: float | None = None
    error: str | None = None
    exit_code: int | None = None
    output: str = ""
    timed_out: bool = False


def output_of(res: ExecResult) -> str:
    return "\n".join(x for x in (res.stdout, res.stderr) if x)


def tail(s: str, n: int = 1500) -> str:
    s = s.strip()
    return s if len(s) <= n else "..." + s[-n:]


async def read_text(sb: Sandbox, path: str) -> str | None:
    """The file's text, or None when it does not exist."""
    data = await sb.read_file(path)
    if data is None:
        return None
    return data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data


async def grade(task: Task, sb: Sandbox, timeout_s: float | None = None) -> Grade:
    """Empty `/logs/verifier`, copy the task's `tests/` to `/tests`, run `bash /tests/test.sh` as root, read
    the reward. Sandbox failures propagate (`SandboxError`): they are the infrastructure's, not a grade."""
    timeout = timeout_s or task.resources.verifier_timeout_s
    await sb.exec(f"mkdir -p {REWARD_DIR} && find {REWARD_DIR} -mindepth 1 -delete", timeout_s=60, user="root",
                  workdir="/")
    await sb.copy_in(task.tests_dir, TESTS_DEST)
    r = await sb.exec(f"bash {TESTS_DEST}/test.sh", timeout_s=timeout, user="root",
                      env=dict(task.config.verifier.env) or None)
    out = Grade(exit_code=r.exit_code, output=output_of(r), timed_out=r.timed_out)
    if r.timed_out:
        out.error = f"the verifier timed out after {timeout:g}s"
        return out
    try:
        out.reward = read_reward(await read_text(sb, REWARD_JSON), await read_text(sb, REWARD_TXT))
    except RewardError as e:
        out.error = f"{e} (test.sh exited {r.exit_code}); verifier output:\n{tail(out.output)}"
    return out
