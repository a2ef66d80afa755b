"""Does a model's chat template show the model its tools and its own tool calls? Many instruct templates
(SmolLM2's among them) ignore `tools=` and render an assistant turn that only calls tools as empty: a policy
trained through such a template never sees a tool, and the proxy's records would not show its calls. Checked by
rendering a probe conversation and looking for the probe's names in the text."""

from __future__ import annotations

from openforge.models.model_dir import ModelDir

__all__ = ["template_warnings"]

_TOOL = "openforge_probe_tool"
_VALUE = "openforge-probe-value"


def template_warnings(model: ModelDir) -> list[str]:
    """One line per way the template loses tools: empty when it renders both the tool list and the calls."""
    tools = [
        {
            "type": "function",
            "function": {
                "name": _TOOL,
                "description": "probe",
                "parameters": {"type": "object", "properties": {"arg": {"type": "string"}}},
            },
        }
    ]
    user = {"role": "user", "content": "hello"}
    call = {"type": "function", "function": {"name": _TOOL, "arguments": {"arg": _VALUE}}, "id": "call_0"}
    assistant = {"role": "assistant", "content": "", "tool_calls": [call]}
    warnings = []
    try:
        listed = model.render_messages_text([user], tools, add_generation_prompt=True)  # type: ignore[list-item,arg-type]
        called = model.render_messages_text([user, assistant], None, add_generation_prompt=False)  # type: ignore[list-item]
    except Exception as e:  # a template that raises on tools is as useless for tool use as one that drops them
        return [f"the chat template fails on a conversation with tools ({type(e).__name__}: {e})"]
    if _TOOL not in listed:
        warnings.append("the chat template ignores `tools`: the model is never shown its tools")
    if _VALUE not in called:
        warnings.append("the chat template drops tool calls: an assistant turn that calls a tool renders without it")
    if warnings:
        warnings.append(
            "give the model a template that renders both (chat_template.jinja in its directory; "
            "`openforge model get` writes one for the models it knows)"
        )
    return warnings
