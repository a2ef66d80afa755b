"""Tasks: loading (our examples and Terminal-Bench 2.0 layouts), schema errors, image maps, rewards, the shipped
examples' solutions (run locally with bash), and the generated task families."""

from __future__ import annotations

import os
import re
import shlex
import shutil
from pathlib import Path

import pytest

from openforge.tasks import (
    FAMILIES,
    ImageMap,
    ImageMapError,
    RewardError,
    TaskLoadError,
    check_split_disjoint,
    generate_family_tasks,
    generate_instances,
    instance_key,
    is_heldout_number,
    load_task,
    load_tasks,
    read_reward,
    validate_task_dir,
    write_task,
)
from openforge.tasks.environment import task_environment
from openforge.tasks.loader import inspect_task_dir, inspect_tree
from openforge.tasks.local import run_task_locally
from openforge.tasks.model import parse_size_mb
from support.paths import REPO

EXAMPLES = REPO / "examples" / "tasks"
EXAMPLE_TASKS = load_tasks(EXAMPLES)


# ---- shipped examples -----------------------------------------------------------------------------------


def test_examples_load_with_splits_and_kinds():
    assert len(EXAMPLE_TASKS) >= 30
    splits = [t.split for t in EXAMPLE_TASKS]
    assert splits.count("train") >= 20 and splits.count("heldout") >= 10
    assert set(splits) == {"train", "heldout"}
    kinds = {t.config.metadata.kind for t in EXAMPLE_TASKS}
    assert kinds == {"files", "text", "code", "data", "multi"}
    for split in ("train", "heldout"):
        assert {t.config.metadata.kind for t in EXAMPLE_TASKS if t.split == split} == kinds
    assert len({t.id for t in EXAMPLE_TASKS}) == len(EXAMPLE_TASKS)
    heldout = [t.id for t in EXAMPLE_TASKS if t.split == "heldout"]
    assert [t.id for t in load_tasks(EXAMPLES, split="heldout")] == heldout
    assert {t.split for t in load_tasks(EXAMPLES / "train")} == {"train"}


@pytest.mark.parametrize("task", EXAMPLE_TASKS, ids=lambda t: t.id)
def test_example_is_schema_clean(task):
    warnings: list[str] = []
    assert validate_task_dir(task.path, warnings) == []
    assert warnings == []
    assert task.solve_script and task.wrong_script
    assert task.dockerfile is not None and task.workdir == "/app"
    assert task.resources.memory_mb == 512 and task.resources.pids == 256
    assert task.resources.agent_timeout_s == 300 and task.resources.verifier_timeout_s == 60
    env = task_environment(task, ImageMap.load(EXAMPLES / "image-map.yaml"))
    assert env.builds and env.dockerfile_text.splitlines()[0] == "FROM openforge-base:bookworm"
    assert os.access(task.test_script, os.X_OK)


@pytest.mark.parametrize("task", EXAMPLE_TASKS, ids=lambda t: t.id)
def test_example_solutions_score_locally(task):
    """solve.sh scores 1; wrong.sh and doing nothing score below 1 (bash in temp dirs, no container)."""
    solve = run_task_locally(task, "solve")
    assert solve.error is None and solve.reward == 1.0, solve.verifier_output
    wrong = run_task_locally(task, "wrong")
    assert wrong.error is None and wrong.reward is not None and wrong.reward < 1.0, wrong.verifier_output
    noop = run_task_locally(task, None)
    assert noop.error is None and noop.reward is not None and noop.reward < 1.0, noop.verifier_output


def test_code_tasks_share_one_hardened_checker():
    """The code tasks carry the same `tests/check.py` (a task directory is self-contained, so it is copied, not
    shared): a fix to it must reach every copy. Their test.sh runs it isolated from the tests' directory."""
    checkers = sorted((REPO / "examples" / "tasks").glob("*/*/tests/check.py"))
    assert len(checkers) == 5
    assert len({c.read_bytes() for c in checkers}) == 1, [str(c) for c in checkers]
    for c in checkers:
        test_sh = (c.parent / "test.sh").read_text()
        assert 'cd "$TESTS"' in test_sh and 'exec python3 -I -B "$TESTS/check.py" "$APP" "$OUT"' in test_sh
        assert not list(c.parent.glob("test_*.py"))  # no unit tests that would import the agent's module


