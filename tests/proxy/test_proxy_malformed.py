"""A corpus of malformed and hostile requests against the proxy: each gets a 4xx that the official SDK
raises as the right typed error, the proxy stays up, nothing is recorded for a rejected call, the store
stays sound, and a normal call succeeds afterwards."""

from __future__ import annotations

import json

import anthropic
import openai
import pytest

from support.proxy import in_process_proxy

OK_ANTHROPIC = {"model": "m", "max_tokens": 16, "messages": [{"role": "user", "content": "hi"}]}
OK_CHAT = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
OK_RESPONSES = {"model": "m", "input": "hi"}
PATHS = {"anthropic": "/v1/messages", "chat": "/v1/chat/completions", "responses": "/v1/responses"}
OK = {"anthropic": OK_ANTHROPIC, "chat": OK_CHAT, "responses": OK_RESPONSES}


def deep(levels: int) -> bytes:
    return b'{"model": "m", "max_tokens": 5, "messages": ' + b"[" * levels + b"]" * levels + b"}"


def with_(base: dict, **changes) -> bytes:
    body = dict(base)
    for k, v in changes.items():
        if v is ...:
            body.pop(k, None)
        else:
            body[k] = v
    return json.dumps(body).encode()


TOOL_USE = {"role": "assistant", "content": [{"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {}}]}
CHAT_CALL = {
    "role": "assistant",
    "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{}"}}],
}

# (id, dialect, body bytes, expected status)
CASES: list[tuple[str, str, bytes, int]] = []
for d in ("anthropic", "chat", "responses"):
    ok = OK[d]
    CASES += [
        (f"{d}-bad-json", d, b'{"model": "m", "messages": [', 400),
        (f"{d}-not-json", d, b"hello there", 400),
        (f"{d}-empty-body", d, b"", 400),
        (
            f"{d}-invalid-utf8",
            d,
            b'{"model": "m", "messages": [{"role": "user", "content": "\xff\xfe"}], '
            b'"input": "\xc3\x28", "max_tokens": 5}',
            400,
        ),
        (f"{d}-top-level-array", d, b"[1, 2, 3]", 400),
        (f"{d}-top-level-string", d, b'"hi"', 400),
        (
            f"{d}-nan",
            d,
            b'{"model": "m", "max_tokens": 5, "temperature": NaN, '
            b'"messages": [{"role": "user", "content": "x"}], "input": "x"}',
            400,
        ),
        (f"{d}-deep-nesting", d, deep(100_000), 400),
        (f"{d}-model-wrong-type", d, with_(ok, model=123), 400),
        (f"{d}-temperature-negative", d, with_(ok, temperature=-1), 400),
        (f"{d}-temperature-string", d, with_(ok, temperature="hot"), 400),
        (f"{d}-top-p-above-one", d, with_(ok, top_p=1.5), 400),
        (f"{d}-stream-wrong-type", d, with_(ok, stream="yes"), 400),
        (f"{d}-tools-not-a-list", d, with_(ok, tools="bash"), 400),
        (
            f"{d}-tool-without-name",
            d,
            with_(
                ok,
                tools=[{"description": "x", "input_schema": {}}]
                if d == "anthropic"
                else [{"type": "function", "description": "x"}],
            ),
            400,
        ),
    ]
