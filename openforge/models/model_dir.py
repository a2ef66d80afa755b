"""Load a Hugging Face-format model directory: tokenizer, chat template, context length, weights.

Rendering keeps the content of messages apart from the template's own markup: text inside a message that
merely looks like a control token (`<|im_end|>`, `<tool_call>`) is encoded as plain text, never as the control
token. To do that, every string that comes from the conversation is wrapped in an unguessable marker pair
before the template runs; after rendering, marked spans are encoded with special-token matching off and the
template's own text with it on. Inside the markers, each control-token string is replaced by a placeholder
(`ContentMarks`), so a template that tests or cuts strings at control tokens — Qwen3's splits assistant
content at `</think>` — treats them as the plain text they are and never cuts a marked string in two; a
template that cuts one anyway is refused (`ContentCutError`), never encoded with broken markers.
"""

from __future__ import annotations

import functools
import json
import re
import secrets
from collections.abc import Callable, Iterator
from datetime import datetime
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Required, TypedDict

from jinja2 import nodes
from jinja2.ext import Extension
from jinja2.parser import Parser
from jinja2.sandbox import ImmutableSandboxedEnvironment
from tokenizers import Tokenizer

from openforge.core import Conversation, Message
from openforge.core.errors import ConfigurationError
from openforge.core.json_types import JSONValue
from openforge.models.hub import ModelRef, resolve_model
from openforge.models.tool_formats import ToolCallFormat, detect_tool_format

if TYPE_CHECKING:
    import torch
    from transformers import PreTrainedModel


class ModelDirError(ConfigurationError, ValueError):
    """The directory is not a usable model directory; the message says what is missing."""


# What a chat template is given (transformers' message and tool dicts), built by `to_hf_messages`.
Wrap = Callable[[str], str]  # applied to every string the conversation provides (`ContentMarks.wrap`)


class HFFunctionCall(TypedDict):
    name: str
    arguments: JSONValue  # the decoded object; JSON text for templates that concatenate calls as text


class HFToolCall(TypedDict):
    id: str
    type: Literal["function"]
    function: HFFunctionCall


class HFContentItem(TypedDict, total=False):
    type: Required[Literal["text", "image"]]
    text: str


class HFMessage(TypedDict, total=False):
    role: Required[str]
    # None: an assistant turn that only calls tools, for text templates; items: a message with images, for a
    # template that takes images (`ModelDir.takes_images`)
    content: Required[str | list[HFContentItem] | None]
    reasoning_content: str
    tool_calls: list[HFToolCall]
    tool_call_id: str | None
    name: str


class HFFunction(TypedDict):
    name: str
    description: str
    parameters: JSONValue  # a JSON schema


class HFTool(TypedDict):
    type: Literal["function"]
    function: HFFunction


class GenerationTag(Extension):
    """`{% generation %}...{% endgeneration %}`: transformers marks the assistant's own tokens with it (for
    its assistant masks); for rendering it is its body."""

    tags = {"generation"}  # noqa: RUF012 - jinja2's Extension declares `tags` so (a set, not a ClassVar)

    def parse(self, parser: Parser) -> nodes.Node:
        lineno = next(parser.stream).lineno
        body = parser.parse_statements(("name:endgeneration",), drop_needle=True)
        return nodes.Scope(body, lineno=lineno)


# A plain dict's attributes are its methods; any other name looked up on one can only be an item.
_DICT_ATTRIBUTES = frozenset(dir(dict))


class _TemplateEnvironment(ImmutableSandboxedEnvironment):
    """transformers' chat-template sandbox, with `message.role` on a plain dict looked up directly: Jinja
    tries the attribute first and falls back to the item after an AttributeError, and those exceptions were
    most of a long conversation's rendering time. The answer is the same (an item is all such a name can
    be); names a dict has as attributes (`items`, `get`, ...) still go through the sandbox's checks."""

    def getattr(self, obj: Any, attribute: str) -> Any:
        if type(obj) is dict and attribute not in _DICT_ATTRIBUTES:
            try:
                return obj[attribute]
            except KeyError:
                return self.undefined(obj=obj, name=attribute)
        return super().getattr(obj, attribute)


def _jinja_env() -> ImmutableSandboxedEnvironment:
    # Same settings, filters and globals as transformers' chat-template environment, so any HF template renders
    # the same way.
    env = _TemplateEnvironment(
        trim_blocks=True, lstrip_blocks=True, extensions=["jinja2.ext.loopcontrols", GenerationTag]
    )

    def tojson(
        value: object,
        ensure_ascii: bool = False,
        indent: int | None = None,
        separators: tuple[str, str] | None = None,
        sort_keys: bool = False,
    ) -> str:
        return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def raise_exception(message: str) -> None:
        raise ModelDirError(f"chat template refused the conversation: {message}")

    def strftime_now(format: str) -> str:  # Llama 3.2's "Today Date"; makes the prompt depend on the day
        return datetime.now().strftime(format)

    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env


