"""Request bodies stored as deltas of the previous call's body, and prompts extended from the proxy's hint:
exact round trips, from a warm store and from a freshly opened one."""

from __future__ import annotations

import json
import random

from openforge.core import CallRecord, Episode
from openforge.store import TrajectoryStore


def body(turns: int) -> bytes:
    messages = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"turn {i} " + "x" * 300} for i in range(turns)
    ]
    return json.dumps({"model": "m", "messages": messages, "tools": [{"name": "bash", "schema": "y" * 4000}]}).encode()


def episode(store, eid="ep"):
    store.create_episode(Episode(id=eid, key=f"key-{eid}"))


def test_growing_bodies_round_trip_and_are_stored_small(tmp_path):
    bodies = [body(n) for n in range(1, 30)]
    with TrajectoryStore.open(tmp_path) as store:
        episode(store)
        for i, b in enumerate(bodies):
            store.add_call(CallRecord(episode_id="ep", index=i, prompt_ids=[1, 2, 3], request_body=b))
        assert [c.request_body for c in store.list_calls("ep")] == bodies
        stored = store._conn().execute("SELECT sum(length(request_body)) FROM calls").fetchone()[0]
        assert stored < sum(len(b) for b in bodies) / 10
    with TrajectoryStore.open(tmp_path) as fresh:  # nothing cached: chains are followed in the file
        assert fresh.get_call("ep", 28).request_body == bodies[28]
        assert [c.request_body for c in fresh.list_calls("ep")] == bodies


def test_unrelated_and_empty_bodies(tmp_path):
    rng = random.Random(0)
    bodies = [bytes(rng.randrange(256) for _ in range(2000)), b"", body(3), body(3)[:10], body(5)]
    with TrajectoryStore.open(tmp_path) as store:
        episode(store)
        for i, b in enumerate(bodies):
            store.add_call(CallRecord(episode_id="ep", index=i, prompt_ids=[1], request_body=b))
    with TrajectoryStore.open(tmp_path) as fresh:
        assert [c.request_body for c in fresh.list_calls("ep")] == bodies
        assert [fresh.get_call("ep", i).request_body for i in range(len(bodies))] == bodies


def test_prompt_extension_hint(tmp_path):
    with TrajectoryStore.open(tmp_path) as store:
        episode(store)
        first = CallRecord(episode_id="ep", index=0, prompt_ids=list(range(100)), output_ids=[7, 8])
        store.add_call(first)
        prompt = list(range(100)) + [7, 8] + [5, 6, 7]
        hinted = CallRecord(
            episode_id="ep", index=1, prompt_ids=prompt, metadata={"extends_call": 0, "reused_prompt_tokens": 102}
        )
        store.add_call(hinted)
        # a hint that does not match what is stored is ignored, not trusted
        wrong = [9] * 102 + [1]
        store.add_call(
            CallRecord(
                episode_id="ep", index=2, prompt_ids=wrong, metadata={"extends_call": 0, "reused_prompt_tokens": 102}
            )
        )
        # nor one that matches at its first and last ids but not in between (a bug in continuity, not a lie)
        middle = list(range(100)) + [7, 8] + [4]
        middle[50] = 9
        store.add_call(
            CallRecord(
                episode_id="ep", index=3, prompt_ids=middle, metadata={"extends_call": 0, "reused_prompt_tokens": 102}
            )
        )
        assert store.get_call("ep", 1).prompt_ids == prompt
        assert store.get_call("ep", 2).prompt_ids == wrong
        assert store.get_call("ep", 3).prompt_ids == middle
    with TrajectoryStore.open(tmp_path) as fresh:
        assert [c.prompt_ids for c in fresh.list_calls("ep")] == [list(range(100)), prompt, wrong, middle]


def test_a_valid_hint_names_the_reference_without_comparing_other_calls(tmp_path):
    """With the proxy's hint (`extends_call` k, its whole prompt + output reused) the prompt is stored against
    call k directly, even where another recent call shares more (comparing a 100k-token prompt with every recent
    call cost more than the rest of storing it); it reads back whole either way."""
    seq0 = list(range(100)) + [7, 8]
    with TrajectoryStore.open(tmp_path) as store:
        episode(store)
        store.add_call(CallRecord(episode_id="ep", index=0, prompt_ids=seq0[:100], output_ids=[7, 8]))
        store.add_call(CallRecord(episode_id="ep", index=1, prompt_ids=seq0 + [1, 2, 3], output_ids=[4]))
        prompt = seq0 + [1, 2, 3, 4, 5]  # shares 106 ids with call 1's sequence, 102 with call 0's
        hint = {"extends_call": 0, "reused_prompt_tokens": 102}
        store.add_call(CallRecord(episode_id="ep", index=2, prompt_ids=prompt, metadata=hint))
        ref = store._conn().execute("SELECT prompt_ref, prompt_prefix_len FROM calls WHERE call_index = 2").fetchone()
        assert tuple(ref) == (0, 102)
    with TrajectoryStore.open(tmp_path) as fresh:
        assert fresh.get_call("ep", 2).prompt_ids == prompt
