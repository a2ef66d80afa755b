"""Token continuity: render a call's prompt by extending what the episode already sent and sampled.

docs/design.md, invariant 1: the proxy never re-tokenizes text the model sampled. When a harness sends the
conversation back, the prompt of the new call is

    prompt ids of the earlier call + its sampled ids + the template's end of that turn + the new messages

so that a segment's calls extend each other token for token, and only the new messages are rendered into
tokens. Matching compares canonical messages by fingerprint and ignores what harnesses change without
meaning (moving `cache_control` markers never reach the canonical form; tool-call ids are left out of the
fingerprint because OpenClaw rewrites them).

An episode may hold several open *threads* (Claude Code's sub-agents interleave with the main agent): a new
call continues whichever thread it extends. When it extends none, it starts a new segment, and the reason is
named:

- `sub_agent`: a different system prompt and a different first user message: a new conversation thread;
- `system_changed`, `tools_changed`: the same thread, with its system prompt / tool set edited;
- `history_rewritten`: earlier messages differ (compaction, edits);
- `reply_not_echoed`: the harness sent back something else where our reply should be;
- `context_message_moved`: the previous call's trailing user message was removed and re-added later
  (OpenClaw's internal context message);
- `template_not_append_only`: the chat template re-renders earlier turns differently as the conversation
  grows (e.g. it drops old reasoning), so appending is not possible;
- `repeated_request`: the same conversation again without our reply (not a retry the proxy recognised);
- `state_lost`: the proxy has no memory of the episode's earlier calls (it was restarted);
- `side_call`: a call the harness makes on the side (no tools), kept apart from the threads.

Images (screenshots) do not change this: a text-only model reads each image's placeholder text, so a
conversation that grows by a screenshot per call grows by that text; a model whose template takes images gets
each as a content item in its place, and its fingerprint includes the image's hash.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field

from openforge.core import Conversation, Message, ParsedOutput
from openforge.models import ModelDir, to_hf_messages

# What `_try_extend` answers when the conversation continues a thread but its template is not append-only.
_NOT_APPEND_ONLY = object()


def message_fingerprint(message: Message, *, images: bool = False) -> str:
    """What a message means, without the ids harnesses rewrite. `images`: the model sees the message's images
    (its template takes them), so they are part of what it means; a text-only model sees only their
    placeholders, so a harness that drops an old screenshot for its placeholder changes nothing it reads.
    The text is hashed as it is, each field length-prefixed (not through JSON: escaping a long tool result
    cost four times its hashing, on every message of every call)."""
    h = hashlib.blake2b(digest_size=16)
    for field_text in (message.role, message.content, message.reasoning or ""):
        _put(h, field_text.encode("utf-8", "surrogatepass"))
    calls = [[c.name, c.arguments] for c in message.tool_calls]
    extra: dict[str, object] = {"calls": calls, "is_error": message.is_error}
    if images and message.images:
        extra["images"] = [[i.offset, i.sha256 or i.url] for i in message.images]
    _put(h, json.dumps(extra, sort_keys=True, ensure_ascii=False, default=str).encode("utf-8", "surrogatepass"))
    return h.hexdigest()


def _put(h: hashlib.blake2b, data: bytes) -> None:
    h.update(len(data).to_bytes(8, "little"))
    h.update(data)


def reply_fingerprint(output: ParsedOutput) -> str:
    return message_fingerprint(
        Message(role="assistant", content=output.content, reasoning=output.reasoning, tool_calls=output.tool_calls)
    )


def _digest(value: object) -> str:
    return hashlib.blake2b(
        json.dumps(value, sort_keys=True, ensure_ascii=False, default=str).encode(), digest_size=16
    ).hexdigest()


def normalize_messages(messages: list[Message]) -> list[Message]:
    """Merge consecutive assistant messages into one: wire formats split one reply into several items
    (Responses: reasoning, message and function_call items), the template renders one turn."""
    out: list[Message] = []
    for m in messages:
        prev = out[-1] if out else None
        if m.role == "assistant" and prev is not None and prev.role == "assistant" and not prev.tool_calls:
            out[-1] = Message(
                role="assistant",
                reasoning="\n".join(r for r in (prev.reasoning, m.reasoning) if r) or None,
                content="".join(c for c in (prev.content, m.content) if c),
                tool_calls=m.tool_calls,
            )  # (an assistant turn holds no images)
        else:
            out.append(m)
    return out


@dataclass
class Thread:
    """The last call of one continuity segment: enough to extend it."""

    segment: int
    system_fp: str
    tools_fp: str
    message_fps: list[str]
    reply_fp: str
    # the last call's prompt and output ids, kept apart: joining them here would copy a 100k-id prompt once
    # more per call (the next prompt is built from both in one copy, `_append`)
    prompt_ids: list[int]
    output_ids: list[int]
    ended_with_eos: bool
    last_call_index: int
    last_message_role: str | None


@dataclass
class EpisodeThreads:
    threads: list[Thread] = field(default_factory=list)
    next_segment: int = 0
    known: bool = True  # False when the proxy restarted in the middle of the episode


@dataclass
class RenderedPrompt:
    prompt_ids: list[int]
    segment: int
    break_reason: str | None
    reused_tokens: int  # how many leading ids came from earlier calls
    system_fp: str
    tools_fp: str
    message_fps: list[str]
    last_message_role: str | None = None
    extends_call: int | None = None  # the call whose prompt + output this prompt starts with


class ContinuityRenderer:
    """Renders prompts for the calls of many episodes, keeping each episode's threads in memory."""

    def __init__(self, model: ModelDir, max_threads_per_episode: int = 8):
        self.model = model
        self.max_threads = max_threads_per_episode
        self._episodes: dict[str, EpisodeThreads] = {}
        eos = model.eos_token_ids
        self._eos_ids = set(eos)
        self._eos_texts = [model.decode([i]) for i in eos]

    # ---- episode lifecycle ---------------------------------------------------------------------------
    def forget(self, episode_id: str) -> None:
        self._episodes.pop(episode_id, None)

    def mark_unknown(self, episode_id: str, next_segment: int) -> None:
        """The episode had calls before this process started: its first call here starts a new segment."""
        self._episodes.setdefault(episode_id, EpisodeThreads(next_segment=next_segment, known=False))

    # ---- rendering -----------------------------------------------------------------------------------
    def render(self, episode_id: str, conversation: Conversation, side_call: bool = False) -> RenderedPrompt:
        state = self._episodes.setdefault(episode_id, EpisodeThreads())
        messages = normalize_messages(conversation.messages)
        conversation = conversation.model_copy(update={"messages": messages})
        system_fp = _digest(conversation.system)
        tools_fp = _digest([t.model_dump() for t in conversation.tools])
        fps = [message_fingerprint(m, images=self.model.takes_images) for m in messages]
        last_role = messages[-1].role if messages else None

        not_append_only = False
        if not side_call:
            for thread in reversed(state.threads):
                extended = self._try_extend(thread, conversation, system_fp, tools_fp, fps)
                if isinstance(extended, list):
                    return RenderedPrompt(
                        extended,
                        thread.segment,
                        None,
                        len(thread.prompt_ids) + len(thread.output_ids),
                        system_fp,
                        tools_fp,
                        fps,
                        last_role,
                        thread.last_call_index,
                    )
                not_append_only = not_append_only or extended is _NOT_APPEND_ONLY

        # The history matched a thread and our reply was echoed, but the template renders it differently now.
        reason = (
            "template_not_append_only"
            if not_append_only
            else self._break_reason(state, system_fp, tools_fp, fps, side_call)
        )
        prompt = self.model.render(conversation)
        segment = state.next_segment
        state.next_segment += 1
        return RenderedPrompt(prompt, segment, reason, 0, system_fp, tools_fp, fps, last_role)

    def record(
        self,
        episode_id: str,
        call_index: int,
        rendered: RenderedPrompt,
        output_ids: list[int],
        output: ParsedOutput,
        side_call: bool = False,
    ) -> None:
        """Remember a served call so that the next call of its thread can extend it."""
        if side_call:
            return
        state = self._episodes.setdefault(episode_id, EpisodeThreads())
        state.known = True
        thread = Thread(
            segment=rendered.segment,
            system_fp=rendered.system_fp,
            tools_fp=rendered.tools_fp,
            message_fps=rendered.message_fps,
            reply_fp=reply_fingerprint(output),
            prompt_ids=rendered.prompt_ids,
            output_ids=output_ids,
            ended_with_eos=bool(output_ids) and output_ids[-1] in self._eos_ids,
            last_call_index=call_index,
            last_message_role=rendered.last_message_role,
        )
        state.threads = [t for t in state.threads if t.segment != rendered.segment] + [thread]
        del state.threads[: -self.max_threads]

    def _try_extend(
        self, thread: Thread, conversation: Conversation, system_fp: str, tools_fp: str, fps: list[str]
    ) -> list[int] | object | None:
        """The extended prompt ids; None when the conversation does not continue this thread;
        `_NOT_APPEND_ONLY` when it does but the template renders the thread differently now."""
        n = len(thread.message_fps)
        if system_fp != thread.system_fp or tools_fp != thread.tools_fp:
            return None
        if fps[:n] != thread.message_fps or len(fps) <= n or fps[n] != thread.reply_fp:
            return None
        return self._append(thread, conversation, n)

    def _append(self, thread: Thread, conversation: Conversation, n: int) -> list[int] | object:
        """Ids of the thread's last call + the end of its turn + messages after the echoed reply, or
        `_NOT_APPEND_ONLY`."""
        marks = self.model.content_marks()
        messages, tools = to_hf_messages(conversation, marks.wrap, images=self.model.takes_images)
        has_system = conversation.system is not None
        reply_at = n + (1 if has_system else 0)  # index of the echoed reply among the HF messages
        render = self.model.render_messages_text
        before_reply = render(messages[:reply_at], tools, True)
        through_reply = render(messages[: reply_at + 1], tools, False)
        full = render(messages, tools, True)
        if not (through_reply.startswith(before_reply) and full.startswith(through_reply)):
            return _NOT_APPEND_ONLY  # e.g. it drops earlier reasoning once a new user turn follows
        turn = through_reply[len(before_reply) :]
        turn_end = self._turn_end(turn, thread.ended_with_eos)
        if turn_end is None:
            return _NOT_APPEND_ONLY  # the template renders no end-of-turn token after the reply
        tail = turn_end + full[len(through_reply) :]
        ids = list(thread.prompt_ids)
        ids += thread.output_ids
        ids += self.model.encode_marked(tail, marks)
        return ids

    def _turn_end(self, turn: str, ended_with_eos: bool) -> str | None:
        """The template's text after what the model sampled: what follows the end-of-turn token (or, if the
        model was cut off before it, the end-of-turn token itself and what follows)."""
        for eos in self._eos_texts:
            at = turn.rfind(eos)
            if at >= 0:
                return turn[at + len(eos) :] if ended_with_eos else turn[at:]
        return None

    def _break_reason(
        self, state: EpisodeThreads, system_fp: str, tools_fp: str, fps: list[str], side_call: bool
    ) -> str | None:
        if side_call:
            return "side_call"
        if not state.known:
            return "state_lost"
        if not state.threads:
            return None  # the episode's first call
        last = state.threads[-1]
        same_start = [t for t in state.threads if t.message_fps[:1] == fps[:1]]
        if not same_start and all(t.system_fp != system_fp for t in state.threads):
            return "sub_agent"
        candidates = same_start or [last]
        thread = max(candidates, key=lambda t: t.last_call_index)
        if thread.system_fp != system_fp:
            return "system_changed"
        if thread.tools_fp != tools_fp:
            return "tools_changed"
        n = len(thread.message_fps)
        if fps[:n] == thread.message_fps:
            return "reply_not_echoed" if len(fps) > n else "repeated_request"
        if fps[: n - 1] == thread.message_fps[: n - 1] and thread.last_message_role == "user":
            return "context_message_moved"  # the trailing user message was taken out and re-added later
        return "history_rewritten"
