"""The curation stages' rules that need no sandbox: what a generator may write, prune's schema / leak /
duplicate rules, select's band and split, the hack suite's reading of an instruction, the model generator's
reply format, and the config's errors."""

from __future__ import annotations

import pytest

from openforge.config import ConfigError, validate_config
from openforge.core.similarity import ShingleIndex, similarity
from openforge.curate import CurateConfig
from openforge.curate.files import TASK_FILES, problems, read_task_files, without_own_keys, write_task_dir
from openforge.curate.generators import GeneratorError, make_generator
from openforge.curate.hacks import mentioned_paths
from openforge.curate.ledger import Candidate
from openforge.curate.model_generator import parse_files, render_files
from openforge.curate.prune import duplicate_of, leaked_tests, schema_problems, task_text
from openforge.curate.select import out_of_band, split
from openforge.tasks import load_task
from support.curate import SEEDS, mix


def test_a_generator_cannot_write_outside_the_task():
    files = dict(mix()[0])
    assert problems(files) == []
    assert problems({**files, "../escape.sh": "x"}) == ["../escape.sh: not a path inside the task"]
    assert problems({**files, "/etc/passwd": "x"}) == ["/etc/passwd: not a path inside the task"]
    assert "home/x: outside the task layout" in problems({**files, "home/x": "y"})[0]
    without = {k: v for k, v in files.items() if k != "solution/wrong.sh"}
    assert problems(without) == ["solution/wrong.sh: missing"]
    assert "bytes, at most" in problems({**files, "tests/big.txt": "x" * 300_000})[0]


def test_the_pipeline_names_the_task_and_its_split(tmp_path):
    toml = 'version = "1.0"\n[metadata]\nid = "theirs"\nsplit = "heldout"\ntags = ["a"]\n[verifier]\nid = 3\n'
    assert without_own_keys(toml) == 'version = "1.0"\n[metadata]\ntags = ["a"]\n[verifier]\nid = 3\n'
    theirs = mix()[1]["task.toml"].replace("[metadata]\n", '[metadata]\nid = "theirs"\nsplit = "heldout"\n')
    write_task_dir(tmp_path / "cand-0001", {**mix()[1], "task.toml": theirs})
    task = load_task(tmp_path / "cand-0001")
    assert task.id == "cand-0001" and (tmp_path / "cand-0001" / "tests" / "test.sh").stat().st_mode & 0o111
    assert set(TASK_FILES) <= set(read_task_files(tmp_path / "cand-0001"))


def test_schema_errors_are_named(tmp_path):
    files = {**mix()[0], "task.toml": "version = [broken"}
    write_task_dir(tmp_path / "t", files)
    assert any("task.toml: not valid TOML" in p for p in schema_problems(files, tmp_path / "t"))


def test_leaks_of_the_tests():
    assert leaked_tests(mix()[0]) is None
    assert "quotes the tests" in leaked_tests(mix()[10])
    assert "names the verifier ('/tests')" in leaked_tests({**mix()[0], "instruction.md": "Do not read /tests/test.sh"})
    assert leaked_tests({**mix()[0], "instruction.md": "echo PASS"}) is None  # short boilerplate is no leak


def test_duplicates_against_existing_tasks_and_earlier_candidates():
    index = ShingleIndex()
    for seed in SEEDS:
        index.add(f"existing task {seed.name}", *task_text(read_task_files(seed)))
    assert all(duplicate_of(index, files, 0.7) is None for files in mix())
    index.add("candidate cand-0000", *task_text(mix()[0]))
    key, score = duplicate_of(index, mix()[8], 0.7)
    assert key == "candidate cand-0000" and score > 0.8
    assert duplicate_of(index, mix()[9], 0.7) is None  # shared boilerplate alone makes no duplicate
    seed_copy = read_task_files(SEEDS[0])
    assert duplicate_of(index, seed_copy, 0.7)[0] == "existing task append-setting"
    assert similarity("Sort the file", "sort the FILE") == 1.0 and similarity("a b c d", "w x y z") == 0.0


def test_the_band_and_the_split():
    def cand(i, rate, graded=4):
        return Candidate(id=f"c{i}", lineage=f"c{i}", pass_rate=rate, graded=graded)

    assert out_of_band(cand(0, 0.5), (0.1, 0.9)) is None
    assert out_of_band(cand(0, 0.0), (0.1, 0.9))[0] == "too_hard"
    assert out_of_band(cand(0, 1.0), (0.1, 0.9))[0] == "too_easy"
    assert out_of_band(cand(0, None), (0.1, 0.9)) is None
    many = [cand(i, 0.5) for i in range(10)]
    splits = split(many, 0.2, seed=0)
    assert sorted(splits.values()).count("heldout") == 2 and split(many, 0.2, seed=0) == splits
    assert split(many, 0.2, seed=1) != splits
    assert list(split(many[:2], 0.2, 0).values()).count("heldout") == 1  # at least one held out
    assert set(split(many[:1], 0.2, 0).values()) == {"train"} and set(split(many, 0.0, 0).values()) == {"train"}


def test_the_hack_reads_the_paths_the_instruction_names():
    assert mentioned_paths(mix()[7]["instruction.md"]) == ["/app/report.txt"]  # /app/logs is a directory
    assert mentioned_paths("Write `out/a.csv` and /app/b.json, then `ls -la`.") == ["out/a.csv", "/app/b.json"]


def test_the_model_generators_reply_format_round_trips():
    files = mix()[2]
    assert parse_files(render_files(files)) == {k: v.rstrip() + "\n" for k, v in files.items()}
    fenced = "Here:\n=== FILE: tests/test.sh ===\n```bash\necho 1\n```\n=== END ===\nbye"
    assert parse_files(fenced) == {"tests/test.sh": "echo 1\n"}
    assert parse_files("no files here") == {}


def test_config_errors_name_the_field_and_the_fix():
    def invalid(data):
        with pytest.raises(ConfigError) as e:
            validate_config(data, CurateConfig, source="curate.yaml")
        return str(e.value)

    assert "give seeds (task directories) or topics" in invalid({"generator": "scripted:x.py"})
    assert "use scripted:FILE" in invalid({"generator": "vllm:http://x", "topics": ["t"]})
    assert "band = [0.9, 0.1]: value error, give [low, high]" in invalid(
        {"generator": "scripted:x.py", "topics": ["t"], "band": [0.9, 0.1]}
    )
    assert "solver.harness" in invalid(
        {"generator": "scripted:x.py", "topics": ["t"], "solver": {"backend": "oracle", "harness": "clod"}}
    )


def test_a_scripted_generator_must_be_a_python_file(tmp_path):
    """Python imports only .py files by path: a script under another name is refused with the fix, not an
    AttributeError from importlib."""
    script = tmp_path / "generator.txt"
    script.write_text("def propose(request):\n    return None\n")
    with pytest.raises(GeneratorError, match=r"generator\.txt is not a Python file: name it NAME\.py"):
        make_generator(f"scripted:{script}")
    renamed = script.rename(tmp_path / "generator.py")
    assert make_generator(f"scripted:{renamed}").name == f"scripted:{renamed}"
