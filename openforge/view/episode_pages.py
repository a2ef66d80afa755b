"""Episode-level pages: the filterable, sortable, paginated episode table; one episode (its conversation call
by call, the verifier's output, the token view); GRPO groups and one group side by side."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from openforge.core import CallImage
from openforge.store import EpisodeQuery
from openforge.store.queries import SORT_KEYS
from openforge.train.assemble import MODES
from openforge.view import params as p
from openforge.view.conversation import read_turns, reply_of
from openforge.view.groups import group_view
from openforge.view.library import Library, OpenStore, UnknownRun
from openforge.view.tokens import BUCKET_BOUNDS, token_view

PAGE_SIZE = 50
MAX_PAGE_SIZE = 500


def _crumbs(opened: OpenStore, *more: tuple[str, str | None]) -> list[tuple[str, str | None]]:
    run = (opened.run.name, p.url("/run", run=opened.run_index))
    label = "episodes" if opened.ref.label == "." else opened.ref.label
    store = (label, p.url("/episodes", run=opened.run_index, store=opened.ref.label))
    if more and more[0][0] == label:
        return [run, *more]
    return [run, store, *more]


def _store(library: Library, params: Mapping[str, str]) -> OpenStore:
    return library.open(p.integer(params, "run", 0, 0), p.text(params, "store", "."))


def _instruction(metadata: dict[str, Any]) -> str | None:
    """The task's instruction, as the orchestrator and the family runner keep it in the episode's metadata."""
    task = metadata.get("task")
    value = task.get("instruction") if isinstance(task, dict) else None
    return value if isinstance(value, str) else None


def episodes_page(library: Library, params: Mapping[str, str]) -> dict[str, Any]:
    opened = _store(library, params)
    size = p.integer(params, "size", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    page = p.integer(params, "page", 1, 1)
    query = EpisodeQuery(
        task=p.text(params, "task"),
        harness=p.text(params, "harness"),
        outcome=p.text(params, "outcome"),
        step=p.integer(params, "step"),
        sample=p.integer(params, "sample", None, 0),
        final_only=p.flag(params, "final"),
        flagged_only=p.flag(params, "flagged"),
        min_reward=p.number(params, "min_reward"),
        max_reward=p.number(params, "max_reward"),
        sort=p.choice(params, "sort", SORT_KEYS, "created"),
        descending=p.flag(params, "desc"),
        limit=size,
        offset=(page - 1) * size,
    )
    result = opened.store.query_episodes(query)
    filters = {
        "run": opened.run_index,
        "store": opened.ref.label,
        "task": query.task,
        "harness": query.harness,
        "outcome": query.outcome,
        "step": query.step,
        "sample": query.sample,
        "final": query.final_only,
        "flagged": query.flagged_only,
        "min_reward": query.min_reward,
        "max_reward": query.max_reward,
        "size": size if size != PAGE_SIZE else None,
    }
    pages = max(1, math.ceil(result.total / size))
    return {
        "title": f"Episodes · {opened.run.name} · {opened.ref.title}",
        "opened": opened,
        "rows": result.rows,
        "total": result.total,
        "query": query,
        "filters": filters,
        "page": page,
        "pages": pages,
        "size": size,
        "facets": library.facets(opened),
        "sort_keys": SORT_KEYS,
        "crumbs": _crumbs(opened, ("episodes", None)),
    }


def episode_page(library: Library, params: Mapping[str, str]) -> dict[str, Any]:
    opened = _store(library, params)
    episode_id = p.required(params, "id")
    episode = opened.store.get_episode(episode_id)
    if episode is None:
        raise UnknownRun(f"no episode {episode_id!r} in {opened.run.name} · {opened.ref.label}")
    mode = p.choice(params, "mode", MODES, "merged")
    calls = opened.store.list_calls(episode.id)
    tokens = library.tokens(opened.model_dir)
    turns = read_turns(calls, tokens)
    step = episode.metadata.get("step", 0)
    metadata = {k: v for k, v in episode.metadata.items() if k != "task"}
    return {
        "screenshots": screenshots(opened.store.episode_images(episode.id)),
        "title": f"Episode {episode.id[:8]}",
        "opened": opened,
        "episode": episode,
        "turns": turns,
        "reply_of": reply_of,
        "verifier": opened.store.get_verifier_result(episode.id),
        "flags": opened.store.episode_flags(episode.id),
        "instruction": _instruction(episode.metadata),
        "metadata": metadata,
        "tokens": token_view(episode, calls, tokens, mode),
        "has_tokenizer": tokens is not None,
        "mode": mode,
        "modes": MODES,
        "bounds": BUCKET_BOUNDS,
        "step": step if isinstance(step, int) else 0,
        "versions": sorted({c.policy_version for c in calls}),
        "crumbs": _crumbs(opened, (f"episode {episode.id[:8]}", None)),
    }


def screenshots(images: dict[int, list[CallImage]]) -> dict[int, list[CallImage]]:
    """call index → the images its request sent first in the episode (a harness sends every earlier screenshot
    again with each call: each is shown beside the call that brought it)."""
    seen: set[str] = set()
    out: dict[int, list[CallImage]] = {}
    for index in sorted(images):
        for image in images[index]:
            key = image.sha256 or image.url or ""
            if key and key not in seen:
                seen.add(key)
                out.setdefault(index, []).append(image)
    return out


def groups_page(library: Library, params: Mapping[str, str]) -> dict[str, Any]:
    opened = _store(library, params)
    size = p.integer(params, "size", PAGE_SIZE, 1, MAX_PAGE_SIZE)
    page = p.integer(params, "page", 1, 1)
    step = p.integer(params, "step")
    task = p.text(params, "task")
    rows, total = opened.store.query_groups(step=step, limit=size, offset=(page - 1) * size, task=task)
    return {
        "title": f"GRPO groups · {opened.run.name} · {opened.ref.title}",
        "opened": opened,
        "rows": rows,
        "total": total,
        "page": page,
        "pages": max(1, math.ceil(total / size)),
        "size": size,
        "step": step,
        "task": task,
        "steps": library.facets(opened).steps,
        "crumbs": _crumbs(opened, ("groups", None)),
    }


def group_page(library: Library, params: Mapping[str, str]) -> dict[str, Any]:
    opened = _store(library, params)
    step = p.integer(params, "step", 0)
    task, harness = p.text(params, "task"), p.text(params, "harness")
    view = group_view(opened.store, step, task, harness)
    if not view.members:
        raise UnknownRun(f"no final episode of step {step}, task {task!r}, harness {harness!r} in {opened.ref.label}")
    tokens = library.tokens(opened.model_dir)
    actions, last = {}, {}
    for member in view.members:
        turns = [t for t in read_turns(opened.store.list_calls(member.episode.id), tokens) if not t.call.side_call]
        replies = [reply_of(t) for t in turns]
        actions[member.episode.id] = [tc for r in replies if r for tc in r.tool_calls]
        last[member.episode.id] = replies[-1] if replies else None
    return {
        "title": f"Group {view.group_id}",
        "opened": opened,
        "view": view,
        "actions": actions,
        "last": last,
        "instruction": _instruction(view.members[0].episode.metadata),
        "summaries": opened.store.call_summaries([m.episode.id for m in view.members]),
        "crumbs": _crumbs(
            opened,
            ("groups", p.url("/groups", run=opened.run_index, store=opened.ref.label, step=step)),
            (f"step {step} · {task} · {harness}", None),
        ),
    }