class ModelDir:
    """A model directory on disk, or a Hugging Face Hub id (`ORG/NAME`, `ORG/NAME@REVISION`) resolved through
    the Hub client's cache (`openforge.models.hub`). Loading the weights is separate (`load_model`), since the
    proxy needs only the tokenizer and template when the backend is remote: for a Hub id only those files are
    fetched until the weights are loaded."""

    def __init__(self, path: str | Path):
        self.ref = ModelRef.parse(path)
        try:
            self.path = resolve_model(self.ref, weights=False)
        except FileNotFoundError as e:
            raise ModelDirError(str(e)) from None
        if not (self.path / "tokenizer.json").is_file():
            raise ModelDirError(f"{self.path} has no tokenizer.json (a fast tokenizer is required)")
        self.config: dict[str, Any] = self._read_json("config.json", required=True)
        self.tokenizer_config: dict[str, Any] = self._read_json("tokenizer_config.json")
        self.generation_config: dict[str, Any] = self._read_json("generation_config.json")
        self.tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        # A second instance that never matches special tokens, for message content (see module docstring).
        self._plain_tokenizer = Tokenizer.from_file(str(self.path / "tokenizer.json"))
        self._plain_tokenizer.encode_special_tokens = True
        self.chat_template = self._read_chat_template()
        self._template = _jinja_env().from_string(self.chat_template)

    # ---- metadata -------------------------------------------------------------------------------------
    def _read_json(self, name: str, required: bool = False) -> dict[str, Any]:
        f = self.path / name
        if not f.is_file():
            if required:
                raise ModelDirError(f"{self.path} has no {name}")
            return {}
        return json.loads(f.read_text())

    def _read_chat_template(self) -> str:
        f = self.path / "chat_template.jinja"
        if f.is_file():
            return f.read_text()
        template = self.tokenizer_config.get("chat_template")
        if isinstance(template, list):  # named templates: [{"name": "default", "template": ...}, ...]
            named = {t["name"]: t["template"] for t in template}
            template = named.get("default") or next(iter(named.values()), None)
        if not template:
            raise ModelDirError(f"{self.path} has no chat template (chat_template.jinja or tokenizer_config.json)")
        return template

    @property
    def max_context(self) -> int:
        length = self.config.get("max_position_embeddings") or self.tokenizer_config.get("model_max_length")
        if length is None:
            raise ModelDirError(
                f"{self.path} names no context length: set max_position_embeddings in config.json "
                "(or model_max_length in tokenizer_config.json)"
            )
        return int(length)

    @property
    def vocab_size(self) -> int:
        return self.tokenizer.get_vocab_size()

    def _token_id(self, token: str | dict | None) -> int | None:
        if isinstance(token, dict):
            token = token.get("content")
        return self.tokenizer.token_to_id(token) if token else None

    @cached_property
    def eos_token_ids(self) -> list[int]:
        """Ids that end an assistant turn: generation_config's eos ids, the config's, and the tokenizer's."""
        ids: list[int] = []
        for source in (self.generation_config.get("eos_token_id"), self.config.get("eos_token_id")):
            if source is None:
                continue
            ids.extend(source if isinstance(source, list) else [source])
        tid = self._token_id(self.tokenizer_config.get("eos_token"))
        if tid is not None:
            ids.append(tid)
        unique = list(dict.fromkeys(int(i) for i in ids))
        if not unique:
            raise ModelDirError(f"{self.path} names no eos token (generation_config.json or tokenizer_config.json)")
        return unique

    @cached_property
    def pad_token_id(self) -> int:
        for candidate in (
            self.config.get("pad_token_id"),
            self.generation_config.get("pad_token_id"),
            self._token_id(self.tokenizer_config.get("pad_token")),
        ):
            if candidate is not None:
                return int(candidate)
        return self.eos_token_ids[0]

    @cached_property
    def max_token_chars(self) -> int:
        """The most characters one token can stand for (its vocabulary entry is at least as long as the text it
        decodes to): a text of n characters is at least n / this many tokens."""
        return max(1, max((len(piece) for piece in self.tokenizer.get_vocab(with_added_tokens=True)), default=1))

    @cached_property
    def takes_images(self) -> bool:
        """The chat template renders image content items (`{"type": "image"}`, as Qwen2-VL's, Llava's, Gemma 3's
        and Llama 3.2 Vision's do): messages with images are then given to it as content items."""
        return bool(_IMAGE_ITEMS.search(self.chat_template))

    @cached_property
    def tool_format(self) -> ToolCallFormat:
        """The tool-call format the chat template renders (`openforge.models.tool_formats`)."""
        return detect_tool_format(self.chat_template)

    @property
    def tool_call_format(self) -> str:
        """The tool-call format's name: `json`, `qwen3_coder`, `llama3_json`, `mistral`, `deepseek_v3`, ..."""
        return self.tool_format.name

    # ---- text <-> ids -----------------------------------------------------------------------------------
    def encode_text(self, text: str) -> list[int]:
        """Plain text to ids: control-token look-alikes stay plain text."""
        return self._plain_tokenizer.encode(text, add_special_tokens=False).ids

    def encode_completion(self, text: str) -> list[int]:
        """Text as the *model* would produce it: control markup (`<tool_call>`, `<|im_end|>`) becomes the
        control tokens. Used for scripted policies and teachers, whose text stands for sampled tokens."""
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: list[int]) -> str:
        """Ids to text, control tokens kept."""
        return self.tokenizer.decode(ids, skip_special_tokens=False)

    # ---- chat template ----------------------------------------------------------------------------------
    def render_text(self, conversation: Conversation, add_generation_prompt: bool = True) -> str:
        """The chat template's text for a conversation (control-token look-alikes indistinguishable): what
        `render`'s ids decode to. Content is rendered as `render` renders it, control-token strings in it
        hidden from the template."""
        marks = self.content_marks()
        messages, tools = to_hf_messages(conversation, marks.escape, images=self.takes_images)
        return marks.unescape(self.render_messages_text(messages, tools, add_generation_prompt))

    def render(self, conversation: Conversation, add_generation_prompt: bool = True) -> list[int]:
        """Prompt ids for a conversation; message content never turns into control tokens."""
        marks = self.content_marks()
        return self.encode_marked(self._render_marked(conversation, add_generation_prompt, marks), marks)

    @cached_property
    def control_strings(self) -> tuple[str, ...]:
        """The text of every added token (special or not): what the tokenizer turns into one control token."""
        return tuple(sorted({t.content for t in self.tokenizer.get_added_tokens_decoder().values() if t.content}))

    def content_marks(self) -> ContentMarks:
        """A fresh marker pair for one rendering, hiding this tokenizer's control strings inside content."""
        return ContentMarks.new(self.control_strings)

    def render_messages_text(
        self, messages: list[HFMessage], tools: list[HFTool] | None, add_generation_prompt: bool
    ) -> str:
        """Render HF-style message dicts with the template (no marking)."""
        if self.tool_format.history_arguments == "json_string":
            messages = [_for_text_templates(m) for m in messages]
        return self._template.render(
            messages=messages,
            tools=tools or None,
            add_generation_prompt=add_generation_prompt,
            bos_token=_token_text(self.tokenizer_config.get("bos_token")),
            eos_token=_token_text(self.tokenizer_config.get("eos_token")),
        )

    def _render_marked(self, conversation: Conversation, add_generation_prompt: bool, marks: ContentMarks) -> str:
        messages, tools = to_hf_messages(conversation, marks.wrap, images=self.takes_images)
        return self.render_messages_text(messages, tools, add_generation_prompt)

    def encode_marked(self, text: str, marks: ContentMarks) -> list[int]:
        """Encode rendered text: marked spans as plain text, the rest with control tokens matched."""
        ids: list[int] = []
        for inside, piece in marks.split(text):
            if piece:
                ids.extend(
                    (self._plain_tokenizer if inside else self.tokenizer).encode(piece, add_special_tokens=False).ids
                )
        return ids

    # ---- weights ---------------------------------------------------------------------------------------
    def load_model(self, dtype: torch.dtype | None = None) -> PreTrainedModel:
        """The causal LM, in eval mode, on CPU (transformers)."""
        import torch
        from transformers import AutoModelForCausalLM

        weights = resolve_model(self.ref, weights=True)
        model = AutoModelForCausalLM.from_pretrained(weights, dtype=dtype or torch.float32)
        model.eval()
        return model