CASES += [
    ("anthropic-missing-messages", "anthropic", with_(OK_ANTHROPIC, messages=...), 400),
    ("anthropic-missing-max-tokens", "anthropic", with_(OK_ANTHROPIC, max_tokens=...), 400),
    ("anthropic-max-tokens-zero", "anthropic", with_(OK_ANTHROPIC, max_tokens=0), 400),
    ("anthropic-max-tokens-string", "anthropic", with_(OK_ANTHROPIC, max_tokens="many"), 400),
    ("anthropic-messages-not-list", "anthropic", with_(OK_ANTHROPIC, messages="hi"), 400),
    ("anthropic-empty-messages", "anthropic", with_(OK_ANTHROPIC, messages=[]), 400),
    ("anthropic-bad-role", "anthropic", with_(OK_ANTHROPIC, messages=[{"role": "wizard", "content": "x"}]), 400),
    ("anthropic-content-number", "anthropic", with_(OK_ANTHROPIC, messages=[{"role": "user", "content": 5}]), 400),
    (
        "anthropic-unknown-block",
        "anthropic",
        with_(OK_ANTHROPIC, messages=[{"role": "user", "content": [{"type": "hologram"}]}]),
        400,
    ),
    (
        "anthropic-tool-result-unknown-id",
        "anthropic",
        with_(
            OK_ANTHROPIC,
            messages=[
                {"role": "user", "content": "x"},
                TOOL_USE,
                {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_nope", "content": "r"}]},
            ],
        ),
        400,
    ),
    (
        "anthropic-tool-result-without-call",
        "anthropic",
        with_(
            OK_ANTHROPIC,
            messages=[{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_1", "content": "r"}]}],
        ),
        400,
    ),
    ("anthropic-system-number", "anthropic", with_(OK_ANTHROPIC, system=42), 400),
    ("anthropic-stop-sequences-not-list", "anthropic", with_(OK_ANTHROPIC, stop_sequences="END"), 400),
    ("chat-missing-messages", "chat", with_(OK_CHAT, messages=...), 400),
    ("chat-empty-messages", "chat", with_(OK_CHAT, messages=[]), 400),
    ("chat-bad-role", "chat", with_(OK_CHAT, messages=[{"role": "robot", "content": "x"}]), 400),
    (
        "chat-tool-without-call",
        "chat",
        with_(
            OK_CHAT, messages=[{"role": "user", "content": "x"}, {"role": "tool", "tool_call_id": "c9", "content": "r"}]
        ),
        400,
    ),
    (
        "chat-tool-unknown-id",
        "chat",
        with_(
            OK_CHAT,
            messages=[
                {"role": "user", "content": "x"},
                CHAT_CALL,
                {"role": "tool", "tool_call_id": "c2", "content": "r"},
            ],
        ),
        400,
    ),
    (
        "chat-arguments-not-json",
        "chat",
        with_(
            OK_CHAT,
            messages=[
                {"role": "user", "content": "x"},
                {
                    "role": "assistant",
                    "tool_calls": [
                        {"id": "c1", "type": "function", "function": {"name": "bash", "arguments": "{oops"}}
                    ],
                },
            ],
        ),
        400,
    ),
    ("chat-max-tokens-negative", "chat", with_(OK_CHAT, max_tokens=-5), 400),
    ("chat-max-completion-tokens-string", "chat", with_(OK_CHAT, max_completion_tokens="x"), 400),
    ("chat-n-two", "chat", with_(OK_CHAT, n=2), 400),
    ("chat-stop-number", "chat", with_(OK_CHAT, stop=5), 400),
    ("responses-missing-input", "responses", with_(OK_RESPONSES, input=...), 400),
    ("responses-input-number", "responses", with_(OK_RESPONSES, input=7), 400),
    ("responses-previous-response-id", "responses", with_(OK_RESPONSES, previous_response_id="resp_1"), 400),
    (
        "responses-output-without-call",
        "responses",
        with_(OK_RESPONSES, input=[{"type": "function_call_output", "call_id": "c1", "output": "x"}]),
        400,
    ),
    ("responses-unknown-item", "responses", with_(OK_RESPONSES, input=[{"type": "teleport"}]), 400),
    ("responses-max-output-tokens-zero", "responses", with_(OK_RESPONSES, max_output_tokens=0), 400),
    (
        "responses-call-arguments-not-json",
        "responses",
        with_(
            OK_RESPONSES,
            input=[
                {"role": "user", "content": "x"},
                {"type": "function_call", "call_id": "c1", "name": "bash", "arguments": "{bad"},
            ],
        ),
        400,
    ),
    # outside the ranges the real APIs document: answered as they answer (400 naming the parameter)
    ("anthropic-temperature-above-one", "anthropic", with_(OK_ANTHROPIC, temperature=1.5), 400),
    (
        "anthropic-thinking-budget-below-1024",
        "anthropic",
        with_(OK_ANTHROPIC, max_tokens=4000, thinking={"type": "enabled", "budget_tokens": 512}),
        400,
    ),
    (
        "anthropic-thinking-budget-not-below-max-tokens",
        "anthropic",
        with_(OK_ANTHROPIC, max_tokens=2048, thinking={"type": "enabled", "budget_tokens": 2048}),
        400,
    ),
    ("chat-temperature-above-two", "chat", with_(OK_CHAT, temperature=2.5), 400),
    ("chat-reasoning-effort-unknown", "chat", with_(OK_CHAT, reasoning_effort="maximal"), 400),
    ("responses-reasoning-effort-unknown", "responses", with_(OK_RESPONSES, reasoning={"effort": "maximal"}), 400),
    ("chat-10000-messages", "chat", with_(OK_CHAT, messages=[{"role": "user", "content": "hi"}] * 10_000), 400),
    (
        "anthropic-10000-messages",
        "anthropic",
        with_(
            OK_ANTHROPIC, messages=[{"role": "user", "content": "hi"}, {"role": "assistant", "content": "ok"}] * 5_000
        ),
        400,
    ),
]


def _sdk(dialect):
    if dialect == "anthropic":
        return anthropic.AsyncAnthropic(api_key="x", base_url="http://proxy.test", max_retries=0)
    return openai.AsyncOpenAI(api_key="x", base_url="http://proxy.test/v1", max_retries=0)


EXPECTED = {
    ("anthropic", 400): anthropic.BadRequestError,
    ("anthropic", 401): anthropic.AuthenticationError,
    ("anthropic", 413): anthropic.RequestTooLargeError,
    ("openai", 400): openai.BadRequestError,
    ("openai", 401): openai.AuthenticationError,
    ("openai", 413): openai.APIStatusError,
}


def assert_sdk_raises(dialect: str, response, status: int):
    """The SDK's own status → exception mapping, applied to what the proxy answered."""
    client = _sdk(dialect)
    err = client._make_status_error_from_response(response)
    family = "anthropic" if dialect == "anthropic" else "openai"
    assert response.status_code == status, response.text
    assert isinstance(err, EXPECTED[(family, status)]), (type(err), response.text)
    body = response.json()
    if family == "anthropic":
        assert body["type"] == "error" and body["error"]["message"]
    else:
        assert body["error"]["message"]


@pytest.fixture()
async def proxy(tmp_path, tiny_model_dir):
    async with in_process_proxy(tmp_path / "run", tiny_model_dir) as p:
        yield p


async def test_malformed_corpus(proxy, tiny_model):
    assert len(CASES) >= 60
    episode_id, key = await proxy.new_episode()
    ended_id, ended_key = await proxy.new_episode()
    async with proxy.admin() as admin:
        await admin.post(f"/admin/episodes/{ended_id}/end")
    huge_text = "word " * tiny_model.max_context
    cases = list(CASES) + [
        (
            "anthropic-prompt-past-context",
            "anthropic",
            with_(OK_ANTHROPIC, messages=[{"role": "user", "content": huge_text}]),
            400,
        ),
        ("chat-prompt-past-context", "chat", with_(OK_CHAT, messages=[{"role": "user", "content": huge_text}]), 400),
        ("responses-prompt-past-context", "responses", with_(OK_RESPONSES, input=huge_text), 400),
    ]
    failures = []
    async with proxy.http() as http:
        for name, dialect, body, status in cases:
            r = await http.post(
                PATHS[dialect],
                content=body,
                headers={"authorization": f"Bearer {key}", "content-type": "application/json"},
            )
            try:
                assert_sdk_raises(dialect, r, status)
            except AssertionError as e:
                failures.append(f"{name}: {e}")
        # keys and sizes
        for dialect in PATHS:
            ok = json.dumps(OK[dialect]).encode()
            for name, headers, status in [
                ("no-key", {}, 401),
                ("unknown-key", {"x-api-key": "ofk-unknown"}, 401),
                ("ended-key", {"authorization": f"Bearer {ended_key}"}, 401),
            ]:
                r = await http.post(PATHS[dialect], content=ok, headers=headers)
                try:
                    assert_sdk_raises(dialect, r, status)
                except AssertionError as e:
                    failures.append(f"{dialect}-{name}: {e}")
            big = b'{"model": "m", "input": "' + b"a" * (50 * 1024 * 1024) + b'"}'
            r = await http.post(PATHS[dialect], content=big, headers={"authorization": f"Bearer {key}"})
            try:
                assert_sdk_raises(dialect, r, 413)
            except AssertionError as e:
                failures.append(f"{dialect}-50MB: {e}")
    # admin calls with an episode key
    async with proxy.http(proxy.admin_app) as http:
        for method, path in [
            ("post", "/admin/episodes"),
            ("post", "/admin/pause"),
            ("post", "/admin/weights"),
            ("get", f"/admin/episodes/{episode_id}"),
        ]:
            r = await getattr(http, method)(path, headers={"authorization": f"Bearer {key}"})
            if r.status_code != 401:
                failures.append(f"admin {path} with an episode key answered {r.status_code}")
    assert not failures, "\n".join(failures)

    # no row for any rejected call, but the ended key's: a late call (one per dialect) is recorded, never trained on
    assert proxy.store.count_calls(episode_id) == 0
    late = proxy.store.list_calls(ended_id)
    assert len(late) == proxy.store.count_calls() == len(PATHS)
    assert all(c.metadata == {"late": True} and c.call_error and not c.output_ids for c in late)
    assert proxy.store.integrity_check() == "ok"
    # still up: a normal call in each dialect succeeds
    for dialect in PATHS:
        async with proxy.http() as http:
            r = await http.post(PATHS[dialect], json=OK[dialect], headers={"authorization": f"Bearer {key}"})
            assert r.status_code == 200, r.text
    assert proxy.store.count_calls(episode_id) == 3


async def test_an_admin_episode_with_a_bad_attempt_or_sample_is_refused_naming_it(proxy):
    """The admin API's `metadata.attempt` / `sample` become the episode's numbers: anything else is a 400 that
    names the field (it was a TypeError, an internal error), and no episode is created."""
    async with proxy.admin() as admin:
        for field, value in [("attempt", None), ("sample", [1]), ("attempt", {"n": 1})]:
            r = await admin.post("/admin/episodes", json={"task": "t", "metadata": {field: value}})
            assert r.status_code == 400 and f"metadata.{field} must be a number" in r.json()["error"], r.text
        assert proxy.store.list_episodes() == []
        r = await admin.post("/admin/episodes", json={"task": "t", "metadata": {"attempt": "2", "sample": 1}})
        assert r.status_code == 201, r.text
    episode = proxy.store.get_episode(r.json()["episode_id"])
    assert episode is not None and (episode.attempt, episode.sample) == (2, 1)


async def test_any_retry_count_header_gets_a_well_formed_answer(proxy):
    """`x-stainless-retry-count` is not read (a retry is recognised by its body): no value of it fails a call.
    ("²" is a digit to `str.isdigit` but not to `int`.)"""
    _, key = await proxy.new_episode()
    async with proxy.http() as http:
        for value in [b"1", b"-1", b"abc", b"", b"1e9", b"9" * 40, "²".encode("latin-1"), b"\xff"]:
            headers = {"authorization": f"Bearer {key}", "x-stainless-retry-count": value}
            r = await http.post(PATHS["chat"], json=OK["chat"], headers=headers)
            assert r.status_code == 200 and r.json()["choices"], (value, r.text)


@pytest.mark.parametrize(
    "dialect,body,param",
    [
        ("anthropic", with_(OK_ANTHROPIC, temperature=1.01), "temperature"),
        (
            "anthropic",
            with_(OK_ANTHROPIC, max_tokens=4000, thinking={"type": "enabled", "budget_tokens": 100}),
            "thinking.budget_tokens",
        ),
        ("chat", with_(OK_CHAT, top_p=1.2), "top_p"),
        ("chat", with_(OK_CHAT, max_tokens=0), "max_tokens"),
        ("chat", with_(OK_CHAT, reasoning_effort="ultra"), "reasoning_effort"),
        ("responses", with_(OK_RESPONSES, temperature=2.1), "temperature"),
        ("responses", with_(OK_RESPONSES, reasoning={"effort": "ultra"}), "reasoning.effort"),
    ],
)
async def test_out_of_range_parameters_are_refused_naming_the_parameter(proxy, dialect, body, param):
    episode_id, key = await proxy.new_episode()
    async with proxy.http() as http:
        r = await http.post(PATHS[dialect], content=body, headers={"authorization": f"Bearer {key}"})
    assert_sdk_raises(dialect, r, 400)
    error = r.json()["error"]
    if dialect == "anthropic":
        assert error["type"] == "invalid_request_error" and error["message"].startswith(param + ":")
    else:
        assert error["param"] == param and error["type"] == "invalid_request_error"
    assert proxy.store.count_calls(episode_id) == 0
