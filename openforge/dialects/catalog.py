"""`GET /v1/models`: the one route both API families share, answered in the shape the client's SDK reads.

Anthropic's SDKs (Claude Code) send `anthropic-version` and read a page of `{"type": "model", ...}` entries;
every other client gets OpenAI's `{"object": "list", "data": [...]}`.
"""

from __future__ import annotations

from collections.abc import Mapping

from openforge.core.json_types import JSONObject, JSONValue

MODELS_ROUTE = "/v1/models"


def is_anthropic_client(headers: Mapping[str, str]) -> bool:
    """`headers` with lower-case names (or a case-insensitive mapping, such as Starlette's)."""
    return "anthropic-version" in headers


def model_list(model: str, *, anthropic: bool, created: int = 0, **extra: JSONValue) -> JSONObject:
    """The listing of the one model served; `extra` adds fields to an OpenAI entry (vLLM's `max_model_len`)."""
    entry: JSONObject
    if anthropic:
        entry = {"type": "model", "id": model, "display_name": model, "created_at": "2026-01-01T00:00:00Z"}
        return {"data": [entry], "has_more": False, "first_id": model, "last_id": model}
    entry = {"id": model, "object": "model", "created": created, "owned_by": "openforge", **extra}
    return {"object": "list", "data": [entry]}