# The noncharacters that markers and placeholders are made of: outside a marked span, a piece of one means a
# template cut a conversation string.
_MARK_CHARS = re.compile("[\ufdd0-\ufdd5]")
# What may be a placeholder of some rendering: `ContentMarks.unescape` checks it is one of its own.
_PLACEHOLDER = re.compile("\ufdd4([^\ufdd4\ufdd5]*)\ufdd5")


class ContentCutError(ModelDirError):
    """The chat template cut a conversation string in two (or nested one in another): its markers no longer
    say which text came from the conversation, so the rendering is refused rather than encoded wrongly."""


def _token_text(token: str | dict | None) -> str:
    """A special token as tokenizer_config.json names it: a string, or an AddedToken object's `content`."""
    if isinstance(token, dict):
        return str(token.get("content") or "")
    return token or ""


def _for_text_templates(message: HFMessage) -> HFMessage:
    """An assistant message as templates that concatenate tool calls as text want it (DeepSeek's): arguments as
    JSON text, and no content (None, OpenAI's convention) when the message only calls tools."""
    calls = message.get("tool_calls")
    if not calls:
        return message
    as_text: list[HFToolCall] = [
        {**c, "function": {**c["function"], "arguments": json.dumps(c["function"]["arguments"], ensure_ascii=False)}}
        if isinstance(c["function"]["arguments"], dict)
        else c
        for c in calls
    ]
    return {**message, "tool_calls": as_text, "content": message.get("content") or None}


