"""A FAKE vLLM server for tests where no vLLM can run (no GPU) and `serve-model` cannot either (no torch in
the environment under test). No tests here."""

from __future__ import annotations

from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from openforge.models import ModelDir

REPLY = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls /app"}}\n</tool_call>'
BASH = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a command.",
        "parameters": {"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
    },
}


class FakeVLLM:
    """FAKE vLLM server: GET /v1/models and POST /v1/completions with token-id prompts; every completion is
    REPLY encoded with the model's tokenizer, then its end-of-turn token."""

    def __init__(self, model: ModelDir):
        self.output = model.encode_completion(REPLY) + [model.eos_token_ids[0]]
        self.prompts: list[list[int]] = []
        self.app = Starlette(
            routes=[Route("/v1/models", self.models), Route("/v1/completions", self.complete, methods=["POST"])]
        )

    async def models(self, request: Request) -> JSONResponse:
        return JSONResponse({"object": "list", "data": [{"id": "fake-vllm", "object": "model", "max_model_len": 8192}]})

    async def complete(self, request: Request) -> JSONResponse:
        body = await request.json()
        self.prompts.append(body["prompt"])
        n = len(self.output)
        return JSONResponse(
            {
                "id": "cmpl-fake",
                "object": "text_completion",
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "text": "",
                        "token_ids": self.output,
                        "finish_reason": "stop",
                        "logprobs": {"token_logprobs": [-0.5] * n, "tokens": [f"token_id:{i}" for i in self.output]},
                    }
                ],
            }
        )
