"""Every command of `openforge` (found in the Typer app, recursively) answers `--help`, and has its error path
checked here: a bad argument or configuration ends with exit status 2 and one message that names the fix; a
failure of the work ends with exit status 1 and one message. A command added without a case below fails
`test_every_command_has_an_error_path`."""

from __future__ import annotations

import sqlite3
from dataclasses import dataclass
from pathlib import Path

import pytest
import typer.main
from typer.testing import CliRunner

from openforge.cli import app


def command_paths(group=None, prefix: tuple[str, ...] = ()) -> list[tuple[tuple[str, ...], bool]]:
    """(path, is a group) of every command under the app, the app itself first."""
    group = group or typer.main.get_command(app)
    subcommands = getattr(group, "commands", {})
    found = [(prefix, bool(subcommands))]
    for name, sub in subcommands.items():
        found += command_paths(sub, prefix + (name,))
    return found


COMMANDS = [path for path, is_group in command_paths() if not is_group]
GROUPS = [path for path, is_group in command_paths() if is_group]


@dataclass
class Case:
    argv: list[str]  # "{tmp}" is a fresh directory; "{model}" the tiny model
    status: int
    says: str  # in the one message
    setup: str = ""  # what to make in {tmp} first (see `prepare`)
    one_error: bool = True  # ends with one error message (a check's verdict instead prints what it found)


# The error path of each command: `command path → cases`.
CASES: dict[tuple[str, ...], list[Case]] = {
    ("version",): [Case(["version", "extra"], 2, "unexpected extra argument")],
    ("serve-model",): [
        Case(
            ["serve-model", "--model", "{tmp}", "--tool-call-parser", "x"],
            2,
            "--tool-call-parser 'x': use none or auto",
        )
    ],
    ("proxy",): [
        Case(
            ["proxy", "--model", "{tmp}", "--run", "{tmp}/run", "--proxy-option", "nope=1"],
            2,
            "unknown proxy option(s) nope; known:",
        ),
        Case(
            [
                "proxy",
                "--model",
                "{model}",
                "--backend",
                "vllm:http://127.0.0.1:9",
                "--run",
                "{tmp}/run",
                "--listen",
                "127.0.0.1:0",
                "--admin-listen",
                "127.0.0.1:0",
            ],
            1,
            "cannot connect to vLLM",
        ),
    ],
    ("rollout",): [
        Case(
            ["rollout", "--tasks", "{tmp}/none", "--model", "{tmp}", "--run", "{tmp}/run"], 2, "none: no such directory"
        )
    ],
    ("eval",): [
        Case(
            ["eval", "--tasks", "{tmp}", "--model", "{tmp}", "--run", "{tmp}/run", "--faults", "nope:1"],
            2,
            "unknown fault kind 'nope'",
        )
    ],
    ("export",): [
        Case(["export", "{tmp}", "--format", "xml", "--out", "{tmp}/x"], 2, "--format 'xml' is not supported"),
        Case(["export", "{tmp}", "--out", "{tmp}/calls.jsonl"], 1, "upgrade OpenForge", setup="newer store"),
    ],
    ("analyze",): [
        Case(["analyze", "{tmp}/missing"], 2, "is not a directory"),
        Case(["analyze", "{tmp}"], 1, "upgrade OpenForge", setup="newer store"),
    ],
    ("view",): [Case(["view", "{tmp}", "--port", "0"], 2, "holds no trajectories.db")],
    ("train",): [Case(["train", "--config", "{tmp}/train.yaml"], 2, "rl.steps = 'many'", setup="bad train config")],
    ("quickstart",): [Case(["quickstart", "--recipe", "nope"], 2, "unknown quickstart recipe 'nope'")],
    ("model", "tiny"): [Case(["model", "tiny", "{tmp}/m", "--vocab-size", "1"], 2, "vocab_size = 1")],
    ("model", "info"): [Case(["model", "info", "{tmp}/missing"], 2, "does not exist")],
    ("model", "import"): [Case(["model", "import", "{tmp}/none.gguf", "{tmp}/out"], 2, "does not exist")],
    ("model", "get"): [Case(["model", "get", "gpt-9", "{tmp}/out"], 2, "unknown packaged model 'gpt-9'")],
    ("tasks", "validate"): [
        Case(["tasks", "validate", "{tmp}", "--hacks", "nope"], 2, "--hacks: unknown hack(s) nope"),
        Case(["tasks", "validate", "{tmp}"], 1, "0/1 task directories are valid", one_error=False),
    ],
    ("tasks", "hacks"): [Case(["tasks", "hacks", "extra"], 2, "unexpected extra argument")],
    ("tasks", "generate"): [
        Case(["tasks", "generate", "{tmp}/out", "--family", "nope"], 2, "unknown task family nope; known:")
    ],
    ("tasks", "curate"): [
        Case(["tasks", "curate", "--band", "a,b"], 2, "--band 'a,b': give LOW,HIGH"),
        # a solver option over a config whose `solver` is no mapping: validation names it (it was a TypeError)
        Case(
            ["tasks", "curate", "--config", "{tmp}/curate.yaml", "--solver-harness", "react"],
            2,
            "solver = 'nope': must be a valid dictionary",
            setup="scalar solver",
        ),
    ],
    ("harness", "install"): [
        Case(["harness", "install", "--harness", "nope", "--bundle", "{tmp}"], 2, "unknown harness(es) nope")
    ],
    ("harness", "list"): [Case(["harness", "list", "--nope"], 2, "No such option")],
    ("harness", "image"): [Case(["harness", "image", "--bundle", "{tmp}"], 2, "openforge harness install")],
    ("k8s", "manifests"): [Case(["k8s", "manifests"], 2, "Missing option '--run'")],
    ("k8s", "cleanup"): [
        Case(["k8s", "cleanup", "--run", "x", "--kubeconfig", "{tmp}/missing"], 2, "no Kubernetes credentials")
    ],
    ("verl", "dataset"): [
        Case(
            ["verl", "dataset", "--tasks", "{tmp}", "--out", "{tmp}/x.parquet", "--split", "x"],
            2,
            "--split 'x' is not supported; use train or heldout",
        )
    ],
}