@functools.lru_cache(maxsize=16)
def _alternation(strings: tuple[str, ...]) -> re.Pattern[str]:
    """A pattern matching any of `strings` (in that order of preference), compiled once per tokenizer: a render
    makes new markers, never new control strings."""
    return re.compile("|".join(re.escape(s) for s in strings))


class ContentMarks:
    """An unguessable pair of markers around conversation-provided strings (Unicode noncharacters + nonce).

    Render with `to_hf_messages(conversation, marks.wrap)`, then `ModelDir.encode_marked(text, marks)`: what
    the conversation provided is encoded as plain text, so no message can spell a control token.

    Two things keep the markers balanced whatever the template does with a string:
    - inside a wrapped string every control-token string (`control`) is replaced by a placeholder, so a
      template that looks for one (`'</think>' in content`, `content.split('</think>')`) finds none and
      renders the string whole; `split` puts the original text back;
    - the markers go inside the string's leading and trailing whitespace, so `strip`/`lstrip` act as on the
      bare string.
    `split` is strict: a marker without its partner, a marker inside a marked span, or any piece of a marker
    or placeholder outside one raises `ContentCutError` — a template that cut the string anyway (a slice).
    """

    def __init__(self, open_: str, close: str, control: tuple[str, ...] = (), nonce: str = ""):
        self.open, self.close = open_, close
        # placeholder i stands for control[i]; the nonce keeps a message from spelling one. Nothing here is
        # compiled per nonce: a render makes a new pair, and compiling two patterns cost more than rendering a
        # short conversation.
        self._nonce = nonce
        self._control = tuple(control)
        self._placeholders = [f"\ufdd4{nonce}{i}\ufdd5" for i in range(len(self._control))]
        longest_first = sorted(range(len(self._control)), key=lambda i: -len(self._control[i]))
        self._to_placeholder = dict(zip(self._control, self._placeholders))
        self._escape = _alternation(tuple(self._control[i] for i in longest_first)) if self._control else None

    @classmethod
    def new(cls, control: tuple[str, ...] | list[str] = ()) -> ContentMarks:
        nonce = secrets.token_hex(8)
        return cls(f"\ufdd0{nonce}\ufdd1", f"\ufdd2{nonce}\ufdd3", tuple(control), nonce)

    def escape(self, text: str) -> str:
        """`text` with its control-token strings replaced by placeholders (no markers)."""
        if self._escape is None or not text:
            return text
        return self._escape.sub(lambda m: self._to_placeholder[m.group(0)], text)

    def unescape(self, text: str) -> str:
        if not self._control or "\ufdd4" not in text:
            return text
        return _PLACEHOLDER.sub(self._control_for, text)

    def _control_for(self, match: re.Match[str]) -> str:
        body = match.group(1)
        index = body[len(self._nonce) :]
        if not (body.startswith(self._nonce) and index.isdecimal() and int(index) < len(self._control)):
            return match.group(0)  # not one of this rendering's placeholders
        return self._control[int(index)]

    def wrap(self, text: str) -> str:
        core = text.strip()
        if not core:
            return text  # empty or whitespace only: nothing that could spell a control token
        head = text[: len(text) - len(text.lstrip())]
        tail = text[len(text.rstrip()) :]
        return f"{head}{self.open}{self.escape(core)}{self.close}{tail}"

    def split(self, text: str) -> Iterator[tuple[bool, str]]:
        """Yield (inside_marks, piece) in order, placeholders inside marked pieces turned back into their text.
        Raises ContentCutError when the markers are not balanced pairs."""
        inside = False
        for piece in self._pieces(text):
            if piece == self.open:
                if inside:
                    raise ContentCutError("the chat template nested one conversation string inside another")
                inside = True
            elif piece == self.close:
                if not inside:
                    raise ContentCutError(
                        "the chat template cut a conversation string (its end marker has no start): refusing to "
                        "render, since the cut part could no longer be told from the template's own markup"
                    )
                inside = False
            elif piece:
                if inside:
                    yield True, self.unescape(piece)
                elif _MARK_CHARS.search(piece):
                    raise ContentCutError("the chat template moved part of a conversation string outside its markers")
                else:
                    yield False, piece
        if inside:
            raise ContentCutError(
                "the chat template cut a conversation string (its start marker has no end): refusing to render"
            )

    def _pieces(self, text: str) -> Iterator[str]:
        """`text` cut at every marker, the markers kept as pieces of their own, in order. (The two markers
        cannot overlap each other or themselves: each starts with a character that occurs nowhere else in
        either.)"""
        for i, after_open in enumerate(text.split(self.open)):
            if i:
                yield self.open
            for j, piece in enumerate(after_open.split(self.close)):
                if j:
                    yield self.close
                yield piece


