"""A teacher behind an API recorded no token ids (message-level calls, `openforge.proxy.message_calls`): its
recordings become the **student's** token ids here, before assembly.

Each episode's calls are replayed, in order, through a fresh `ContinuityRenderer` of the student's model — the
renderer the proxy itself uses — as if the student had sampled the teacher's replies: a call's prompt is the
student template's rendering of the conversation the harness sent (extending the ids of the episode's earlier
calls wherever the harness sent the history back, so continuity segments and break reasons come out as the
proxy would have recorded them); its output is the student template's rendering of the teacher's reply
(reasoning, text, tool calls) up to and including the end-of-turn token — the tokens the student would have to
sample to say what the teacher said. The replayed records then go through the assembler unchanged
(`assemble.py`: loss on the teacher's turns only, the same merging and masking rules), so no second renderer
and no second assembler exist. Text in the reply that looks like a control token stays plain text, as in
every rendering (`ContentMarks`).

Token-level records (the teacher shared the student's tokenizer) pass through untouched.
"""

from __future__ import annotations

from openforge.core import CallRecord, Conversation, FinishReason, Message, ParsedOutput
from openforge.core.errors import ModelError
from openforge.dialects import DIALECTS, DialectError
from openforge.inference import MESSAGE_LEVEL
from openforge.models import ContentMarks, ModelDir, to_hf_messages
from openforge.models.model_dir import hf_message
from openforge.proxy.continuity import ContinuityRenderer, normalize_messages


class RerenderError(ModelError, ValueError):
    """A recorded call cannot be re-rendered (its body does not decode, the template is not append-only)."""


def is_message_level(call: CallRecord) -> bool:
    return MESSAGE_LEVEL in call.metadata


def reply_ids(model: ModelDir, conversation: Conversation, reply: ParsedOutput, *, ended: bool = True) -> list[int]:
    """The student's ids for `reply` as the next turn of `conversation`: what its template writes after the
    generation prompt, up to and including the end-of-turn token (`ended`; without it when the teacher was cut
    off), with the reply's own text encoded as plain text."""
    conversation = conversation.model_copy(update={"messages": normalize_messages(conversation.messages)})
    marks = ContentMarks.new()
    messages, tools = to_hf_messages(conversation, marks.wrap, images=model.takes_images)
    turn = hf_message(
        Message(role="assistant", content=reply.content, reasoning=reply.reasoning, tool_calls=reply.tool_calls),
        marks.wrap,
    )
    before = model.render_messages_text(messages, tools, True)
    through = model.render_messages_text([*messages, turn], tools, False)
    if not through.startswith(before):
        raise RerenderError(
            f"{model.path}'s chat template re-renders the conversation when a reply is added: "
            "the reply's tokens cannot be told apart from the prompt's"
        )
    eos_texts = [model.decode([i]) for i in model.eos_token_ids]
    kept: list[str] = []
    for inside, piece in marks.split(through[len(before) :]):
        if inside:
            kept.append(marks.wrap(piece))
            continue
        ends = [(piece.find(e), e) for e in eos_texts if e in piece]
        if ends:
            at, eos = min(ends)
            kept.append(piece[: at + len(eos)] if ended else piece[:at])
            return model.encode_marked("".join(kept), marks)
        kept.append(piece)
    raise RerenderError(
        f"{model.path}'s chat template ends an assistant turn with none of its end-of-turn tokens {eos_texts}"
    )


def rerender_calls(calls: list[CallRecord], model: ModelDir) -> list[CallRecord]:
    """An episode's calls with every message-level call in the student's ids (prompt, output, segment, break
    reason as the proxy would have recorded them had the student said what the teacher said). Calls that
    failed keep no ids (the assembler leaves them out); token-level calls are returned as they are."""
    renderer = ContinuityRenderer(model)
    out: list[CallRecord] = []
    for call in sorted(calls, key=lambda c: c.index):
        level = call.metadata.get(MESSAGE_LEVEL)
        if level is None or call.call_error is not None or "reply" not in level:
            out.append(call)
            continue
        dialect = DIALECTS.get(call.dialect)
        if dialect is None:
            raise RerenderError(f"call {call.index} of episode {call.episode_id}: unknown dialect {call.dialect!r}")
        try:
            conversation = dialect.decode(call.request_body).conversation
        except DialectError as e:
            raise RerenderError(
                f"call {call.index} of episode {call.episode_id}: its request does not decode: {e}"
            ) from None
        reply = ParsedOutput.model_validate(level["reply"])
        rendered = renderer.render(call.episode_id, conversation, side_call=call.side_call)
        output = reply_ids(model, conversation, reply, ended=call.finish_reason != FinishReason.length)
        renderer.record(call.episode_id, call.index, rendered, output, reply, side_call=call.side_call)
        out.append(
            call.model_copy(
                update={
                    "prompt_ids": rendered.prompt_ids,
                    "output_ids": output,
                    "output_logprobs": [],
                    "segment": rendered.segment,
                    "break_reason": rendered.break_reason,
                    "metadata": {**call.metadata, "rerendered_for": str(model.path)},
                }
            )
        )
    return out
