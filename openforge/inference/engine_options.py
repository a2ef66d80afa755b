"""`EngineOptions`: how the embedded backend runs a model on the CPU, as a run's config sets them
(`engine_options`, or `--engine-option KEY=VALUE`). Light on purpose: configs read it without importing torch.

All off by default: each changes the arithmetic's order or precision. The float32 two were measured to help a
real model behind a long shared prompt (`benchmarks/engine_shared_prompt.py`, 1.85x) and its Claude Code episodes
(`benchmarks/engine_options_episodes.py`, 1.08x), and to cost the tiny model's engine nothing (`benchmarks/engine.py
--engines batched options`) nor gain its quickstart anything (63 GRPO steps against 65, docs/inference.md);
the real-model recipe turns them on.
"""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class EngineOptions(BaseModel):
    """- `cascade_attention`: the prefix that all rows of a batch share (a harness's system prompt, a GRPO
      group's prompt) is kept once and read once per step and per prompt read, beside each row's own tokens
      (`openforge/inference/cascade.py`; plain-attention models only, others ignore it). Exact up to rounding.
    - `onednn_linears`: linear layers through oneDNN with weights packed once (`cpu_linear.py`); float32, exact
      up to rounding. Layers below ~10^5 weights stay on torch's default path, which is faster for them.
    - `bf16_linears`: the same with bfloat16 weights and inputs: half the memory read per decode step; logits
      and the logprobs recorded for training differ from float32 by bfloat16's rounding (~1e-2)."""

    model_config = ConfigDict(extra="forbid")

    cascade_attention: bool = False
    onednn_linears: bool = False
    bf16_linears: bool = False

    def backend_options(self, backend: str) -> dict[str, bool]:
        """The embedded backend's keyword arguments; for another backend, none (and a set option is an error)."""
        chosen = self.model_dump(exclude_defaults=True)
        if backend.split(":", 1)[0] == "embedded":
            return chosen
        if chosen:
            raise ValueError(
                f"engine_options {sorted(chosen)} apply to the embedded backend only (backend is {backend!r}): "
                "drop them, or serve with backend: embedded"
            )
        return {}