def _wrap_json(value: JSONValue, wrap: Wrap, keep_identifier_keys: bool = False) -> JSONValue:
    """Wrap every string in `value`. With `keep_identifier_keys`, keys that are plain identifiers (which can
    never spell a control token) stay unwrapped, so a template can look up `parameters.properties`."""
    if isinstance(value, str):
        return wrap(value)
    if isinstance(value, dict):
        return {
            (k if keep_identifier_keys and _IDENTIFIER.fullmatch(k) else wrap(k)): _wrap_json(
                v, wrap, keep_identifier_keys
            )
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_wrap_json(v, wrap, keep_identifier_keys) for v in value]
    return value


_IDENTIFIER = re.compile(r"[A-Za-z_$][A-Za-z0-9_$]*")
# A template comparing a content item's type with "image" (`item['type'] == 'image'`, `selectattr('type',
# 'equalto', 'image')`) or testing `'image' in content`.
_IMAGE_ITEMS = re.compile(r"""(?:==\s*|['"]equalto['"]\s*,\s*)['"]image(?:_url)?['"]|['"]image['"]\s+in\s""")


def _unchanged(text: str) -> str:
    return text


def to_hf_messages(
    conversation: Conversation, wrap: Wrap = _unchanged, *, images: bool = False
) -> tuple[list[HFMessage], list[HFTool]]:
    """Canonical conversation → (HF chat-template messages, HF tools), every provided string passed
    through `wrap`. `images`: a message with images gets content items, each image where its placeholder was
    (for a template that takes images); otherwise every content is text, placeholders included."""
    messages: list[HFMessage] = []
    if conversation.system is not None:
        messages.append({"role": "system", "content": wrap(conversation.system)})
    messages.extend(hf_message(m, wrap, images=images) for m in conversation.messages)
    tools: list[HFTool] = [
        {
            "type": "function",
            "function": {
                "name": wrap(t.name),
                "description": wrap(t.description),
                "parameters": _wrap_json(t.parameters, wrap, keep_identifier_keys=True),
            },
        }
        for t in conversation.tools
    ]
    return messages, tools


def hf_message(message: Message, wrap: Wrap = _unchanged, *, images: bool = False) -> HFMessage:
    content: str | list[HFContentItem] = wrap(message.content)
    if images and message.images:
        content = _content_items(message, wrap)
    out: HFMessage = {"role": message.role, "content": content}
    if message.role == "assistant":
        if message.reasoning:
            out["reasoning_content"] = wrap(message.reasoning)
        if message.tool_calls:
            out["tool_calls"] = [
                {
                    "id": c.id,
                    "type": "function",
                    "function": {"name": wrap(c.name), "arguments": _wrap_json(c.arguments, wrap)},
                }
                for c in message.tool_calls
            ]
    if message.role == "tool":
        out["tool_call_id"] = message.tool_call_id
        if message.name:
            out["name"] = wrap(message.name)
    return out


def _content_items(message: Message, wrap: Wrap) -> list[HFContentItem]:
    """A message's content as text and image items, each image in place of its placeholder text."""
    items: list[HFContentItem] = []
    cursor = 0
    for image in sorted(message.images, key=lambda i: i.offset):
        if message.content[cursor : image.offset]:
            items.append({"type": "text", "text": wrap(message.content[cursor : image.offset])})
        items.append({"type": "image"})
        cursor = image.offset + image.length
    if message.content[cursor:]:
        items.append({"type": "text", "text": wrap(message.content[cursor:])})
    return items
