"""Helpers for the teacher-from-an-API tests (no tests here): a teacher model that shares nothing with the
student (another seed, another vocabulary: another tokenizer), served by serve-model with a scripted policy
and the proxy's output parser, as a real OpenAI-compatible server with tool-call parsing would be."""

from __future__ import annotations

import json
import os
import tempfile
from contextlib import contextmanager
from functools import cache
from pathlib import Path

from openforge.inference.scripted import ScriptedBackend
from openforge.inference.serve import create_app
from openforge.models import ModelDir, TinyModelSpec, build_tiny_model
from openforge.proxy.output_parser import parse_output
from support.inference import ServerThread
from support.paths import POLICIES

TEACHER_POLICY = POLICIES / "teacher_from_instruction.py"
SOLUTIONS_ENV = "OPENFORGE_TEST_TEACHER_SOLUTIONS"
TEACHER_VOCAB = 700  # the student's is 1,024


@cache
def teacher_model_dir() -> Path:
    """Another tiny model: seed 1, a 700-token vocabulary (so another tokenizer than the student's)."""
    out = Path(tempfile.mkdtemp(prefix="openforge-teacher-")) / "teacher"
    return build_tiny_model(out, spec=TinyModelSpec(seed=1, vocab_size=TEACHER_VOCAB))


@contextmanager
def teacher_server(solutions: dict[str, str], workdir: Path):
    """serve-model's app serving the teacher model through the scripted teacher policy, with tool-call parsing
    on; yields the OpenAI-compatible `/v1` base URL. `solutions`: instruction text → shell command."""
    path = workdir / "teacher-solutions.json"
    path.write_text(json.dumps(solutions))
    previous = os.environ.get(SOLUTIONS_ENV)
    os.environ[SOLUTIONS_ENV] = str(path)
    model = ModelDir(teacher_model_dir())

    def parse(text, tools):
        return parse_output(text, tool_format=model.tool_call_format, tools=tools)

    try:
        app = create_app(ScriptedBackend(TEACHER_POLICY, model), model_name="teacher", parse_reply=parse)
        with ServerThread(app) as server:
            yield server.url + "/v1"
    finally:
        if previous is None:
            os.environ.pop(SOLUTIONS_ENV, None)
        else:
            os.environ[SOLUTIONS_ENV] = previous
