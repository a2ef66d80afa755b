"""Scripted "generator model" for the curation tests, served by serve-model (so the curation pipeline reaches it
as `openai:URL`, a model behind an API). Asked for a task, it answers in the reply format the model generator
asks for with the example mix's reverse-steps task, whose solve.sh is wrong; asked to refine it, it fixes
solve.sh only when the prompt carries the evidence (the stage, the reason and the verifier's own output)."""

import importlib.util
from pathlib import Path

from openforge.curate.model_generator import render_files

_spec = importlib.util.spec_from_file_location(
    "scripted_generator_for_task_writer", Path(__file__).resolve().parents[2] / "examples/curate/scripted_generator.py"
)
_mix = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_mix)


def respond(conversation, call_index):
    prompt = conversation.messages[-1].content
    if "failed the test stage (oracle_failed)" in prompt and "FAIL: reversed.txt" in prompt:
        return "Fixed:\n" + render_files(_mix.reverse_steps("tac steps.txt > reversed.txt"))
    return "Here is the task.\n" + render_files(_mix.reverse_steps("rev steps.txt > reversed.txt"))
