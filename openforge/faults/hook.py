"""The shell hook that puts the fault rules in front of a harness's shell commands inside a sandbox.

Each harness runs the agent's commands its own way (measured with the pinned binaries in Docker):
- react: `bash -c CMD` → `BASH_ENV` is sourced first;
- Claude Code: `bash -c "source <snapshot> && ... && eval 'CMD' < /dev/null && pwd -P >| ..."`; it does not
  source `BASH_ENV` for them, but inlines the file named by `CLAUDE_ENV_FILE` into that line;
- Codex: `bash -lc` for its shell snapshot, then a wrapper that `exec`s `bash -c CMD` → `BASH_ENV`, with the
  snapshot and wrapper lines left alone;
- OpenClaw: `$SHELL --noprofile --norc -c CMD` (`sh -c CMD`, i.e. dash, when SHELL is unset), and it drops
  `BASH_ENV` (and `ENV`) from the commands' environment → `SHELL` names a wrapped bash that asks first.
The adapters declare this (`HarnessAdapter.command_hook`); the rollout room installs the files below in the
sandbox and adds the variables to the harness's environment.

The hook asks `decide.py` (`rules.py`) once per command, then lets the command run, fails it with the rule's
message, or sleeps (a hang). Shells the command starts itself (nested `bash -c`) are left alone
(`OPENFORGE_FAULT_SEEN`).
"""

from __future__ import annotations

from importlib import resources

FAULTS_DIR = "/tmp/openforge-faults"  # in the sandbox: the hook, decide.py and the episode's state
HOOK = "hook.sh"
SOURCE = "source.sh"  # one line sourcing the hook (for harnesses that inline a file into their command line)
DECIDE = "decide.py"
SHELL = "bash"  # a wrapped bash (for harnesses that run `$SHELL -c CMD` and drop BASH_ENV)

HOOK_SCRIPT = r"""# OpenForge fault injection: sourced before the agent's shell commands (README "Fault injection").
if [ -z "${OPENFORGE_FAULT_SEEN-}" ] && [ -f __DIR__/state.json ] && command -v python3 >/dev/null 2>&1; then
  __of_out=$(python3 __DIR__/decide.py __DIR__ "${OPENFORGE_FAULT_LINE-${BASH_EXECUTION_STRING-}}" 2>/dev/null) \
    || __of_out=run
  __of_head=${__of_out%%$'\n'*}
  __of_msg=${__of_out#*$'\n'}
  case "$__of_head" in
    skip) ;;
    fail\ *) export OPENFORGE_FAULT_SEEN=1; printf '%s\n' "$__of_msg" >&2; exit "${__of_head#fail }" ;;
    hang\ *) export OPENFORGE_FAULT_SEEN=1; sleep "${__of_head#hang }"; printf '%s\n' "$__of_msg" >&2; exit 124 ;;
    *) export OPENFORGE_FAULT_SEEN=1 ;;
  esac
  unset __of_out __of_head __of_msg
fi
"""


SHELL_SCRIPT = r"""#!/bin/bash
# OpenForge fault injection: bash, asking the fault hook first about the command line after -c.
__of_prev=
for __of_arg in "$@"; do
  case "$__of_prev" in -c|-[a-z]*c) OPENFORGE_FAULT_LINE=$__of_arg; break ;; esac
  __of_prev=$__of_arg
done
unset __of_prev __of_arg
if [ -n "${OPENFORGE_FAULT_LINE+x}" ]; then . __DIR__/hook.sh; fi
unset OPENFORGE_FAULT_LINE
exec /bin/bash "$@"
"""


def hook_files(directory: str = FAULTS_DIR) -> dict[str, str]:
    """{file name: content} to install in `directory` (the state file comes from the episode's plan)."""
    return {
        HOOK: HOOK_SCRIPT.replace("__DIR__", directory),
        SOURCE: f". {directory}/{HOOK}\n",
        SHELL: SHELL_SCRIPT.replace("__DIR__", directory),
        DECIDE: resources.files("openforge.faults").joinpath("rules.py").read_text(),
    }


def hook_env(template: dict[str, str], directory: str = FAULTS_DIR) -> dict[str, str]:
    """A harness's hook variables (`{hook}`: the hook script, `{source}`: the file that sources it, `{shell}`:
    the wrapped bash)."""
    return {
        k: v.format(hook=f"{directory}/{HOOK}", source=f"{directory}/{SOURCE}", shell=f"{directory}/{SHELL}")
        for k, v in template.items()
    }


__all__ = ["DECIDE", "FAULTS_DIR", "HOOK", "HOOK_SCRIPT", "SHELL", "SHELL_SCRIPT", "SOURCE", "hook_env", "hook_files"]
