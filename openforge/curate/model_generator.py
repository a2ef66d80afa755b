"""A generator model behind an API (`openai:URL`, `anthropic:URL`, the upstream backend of
`openforge.inference.upstream`), asked for a task's six files in one reply and, on refinement, for the corrected
files given the evidence of the failure. The reply lists each file as

    === FILE: tests/test.sh ===
    ...text...
    === END ===

(a Markdown code fence around a file's text is taken off). What comes back is checked like any generator's
files (`files.py`) and then goes through every stage: a model's claim that its task works counts for nothing.
"""

from __future__ import annotations

import re
from typing import Any

from openforge.core import Conversation, Message, SamplingParams
from openforge.curate.files import TASK_FILES
from openforge.curate.generators import Evidence, GeneratorError, Proposal, ProposalRequest
from openforge.curate.ledger import Tokens
from openforge.inference import BackendError, GenerationContext, InvalidRequestError, MessageBackend, make_backend

SYSTEM = f"""You write tasks for training and testing command-line agents, in the Harbor / Terminal-Bench layout.
A task is six files:
- task.toml: version = "1.0"; [metadata] difficulty, category, tags; [verifier] timeout_sec; [agent] timeout_sec;
  [environment] build_timeout_sec, cpus, memory_mb, allow_internet = false.
- instruction.md: what the agent must do, stated fully and precisely (paths, formats), saying nothing of how it
  is checked.
- environment/Dockerfile: FROM debian:bookworm-slim, WORKDIR /app, COPY of any starting files (put them under
  environment/); no network is available at build time, so install nothing.
- tests/test.sh: the hidden verifier, run as root after the agent has finished; it checks the outcome in /app
  and writes 1 (pass) or 0 (fail) to /logs/verifier/reward.txt. It must check the content, not only that a
  file exists, so that no shortcut passes.
- solution/solve.sh: a correct reference solution (bash, run in /app as the agent user).
- solution/wrong.sh: a plausible but wrong solution that the tests must fail.
The untouched environment must fail the tests. Use only bash and coreutils, sed, awk, grep, python3.
Answer with the files only, each as
=== FILE: <path> ===
<text>
=== END ===
Required paths: {", ".join(TASK_FILES)} (more files under environment/, tests/ or solution/ are allowed)."""

_BLOCK = re.compile(r"^=== FILE: (.+?) ===\n(.*?)^=== END ===", re.DOTALL | re.MULTILINE)
_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```\s*$", re.DOTALL)


def parse_files(text: str) -> dict[str, str]:
    """The files of a reply (empty when it holds none)."""
    files = {}
    for name, body in _BLOCK.findall(text):
        fenced = _FENCE.match(body.strip("\n") + "\n")
        files[name.strip()] = (fenced.group(1) + "\n") if fenced else body
    return files


def render_files(files: dict[str, str]) -> str:
    return "".join(f"=== FILE: {name} ===\n{text.rstrip()}\n=== END ===\n" for name, text in files.items())


def proposal_prompt(request: ProposalRequest) -> str:
    parts = [f"Write task #{request.index + 1}: a new task, different from the examples and from any other."]
    if request.topic:
        parts.append(f"Topic: {request.topic}")
    for seed in request.seeds[:2]:
        parts.append(f"An example task ({seed.id}):\n{render_files(seed.files)}")
    if request.seeds:
        parts.append(
            "Other tasks that exist already (do not repeat them):\n"
            + "\n".join(f"- {s.instruction.splitlines()[0][:160]}" for s in request.seeds if s.instruction)
        )
    return "\n\n".join(parts)


def refine_prompt(files: dict[str, str], evidence: Evidence) -> str:
    return (
        f"This task failed the {evidence.stage} stage ({evidence.reason}). What was seen:\n{evidence.detail[-3000:]}"
        f"\n\nThe task:\n{render_files(files)}\nAnswer with all six files, corrected."
    )


class ModelGenerator:
    def __init__(self, spec: str, options: dict[str, Any]):
        self.name = spec
        backend = make_backend(spec, **options)
        if not isinstance(backend, MessageBackend):
            raise GeneratorError(f"generator {spec!r} is not a model behind an API")
        self.backend = backend
        self.sampling = SamplingParams(
            temperature=float(options.get("temperature", 1.0)), max_tokens=int(options.get("max_tokens", 8192))
        )

    async def _ask(self, prompt: str) -> Proposal | None:
        conversation = Conversation(system=SYSTEM, messages=[Message(role="user", content=prompt)])
        try:
            result = await self.backend.complete(conversation, self.sampling, GenerationContext())
        except (BackendError, InvalidRequestError) as e:
            raise GeneratorError(f"the generator {self.name} failed: {e}") from None
        tokens = Tokens(input=result.prompt_tokens, output=result.completion_tokens)
        return Proposal(parse_files(result.output.content), tokens)

    async def propose(self, request: ProposalRequest) -> Proposal | None:
        return await self._ask(proposal_prompt(request))

    async def refine(self, files: dict[str, str], evidence: Evidence, round: int) -> Proposal | None:
        return await self._ask(refine_prompt(files, evidence))

    async def close(self) -> None:
        await self.backend.close()