def test_examples_readme_lists_every_task():
    text = (EXAMPLES / "README.md").read_text()
    for t in EXAMPLE_TASKS:
        assert f"`{t.id}`" in text, t.id


# ---- Terminal-Bench 2.0 / Harbor format -----------------------------------------------------------------

TB2_TOML = """\
schema_version = "1.1"
artifacts = []

[task]
name = "terminal-bench/largest-thing"
description = "Find the largest thing."
keywords = ["coding", "optimization"]
[[task.authors]]
name = "Some Author"
email = "author@example.com"

[metadata]
author_name = "Some Author"
author_email = "author@example.com"
difficulty = "medium"
category = "mathematics"
tags = ["coding", "optimization"]
estimated_duration_sec = 210.0
expert_time_estimate_min = 60.0
junior_time_estimate_min = 180.0

[verifier]
timeout_sec = 900.0

[agent]
timeout_sec = 1800.0

[environment]
build_timeout_sec = 600.0
docker_image = "alexgshaw/largest-thing:20251031"
cpus = 2
memory_mb = 4096
storage_mb = 10240
gpus = 0
allow_internet = true
mcp_servers = []
some_future_field = { nested = true }

[verifier.env]

[environment.env]
FOO = "bar"

[solution.env]
"""


def _write_tb2(tmp_path: Path, toml: str = TB2_TOML, name: str = "largest-thing") -> Path:
    d = tmp_path / name
    (d / "environment").mkdir(parents=True)
    (d / "tests").mkdir()
    (d / "solution").mkdir()
    (d / "task.toml").write_text(toml)
    (d / "instruction.md").write_text("Write the largest eigenvalue of /app/m.txt to /app/out.txt.\n")
    (d / "environment" / "Dockerfile").write_text(
        "FROM python:3.13-slim-bookworm\nWORKDIR /app\nCOPY m.txt /app/m.txt\n"
    )
    (d / "environment" / "m.txt").write_text("1 0\n0 2\n")
    (d / "tests" / "test.sh").write_text(
        '#!/bin/bash\nif [ "$PWD" = "/" ]; then echo "no workdir"; exit 1; fi\n'
        "python -m pytest /tests/test_outputs.py -rA\n"
        "if [ $? -eq 0 ]; then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (d / "tests" / "test.sh").chmod(0o755)
    (d / "tests" / "test_outputs.py").write_text("def test_x():\n    assert True\n")
    (d / "solution" / "solve.sh").write_text("#!/bin/bash\necho 2 > /app/out.txt\n")
    return d


def test_terminal_bench_2_task_loads_unchanged(tmp_path):
    d = _write_tb2(tmp_path)
    assert validate_task_dir(d) == []
    t = load_task(d)
    assert t.id == "largest-thing" and t.split is None
    assert t.instruction.startswith("Write the largest eigenvalue")
    assert t.image == "alexgshaw/largest-thing:20251031"
    assert t.dockerfile == d / "environment" / "Dockerfile" and t.workdir == "/app"
    assert t.solve_script == d / "solution" / "solve.sh" and t.wrong_script is None
    assert t.tests_dir == d / "tests"
    r = t.resources
    assert (r.cpus, r.memory_mb, r.storage_mb, r.gpus) == (2, 4096, 10240, 0)
    assert (r.agent_timeout_s, r.verifier_timeout_s, r.build_timeout_s) == (1800, 900, 600)
    c = t.config
    assert c.version == "1.1"
    assert c.task.name == "terminal-bench/largest-thing" and c.task.authors[0].email == "author@example.com"
    assert c.metadata.difficulty == "medium" and c.metadata.tags == ["coding", "optimization"]
    assert c.metadata.model_extra["expert_time_estimate_min"] == 60.0  # unknown fields are kept
    assert c.environment.model_extra["some_future_field"] == {"nested": True}
    assert c.environment.env == {"FOO": "bar"} and c.environment.allow_internet is True
    assert c.model_extra["artifacts"] == []

    # a mapped task image is used as is; otherwise the Dockerfile is built with its FROM mapped
    env = task_environment(t, ImageMap.parse(["alexgshaw/largest-thing:20251031=local/largest:1"]))
    assert env.image == "local/largest:1" and not env.builds
    env = task_environment(t, ImageMap.parse("python:3.13-slim-bookworm=openforge-base:bookworm"))
    assert env.builds and env.dockerfile_text.startswith("FROM openforge-base:bookworm\n")
    # built from the task's own directory, the map applied where the image is built
    assert env.context_dir == d / "environment" and (env.context_dir / "m.txt").read_text() == "1 0\n0 2\n"
    assert env.image_map.map_image("python:3.13-slim-bookworm") == "openforge-base:bookworm"
    assert (d / "environment" / "Dockerfile").read_text().startswith("FROM python:3.13")  # original untouched


def test_older_harbor_format_with_memory_strings(tmp_path):
    toml = """version = "1.0"
[metadata]
author_name = "x"
[verifier]
timeout_sec = 120.0
[agent]
timeout_sec = 300.0
[environment]
build_timeout_sec = 600.0
docker_image = "alexgshaw/gpt2-codegolf:20251031"
cpus = 1
memory = "4G"
storage = "10G"
"""
    d = _write_tb2(tmp_path, toml)
    (d / "environment" / "Dockerfile").unlink()
    t = load_task(d)
    assert t.dockerfile is None and t.image == "alexgshaw/gpt2-codegolf:20251031"
    assert t.resources.memory_mb == 4096 and t.resources.storage_mb == 10240
    env = task_environment(t, ImageMap())
    assert env.image == "alexgshaw/gpt2-codegolf:20251031"
    assert parse_size_mb("512M") == 512 and parse_size_mb("1.5g") == 1536 and parse_size_mb("2GiB") == 2048


def test_minimal_task_gets_harbor_defaults(tmp_path):
    d = _write_tb2(tmp_path, "")
    t = load_task(d)
    r = t.resources
    assert (r.cpus, r.memory_mb, r.agent_timeout_s, r.verifier_timeout_s, r.build_timeout_s) == (1, 2048, 600, 600, 600)
    assert t.config.version == "1.0" and t.image is None


# ---- schema errors --------------------------------------------------------------------------------------


def _errors(d: Path) -> str:
    return "\n".join(validate_task_dir(d))


def test_schema_errors_are_named(tmp_path):
    d = _write_tb2(tmp_path)
    (d / "instruction.md").unlink()
    assert "instruction.md: missing" in _errors(d)

    d = _write_tb2(tmp_path, 'version = "1.0"\n[environment]\ncpus = 1\nmemory_mb = \n', name="bad-toml")
    errs = _errors(d)
    assert "task.toml: not valid TOML" in errs and "line 4" in errs

    d = _write_tb2(tmp_path, '[environment]\ncpus = "two"\n[agent]\ntimeout_sec = "soon"\n', name="types")
    errs = _errors(d)
    assert "task.toml: environment.cpus = 'two'" in errs
    assert "task.toml: agent.timeout_sec = 'soon'" in errs

    d = _write_tb2(tmp_path, '[metadata]\ntags = "a"\nsplit = "test"\n', name="meta")
    errs = _errors(d)
    assert "metadata.tags = 'a'" in errs and "metadata.split = 'test'" in errs

    d = _write_tb2(tmp_path, '[environment]\nmemory = "2G"\nmemory_mb = 1024\n', name="conflict")
    assert "conflicts with memory_mb" in _errors(d)

    d = _write_tb2(tmp_path, "", name="no-env")
    (d / "environment" / "Dockerfile").unlink()
    assert "environment/Dockerfile: missing, and task.toml sets no [environment] docker_image" in _errors(d)

    d = _write_tb2(tmp_path, "", name="no-from")
    (d / "environment" / "Dockerfile").write_text("WORKDIR /app\n")
    assert "environment/Dockerfile: has no FROM line" in _errors(d)

    d = _write_tb2(tmp_path, name="no-test")
    (d / "tests" / "test.sh").unlink()
    assert "tests/test.sh: missing" in _errors(d)
    shutil.rmtree(d / "tests")
    assert "tests/: missing" in _errors(d)

    d = _write_tb2(tmp_path, name="no-toml")
    (d / "task.toml").unlink()
    assert "task.toml: missing" in _errors(d)

    d = _write_tb2(tmp_path, name="warn")
    (d / "tests" / "test.sh").chmod(0o644)
    (d / "solution" / "solve.sh").unlink()
    warnings: list[str] = []
    assert validate_task_dir(d, warnings) == []
    assert any("tests/test.sh: not executable" in w for w in warnings)
    assert any("solution/solve.sh: missing" in w for w in warnings)

    with pytest.raises(TaskLoadError) as ei:
        load_task(tmp_path / "types")
    assert "environment.cpus" in str(ei.value) and len(ei.value.errors) == 2


def test_split_from_layout_and_metadata(tmp_path):
    root = tmp_path / "root"
    _write_tb2(root / "train" / "group", name="a")
    _write_tb2(root / "heldout", name="b")
    _write_tb2(root, '[metadata]\nsplit = "held-out"\n', name="c")
    _write_tb2(root, name="d")
    tasks = load_tasks(root)
    assert {t.id: t.split for t in tasks} == {"a": "train", "b": "heldout", "c": "heldout", "d": None}
    assert [t.id for t in load_tasks(root, split="heldout")] == ["b", "c"]
    assert [t.id for t in load_tasks([root / "train", root / "d"])] == ["a", "d"]
    with pytest.raises(TaskLoadError, match="unknown split"):
        load_tasks(root, split="test")

    _write_tb2(root / "train", '[metadata]\nsplit = "heldout"\n', name="e")
    with pytest.raises(TaskLoadError, match="disagrees with the directory layout"):
        load_tasks(root)


def test_load_tasks_errors(tmp_path):
    _write_tb2(tmp_path / "x", name="same")
    _write_tb2(tmp_path / "y", name="same")
    with pytest.raises(TaskLoadError, match="duplicate task id 'same'"):
        load_tasks(tmp_path)
    (tmp_path / "empty").mkdir()
    with pytest.raises(TaskLoadError, match="holds no task directory"):
        load_tasks(tmp_path / "empty")
    with pytest.raises(TaskLoadError, match="no such directory"):
        load_tasks(tmp_path / "missing")
    assert inspect_task_dir(tmp_path / "missing").errors
    reports = inspect_tree(tmp_path)
    assert len(reports) == 2 and all(r.ok for r in reports)
    assert "holds no task directory" in inspect_tree(tmp_path / "empty")[0].errors[0]
    assert [len(r.errors) for r in inspect_tree(EXAMPLES)] == [0] * len(EXAMPLE_TASKS)


# ---- image map ------------------------------------------------------------------------------------------


def test_image_map_parse_and_lookup(tmp_path):
    m = ImageMap.parse(["debian:bookworm-slim=openforge-base:bookworm", "python=py:local, ubuntu:22.04=u:1"])
    assert len(m) == 3
    assert m.map_image("debian:bookworm-slim") == "openforge-base:bookworm"
    assert m.map_image("docker.io/library/debian:bookworm-slim") == "openforge-base:bookworm"
    assert m.map_image("debian:bookworm") == "debian:bookworm"  # a tagged key matches only that tag
    assert m.map_image("python:3.13-slim") == "py:local"  # an untagged key matches every tag
    assert m.map_image("python") == "py:local"
    assert m.map_image("ubuntu:22.04") == "u:1" and m.lookup("ubuntu:24.04") is None
    assert ImageMap.parse("*=base:1").map_image("anything/at:all") == "base:1"
    assert ImageMap.parse("*=base:1, a:1=b:2").map_image("a:1") == "b:2"
    for bad in ["debian", "a=b=c", "=x", "x="]:
        with pytest.raises(ImageMapError):
            ImageMap.parse(bad)
    assert not ImageMap.parse(None) and not ImageMap.parse([])

    assert ImageMap.from_config({"a:1": "b:1"}).map_image("a:1") == "b:1"
    assert ImageMap.from_config(["a:1=b:1", {"from": "c", "to": "d:1"}]).map_image("c:9") == "d:1"
    with pytest.raises(ImageMapError):
        ImageMap.from_config({"a:1": 3})
    loaded = ImageMap.load(EXAMPLES / "image-map.yaml")
    assert loaded.to_dict()["debian:bookworm-slim"] == "openforge-base:bookworm"
    assert set(loaded.to_dict().values()) == {"openforge-base:bookworm"}
    (tmp_path / "bad.yaml").write_text("image_map: [1, 2]\n")
    with pytest.raises(ImageMapError, match="bad.yaml"):
        ImageMap.load(tmp_path / "bad.yaml")
    for scalar in ("image_map: 5\n", "5\n"):  # not a mapping nor a list: named, not a TypeError
        (tmp_path / "scalar.yaml").write_text(scalar)
        with pytest.raises(ImageMapError, match="scalar.yaml: expected a mapping"):
            ImageMap.load(tmp_path / "scalar.yaml")
    assert ImageMap.parse("a:1=b:1").merged(ImageMap.parse("a:1=c:1")).map_image("a:1") == "c:1"


def test_image_map_applies_to_dockerfile_from_lines():
    m = ImageMap.parse(["debian:bookworm-slim=openforge-base:bookworm", "golang=openforge-go:1"])
    src = (
        "# syntax=docker/dockerfile:1\n"
        "ARG BASE=debian:bookworm-slim\n"
        "FROM --platform=linux/amd64 golang:1.22 AS build\n"
        "RUN go build -o /x .  # FROM debian:bookworm-slim in a comment\n"
        "from debian:bookworm-slim as final\n"
        "FROM build\n"
        "FROM ${BASE}\n"
        "FROM debian:bookworm-slim\r\n"
        "COPY --from=build /x /x"
    )
    out = m.apply_to_dockerfile(src).splitlines(keepends=True)
    assert out[2] == "FROM --platform=linux/amd64 openforge-go:1 AS build\n"
    assert out[3].startswith("RUN go build") and "debian:bookworm-slim" in out[3]
    assert out[4] == "from openforge-base:bookworm as final\n"
    assert out[5] == "FROM build\n"  # a stage, not an image
    assert out[6] == "FROM ${BASE}\n"
    assert out[7] == "FROM openforge-base:bookworm\r\n"
    assert out[8] == "COPY --from=build /x /x"


def test_image_map_rewrites_from_lines_and_names_the_bases():
    """The rewrite the docker backend builds with: mapped FROM lines and the base images they then need."""
    base = "openforge-base:bookworm"
    m = ImageMap({"debian:bookworm-slim": base, "python:3.12": base, "ubuntu": "local/ubuntu:1"})
    text = (
        "# syntax\nARG X=1\nFROM debian:bookworm-slim AS build\nRUN echo\n"
        "from --platform=linux/amd64 docker.io/library/python:3.12\n"
        "FROM build\nFROM ubuntu:latest\nFROM ${X}\nFROM scratch\n"
    )
    out, bases = m.rewrite_dockerfile(text)
    assert "FROM openforge-base:bookworm AS build\n" in out
    assert "from --platform=linux/amd64 openforge-base:bookworm\n" in out
    assert "FROM build\n" in out  # a stage name is not an image
    assert "FROM local/ubuntu:1\n" in out
    assert "FROM ${X}\n" in out and "FROM scratch\n" in out
    assert bases == [base, base, "local/ubuntu:1"]
    assert ImageMap({"debian:latest": "x"}).map_image("debian") == "x"
    assert m.map_image("alpine:3") == "alpine:3"
    # scratch is the empty image, not a repository: even a catch-all key leaves it alone
    assert ImageMap.parse("*=base:1").rewrite_dockerfile("FROM scratch\n") == ("FROM scratch\n", [])


def test_image_map_tag_key_matches_a_digest_pinned_from_line():
    digest = "sha256:" + "0123456789abcdef" * 4
    m = ImageMap.parse("python:3.13-slim-bookworm=openforge-base:bookworm")
    text = f"FROM python:3.13-slim-bookworm@{digest}\nRUN true\n"
    out, bases = m.rewrite_dockerfile(text)
    assert out == "FROM openforge-base:bookworm\nRUN true\n" and bases == ["openforge-base:bookworm"]
    assert m.map_image(f"docker.io/library/python:3.13-slim-bookworm@{digest}") == "openforge-base:bookworm"
    # the pinned digest itself (with or without the tag) is a key too, and the most specific key wins
    assert ImageMap.parse(f"python@{digest}=by-digest:1").map_image(f"python:3.13@{digest}") == "by-digest:1"
    both = ImageMap.parse([f"python:3.13@{digest}=exact:1", "python:3.13=tag:1", "python=repo:1"])
    assert both.map_image(f"python:3.13@{digest}") == "exact:1"
    assert both.map_image(f"python:3.13@sha256:{'f' * 64}") == "tag:1"  # another digest of the same tag
    assert both.map_image("python:3.12") == "repo:1"
    # a digest does not match a key of another tag
    assert ImageMap.parse("python:3.12=x:1").lookup(f"python:3.13@{digest}") is None


# ---- rewards --------------------------------------------------------------------------------------------


def test_read_reward():
    assert read_reward(None, "1\n") == 1.0
    assert read_reward(None, " 0.25 ") == 0.25
    assert read_reward('{"reward": 0.5, "details": {"passed": 1}}', "1") == 0.5  # JSON wins
    assert read_reward('{"reward": 0}', None) == 0.0
    assert read_reward("0.75", None) == 0.75
    assert read_reward('{"accuracy": 0.3}', None) == 0.3  # a single numeric value
    cases = [
        ((None, "abc"), "reward.txt: 'abc' is not a number"),
        ((None, ""), "reward.txt: empty"),
        ((None, "nan"), "finite"),
        (("{bad", "1"), "reward.json: not valid JSON"),
        (("", "1"), "reward.json: empty"),
        (('{"reward": "1"}', None), "expected a number"),
        (('{"reward": true}', None), "expected a number"),
        (('{"a": 1, "b": 2}', None), "no 'reward' key"),
        (("[1]", None), "expected a number"),
        ((None, None), "neither"),
    ]
    for args, msg in cases:
        with pytest.raises(RewardError, match=re.escape(msg)):
            read_reward(*args)


# ---- generated families ---------------------------------------------------------------------------------


def test_generator_is_deterministic():
    a = generate_instances(200, seed=7)
    b = generate_instances(200, seed=7)
    assert [instance_key(i) for i in a] == [instance_key(i) for i in b]
    assert [i.solution_command for i in a] == [i.solution_command for i in b]
    c = generate_instances(200, seed=8)
    assert [instance_key(i) for i in a] != [instance_key(i) for i in c]
    assert {i.family for i in a} == set(FAMILIES)
    assert len({instance_key(i) for i in a}) > 190  # fresh instances, few repeats


def test_split_disjointness():
    train = generate_instances(3000, seed=1, split="train") + generate_instances(1000, seed=2, split="train")
    held = generate_instances(1000, seed=1, split="heldout")
    assert check_split_disjoint(train, held) == []
    assert {i.combo for i in train}.isdisjoint({i.combo for i in held})
    for fam in FAMILIES.values():
        held_combos = fam.heldout_combos()
        assert 0 < len(held_combos) < len(fam.combos())
        train_combos = set(fam.combos()) - held_combos
        # every directory and extension of a held-out combination is seen in training (only the pairing is new)
        assert {c[1] for c in train_combos} == set(fam.dirs) and {c[2] for c in train_combos} == set(fam.exts)
    for inst in train:
        if "number" in inst.params:
            assert not is_heldout_number(inst.params["number"])
    for inst in held:
        if "number" in inst.params:
            assert is_heldout_number(inst.params["number"])
    # the checker notices leaks
    leaked = held[0]
    assert check_split_disjoint(train + [leaked], held)


def test_generated_instances_are_solvable_from_the_instruction():
    for split in ("train", "heldout"):
        insts = generate_instances(40, seed=3, split=split)
        for inst in insts:
            assert inst.split == split
            assert inst.score(inst.solution_command) == 1.0, (inst.instruction, inst.run(inst.solution_command))
            assert inst.score(inst.wrong_command) == 0.0, (inst.instruction, inst.wrong_command)
            assert not inst.check(inst.setup_files)  # doing nothing fails
            # every parameter a solver needs is copied from the instruction
            for k in ("path", "src", "dst", "word", "number", "key", "old", "new"):
                if k in inst.params:
                    assert str(inst.params[k]) in inst.instruction, (k, inst.instruction)
            # the oracle uses nothing the instruction does not say (besides shell syntax)
            for tok in re.findall(r"[a-z]+\d[a-z0-9]*|(?<![$\w])\d+", inst.solution_command):
                assert tok in inst.instruction, (tok, inst.instruction, inst.solution_command)


def test_state_varies_so_shortcuts_fail():
    insts = [i for i in generate_instances(400, seed=5) if i.family in ("create_file", "append_line")]
    create = [i for i in insts if i.family == "create_file"]
    states = {i.params["state"] for i in create}
    assert states == {"no_dir", "dir_exists", "target_exists"}
    # `>>` instead of `>` for "create" is wrong where the target exists
    for i in create:
        cmd = i.solution_command.replace(" > ", " >> ")
        assert i.score(cmd) == (0.0 if i.params["state"] == "target_exists" else 1.0)
    # equivalent commands count
    i = create[0]
    p = i.params["path"]
    alt = f"mkdir -p {p.rsplit('/', 1)[0]}; printf '%s\\n' '{i.params['word']} {i.params['number']}' > {p}"
    assert i.score(alt) == 1.0
    append = [i for i in insts if i.family == "append_line"]
    assert {i.params["state"] for i in append} == {"file_exists", "no_file", "no_dir"}


def test_generated_tasks_in_harbor_layout(tmp_path):
    paths = generate_family_tasks("all", tmp_path / "gen" / "heldout", n=6, seed=4, split="heldout")
    assert len(paths) == 6 and len({p.name for p in paths}) == 6
    again = generate_family_tasks("all", tmp_path / "gen2", n=6, seed=4, split="heldout")
    assert [p.name for p in paths] == [p.name for p in again]
    tasks = load_tasks(tmp_path / "gen")
    assert len(tasks) == 6 and {t.split for t in tasks} == {"heldout"}
    for t in tasks:
        assert validate_task_dir(t.path) == []
        assert t.family in FAMILIES and t.config.metadata.kind == "generated"
        assert run_task_locally(t, "solve").reward == 1.0
        assert run_task_locally(t, "wrong").reward == 0.0
        assert run_task_locally(t, None).reward == 0.0
    one = generate_family_tasks("count_lines,append-line", tmp_path / "two", n=4, seed=0, split="train")
    assert {load_task(p).family for p in one} == {"count_lines", "append_line"}
    with pytest.raises(ValueError, match="unknown task family nope"):
        generate_family_tasks("nope", tmp_path / "x", n=1)
    with pytest.raises(ValueError, match="cannot hold"):
        generate_family_tasks("all", tmp_path / "train", n=1, split="heldout")


def test_write_task_round_trip(tmp_path):
    (inst,) = generate_instances(1, seed=11, families=["create_file"])
    d = write_task(inst, tmp_path / "t1", seed=11)
    t = load_task(d)
    assert t.instruction.strip() == inst.instruction and t.split == inst.split
    assert t.config.metadata.model_extra["combo"] == list(inst.combo)
    assert (d / "solution" / "solve.sh").read_text().splitlines()[1] == inst.solution_command


def test_shell_quoting_of_generated_commands():
    for inst in generate_instances(100, seed=9):
        shlex.split(inst.solution_command)
        shlex.split(inst.wrong_command)
