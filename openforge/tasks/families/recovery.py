"""Task families whose episodes can meet environment faults (`openforge.faults`), for recovery training.

Each is one shell command that appends a line to a file in a directory the task says exists (or writes one);
on about half the instances the oracle looks around first (`ls D`), as agents often do:

    instruction       "Append the line 'amber 42' to logs/k3.log."
    look (sometimes)  ls logs
    straightforward   echo 'amber 42' >> logs/k3.log        (the oracle's happy path, with no fault)

The look matters for learning, not for the task: it shows the policy a command that follows a tool result,
so after a failed command GRPO can find the command again. Without it every demonstration answers "Done."
after a tool result, and a happy-path SFT policy never samples a second command that works (measured: see the
recipe in `openforge.train.quickstart`).

Appending is not idempotent: run twice, the line is there twice and the check fails. So an agent cannot
"recover" by always repeating its command — it must read the tool result and act again only when the command
failed: re-run it after a transient failure, create the directory the fault removed (`mkdir -p D && ...`),
make the read-only file writable (`chmod u+w F && ...`).

Fault targets (what `openforge.faults` acts on): the file (permission) always; the directory (missing_dir)
when it holds nothing the check needs — the target file empty and nothing else but a hidden placeholder —,
so removing it changes neither what the instruction asks nor the expected final state. Splits as in
the family language (`language.py`): held-out (template, directory, extension) combinations and numbers.
"""

from __future__ import annotations

from collections.abc import Callable

from openforge.tasks.families.files import create_file
from openforge.tasks.families.language import KEYS, WORDS, Family, FamilyContext, FamilyInstance, instance

LOG_DIRS = ["logs", "journal", "records", "history", "events", "audit"]
CONF_DIRS = ["cfg", "conf", "settings", "profiles", "options", "prefs"]
PLACEHOLDER = ".keep"  # hidden: the check ignores it; it makes the directory exist in the initial state


def _appended(c: FamilyContext, path: str, line: str, d: str, make_existing: Callable[[int], str]) -> FamilyInstance:
    """An append task: the file exists, empty in a directory of its own (the directory can go missing) or
    with lines already (it cannot: they are part of the expected state)."""
    empty = c.rng.random() < 2 / 3
    setup = {path: "" if empty else "".join(make_existing(k) + "\n" for k in range(c.rng.randint(1, 3)))}
    if empty:
        setup[f"{d}/{PLACEHOLDER}"] = ""
    expected = {**setup, path: setup[path] + line + "\n"}
    targets = {"permission": path, **({"missing_dir": d} if empty else {})}
    sol = f"echo '{line}' >> {path}"
    inst = instance(
        "",
        setup,
        expected,
        sol,
        f"echo '{line}' > {path}" if not empty else f"{sol}; {sol}",
        path=path,
        line=line,
        state="empty" if empty else "lines",
    )
    inst.fault_targets = targets
    inst.look_command = _look(c, d)
    return inst


def _look(c: FamilyContext, d: str) -> str | None:
    """The oracle's look around before it acts, on about half the instances."""
    return f"ls {d}" if c.rng.random() < 0.5 else None


def _append_log(c: FamilyContext) -> FamilyInstance:
    path = f"{c.d}/{c.name()}.{c.ext}"
    line = f"{c.rng.choice(WORDS)} {c.number(10, 99)}"
    inst = _appended(c, path, line, c.d, lambda k: f"{c.rng.choice(WORDS)} {c.rng.randrange(10, 100)}")
    inst.instruction = f"Append the line '{line}' to {path}."
    return inst


def _add_setting(c: FamilyContext) -> FamilyInstance:
    path = f"{c.d}/{c.name()}.{c.ext}"
    key = c.rng.choice(KEYS)
    line = f"{key}={c.number(1, 99)}"
    others = [k for k in KEYS if k != key]
    inst = _appended(c, path, line, c.d, lambda k: f"{others[k]}={c.rng.randrange(1, 100)}")
    inst.instruction = f"Add the setting '{line}' to {path}."
    return inst


def _write_line(c: FamilyContext) -> FamilyInstance:
    """The file family create_file (its directory maybe missing, so its oracle runs `mkdir -p D && ...`: the fix
    a missing directory calls for elsewhere), with its file as the permission target and a look sometimes."""
    inst = create_file(c)
    path = inst.params["path"]
    inst.fault_targets = {"permission": path} if inst.params["state"] == "target_exists" else {}
    inst.look_command = _look(c, c.d)
    return inst


RECOVERY_FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family(
            "append_log",
            "Append the line 'WORD NN' to D/NAME.EXT.",
            LOG_DIRS,
            ["log", "txt", "md"],
            _append_log,
            "append a line to a file that exists (empty, or with lines)",
        ),
        Family(
            "add_setting",
            "Add the setting 'KEY=N' to D/NAME.EXT.",
            CONF_DIRS,
            ["ini", "cfg", "conf", "env"],
            _add_setting,
            "append a key=value line to a config file that exists",
        ),
        Family(
            "write_line",
            "Create the file D/NAME.EXT containing 'WORD NN'.",
            LOG_DIRS + CONF_DIRS,
            ["txt", "md", "cfg"],
            _write_line,
            "create_file (its directory may not exist yet)",
        ),
    ]
}

__all__ = ["RECOVERY_FAMILIES"]
