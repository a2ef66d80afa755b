"""A canned inference server for benchmarks/proxy.py's throughput part: it answers every request with the same
short reply, at once, in both forms the two proxies ask for — vLLM's `/v1/completions` with token ids and
logprobs (what OpenForge's `vllm` backend sends) and `/v1/chat/completions` (what LiteLLM sends), streamed or
not — so that neither proxy waits on a model and the figure is the proxies' own.

    python benchmarks/_canned_backend.py MODEL_DIR PORT
"""

from __future__ import annotations

import json
import sys
import time
import uuid

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

# What the tiny model "says": a tool call, in the markup its template uses, so OpenForge parses it into a
# tool_use block; LiteLLM passes the same text through as text.
REPLY = '<tool_call>\n{"name": "bash", "arguments": {"command": "ls -la"}}\n</tool_call>'


def create_app(model_dir: str) -> Starlette:
    sys.path.insert(0, str(__import__("pathlib").Path(__file__).resolve().parents[1]))
    from openforge.models import ModelDir

    model = ModelDir(model_dir)
    name = model.path.name
    ids = model.encode_completion(REPLY) + [model.eos_token_ids[0]]
    logprobs = [0.0] * len(ids)

    async def models(request: Request) -> Response:
        return JSONResponse(
            {
                "object": "list",
                "data": [
                    {
                        "id": name,
                        "object": "model",
                        "created": 0,
                        "owned_by": "bench",
                        "max_model_len": model.max_context,
                    }
                ],
            }
        )

    def sse(payload) -> bytes:
        return f"data: {payload if isinstance(payload, str) else json.dumps(payload)}\n\n".encode()

    async def completions(request: Request) -> Response:
        body = await request.json()
        head = {
            "id": f"cmpl-{uuid.uuid4().hex}",
            "object": "text_completion",
            "created": int(time.time()),
            "model": name,
        }
        choice = {
            "index": 0,
            "text": REPLY,
            "finish_reason": "stop",
            "stop_reason": None,
            "token_ids": ids,
            "logprobs": {"token_logprobs": logprobs, "tokens": [f"token_id:{i}" for i in ids]},
        }
        if not body.get("stream"):
            return JSONResponse(
                {**head, "choices": [choice], "usage": {"prompt_tokens": 1, "completion_tokens": len(ids)}}
            )

        async def events():
            yield sse({**head, "choices": [choice]})
            yield sse("[DONE]")

        return StreamingResponse(events(), media_type="text/event-stream")

    async def chat(request: Request) -> Response:
        body = await request.json()
        head = {"id": f"chatcmpl-{uuid.uuid4().hex}", "created": int(time.time()), "model": name}
        usage = {"prompt_tokens": 1, "completion_tokens": len(ids), "total_tokens": 1 + len(ids)}
        if not body.get("stream"):
            message = {"role": "assistant", "content": REPLY}
            return JSONResponse(
                {
                    **head,
                    "object": "chat.completion",
                    "usage": usage,
                    "choices": [{"index": 0, "message": message, "finish_reason": "stop"}],
                }
            )

        async def events():
            chunk = {**head, "object": "chat.completion.chunk"}
            yield sse(
                {
                    **chunk,
                    "choices": [{"index": 0, "delta": {"role": "assistant", "content": REPLY}, "finish_reason": None}],
                }
            )
            yield sse({**chunk, "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]})
            yield sse({**chunk, "choices": [], "usage": usage})
            yield sse("[DONE]")

        return StreamingResponse(events(), media_type="text/event-stream")

    async def health(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(
        routes=[
            Route("/health", health),
            Route("/v1/models", models),
            Route("/v1/completions", completions, methods=["POST"]),
            Route("/v1/chat/completions", chat, methods=["POST"]),
        ]
    )


if __name__ == "__main__":
    uvicorn.run(
        create_app(sys.argv[1]),
        host="127.0.0.1",
        port=int(sys.argv[2]),
        log_level="warning",
        access_log=False,
        timeout_keep_alive=75,
    )