def prepare(setup: str, tmp: Path) -> None:
    if setup == "newer store":  # a run written by a newer OpenForge: the store refuses it
        with sqlite3.connect(tmp / "trajectories.db") as db:
            db.execute("PRAGMA user_version = 999")
    elif setup == "scalar solver":
        (tmp / "curate.yaml").write_text("solver: nope\n")
    elif setup == "bad train config":
        (tmp / "train.yaml").write_text("tasks: {families: [create_file]}\nrl: {steps: many}\n")


def flat(text: str) -> str:
    """The output without rich's line wrapping and panel borders."""
    return " ".join(text.replace("│", " ").split())


def test_every_command_has_an_error_path():
    assert len(COMMANDS) >= 22 and ("tasks", "validate") in COMMANDS
    assert sorted(set(COMMANDS) - set(CASES)) == []  # a new command needs its case here
    assert sorted(set(CASES) - set(COMMANDS)) == []


@pytest.mark.parametrize("path", [p for p, _ in command_paths()], ids=lambda p: " ".join(p) or "openforge")
def test_help(path):
    result = CliRunner().invoke(app, [*path, "--help"])
    assert result.exit_code == 0, result.output
    assert "Usage" in result.output


@pytest.mark.parametrize("group", [g for g in GROUPS if g], ids=" ".join)
def test_a_group_names_an_unknown_command(group):
    result = CliRunner().invoke(app, [*group, "nope"])
    assert result.exit_code == 2 and "No such command 'nope'" in flat(result.output)


@pytest.mark.parametrize(
    ("path", "case"),
    [(p, c) for p, cases in CASES.items() for c in cases],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else f"exit {v.status}",
)
def test_error_path(path, case, tmp_path, tiny_model_dir):
    prepare(case.setup, tmp_path)
    argv = [a.replace("{tmp}", str(tmp_path)).replace("{model}", str(tiny_model_dir)) for a in case.argv]
    result = CliRunner().invoke(app, argv)
    output = flat(result.output)
    assert result.exit_code == case.status, result.output
    assert isinstance(result.exception, SystemExit), result.exception  # ended by the mapping, not a crash
    assert case.says in output, result.output
    assert "Traceback" not in result.output
    assert output.count("error:") + output.count("─ Error ─") == case.one_error, result.output
