"""Images kept once per content hash: request bodies stored without their images' base64 and rebuilt byte for byte,
from a warm store and a freshly opened one; a span that does not hold its image refused; a file from before the
image tables migrated (and read, read-only, as holding no images)."""

from __future__ import annotations

import base64
import json
import sqlite3

import pytest

from openforge.core import CallRecord, Episode
from openforge.store import SCHEMA_VERSION, TrajectoryStore
from openforge.store.schema import IMAGES_VERSION
from support.images import chat_image, png, recorded_images


def chat_body(shots: list[bytes]) -> bytes:
    messages = [
        {"role": "user", "content": [{"type": "text", "text": f"screen {i}"}, chat_image(s)]}
        for i, s in enumerate(shots)
    ]
    return json.dumps({"model": "m", "messages": messages}).encode()


def record(index: int, body: bytes) -> CallRecord:
    return CallRecord(
        episode_id="ep",
        index=index,
        prompt_ids=[1, 2, 3],
        request_body=body,
        images=recorded_images("chat_completions", body),
    )


def test_a_screenshot_sent_in_many_calls_is_stored_once_and_every_body_comes_back_exact(tmp_path):
    shots = [png(64, 64, seed=k) for k in range(3)]
    # ten calls: each sends the screenshots seen so far (the first again and again), one new every few calls
    bodies = [chat_body([shots[0]] * (i + 1) + shots[1 : 1 + i // 4]) for i in range(10)]
    with TrajectoryStore.open(tmp_path) as store:
        store.create_episode(Episode(id="ep", key="k"))
        for i, body in enumerate(bodies):
            store.add_call(record(i, body))
        assert [c.request_body for c in store.list_calls("ep")] == bodies
        conn = store._conn()
        assert conn.execute("SELECT count(*) FROM images").fetchone()[0] == 3
        assert conn.execute("SELECT count(*) FROM call_images").fetchone()[0] == sum(
            len(record(i, b).images) for i, b in enumerate(bodies)
        )
        stored = conn.execute("SELECT sum(length(request_body)) FROM calls").fetchone()[0]
        assert stored < len(base64.b64encode(shots[0]))  # no body keeps a screenshot
        assert store.get_image(store.list_calls("ep")[0].images[0].sha256) == ("image/png", shots[0])
        assert store.get_image("0" * 64) is None
        per_call = store.episode_images("ep")
        assert [len(per_call[i]) for i in range(10)] == [len(record(i, b).images) for i, b in enumerate(bodies)]
    with TrajectoryStore.open(tmp_path, readonly=True) as fresh:  # nothing cached
        assert fresh.get_call("ep", 9).request_body == bodies[9]
        assert fresh.get_call("ep", 9).images == record(9, bodies[9]).images
        assert [c.request_body for c in fresh.list_calls("ep")] == bodies


def test_a_span_that_does_not_hold_its_image_is_refused_and_nothing_is_written(tmp_path):
    body = chat_body([png(8, 8, seed=1)])
    (image,) = recorded_images("chat_completions", body)
    offset, length = image.span
    wrong = [
        image.model_copy(update={"span": (offset + 1, length)}),  # off by one: not the base64 of those bytes
        image.model_copy(update={"sha256": "0" * 64}),  # another image's hash
        image.model_copy(update={"span": (offset, len(body))}),  # past the end of the body
    ]
    with TrajectoryStore.open(tmp_path) as store:
        store.create_episode(Episode(id="ep", key="k"))
        for bad in wrong:
            with pytest.raises(ValueError, match="image span"):
                store.add_call(CallRecord(episode_id="ep", index=0, prompt_ids=[1], request_body=body, images=[bad]))
        assert store.count_calls() == 0
        assert store._conn().execute("SELECT count(*) FROM images").fetchone()[0] == 0
        # without a span the body keeps the text: stored whole, still exact
        kept = image.model_copy(update={"span": None})
        store.add_call(CallRecord(episode_id="ep", index=0, prompt_ids=[1], request_body=body, images=[kept]))
        assert store.get_call("ep", 0).request_body == body
        assert store.get_call("ep", 0).images == [kept]


def test_a_store_from_before_the_image_tables(tmp_path):
    """A file at version 4 (its image tables dropped, as it was before them): a read-only reader reads its calls
    as holding no images; a writer migrates it and stores images from then on."""
    plain = json.dumps({"model": "m", "messages": [{"role": "user", "content": "hi"}]}).encode()
    with TrajectoryStore.open(tmp_path) as store:
        store.create_episode(Episode(id="ep", key="k"))
        store.add_call(CallRecord(episode_id="ep", index=0, prompt_ids=[1], request_body=plain))
    conn = sqlite3.connect(tmp_path / "trajectories.db", isolation_level=None)
    conn.execute("DROP TABLE call_images")
    conn.execute("DROP TABLE images")
    conn.execute(f"PRAGMA user_version = {IMAGES_VERSION - 1}")
    conn.close()
    with TrajectoryStore.open(tmp_path, readonly=True) as reader:
        assert [c.request_body for c in reader.list_calls("ep")] == [plain]
        assert reader.get_call("ep", 0).images == []
        assert reader.episode_images("ep") == {} and reader.get_image("0" * 64) is None
    body = chat_body([png(8, 8)])
    with TrajectoryStore.open(tmp_path) as store:
        assert store._conn().execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
        store.add_call(record(1, body))
        assert [c.request_body for c in store.list_calls("ep")] == [plain, body]
        assert len(store.episode_images("ep")[1]) == 1
