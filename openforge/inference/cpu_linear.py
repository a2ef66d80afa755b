"""The engine's linear layers through oneDNN, with each weight packed once for it (CPU; float32 or bfloat16).

Why: torch's CPU matrix products go to MKL, whose kernels for a few rows (a decode step: one row per job) are
slow on AMD CPUs; oneDNN picks its kernels from the CPU's instruction sets and reads a weight laid out for them
ahead of time (`benchmarks/engine_shared_prompt.py`). Same float32 arithmetic, summed in another order: logits
differ from torch's by rounding (~1e-5 relative), as they already do between batch shapes.

In bfloat16 (`compute=torch.bfloat16`) the packed weight is half the bytes and each layer's input is rounded to
bfloat16 (its output comes back as float32): a decode step reads half the memory, and on CPUs with bfloat16
instructions (AVX512-BF16, AMX) computes twice as fast; logits then differ from float32 by bfloat16's rounding
(~1e-2), so the logprobs the engine records differ from the trainer's by as much.

The packed copy follows its weight: a weight changed in place (a weight swap's `load_state_dict`) is packed again
at its next use, found by the tensor's version counter. With gradients enabled the layer runs as before (the
oneDNN operator has no backward), so a caller training the same module is unaffected.
"""

from __future__ import annotations

import torch

BATCH_HINT = 8  # rows the packed layout is tuned for; any row count works
# Below this many weights a layer stays on torch's path: oneDNN's fixed cost per call (~10 us on this AMD EPYC)
# outweighs its gain (192 x 512: slower at 1 row, even at 16; 576 x 192 and larger: faster at 8 rows and up).
MIN_WEIGHTS = 100_000


def onednn_available() -> bool:
    return torch.backends.mkldnn.is_available() and hasattr(torch.ops.mkldnn, "_linear_pointwise")


class PackedLinear:
    """Stands in for one `nn.Linear`'s forward (an instance attribute: the module and its state dict stay)."""

    def __init__(self, layer: torch.nn.Linear, compute: torch.dtype = torch.float32):
        self.layer = layer
        self.plain = layer.forward
        self.compute = compute
        self.packed: torch.Tensor | None = None
        self.bias: torch.Tensor | None = None
        self.version = -1

    def __call__(self, x: torch.Tensor) -> torch.Tensor:
        weight = self.layer.weight
        if torch.is_grad_enabled() or x.dtype != torch.float32 or weight.dtype != torch.float32 or x.is_cuda:
            return self.plain(x)
        bias = self.layer.bias
        if self.packed is None or self.version != weight._version + (bias._version if bias is not None else 0):
            self.packed = torch.ops.mkldnn._reorder_linear_weight(weight.detach().to(self.compute), BATCH_HINT)
            self.bias = bias.detach().to(self.compute) if bias is not None else None
            self.version = weight._version + (bias._version if bias is not None else 0)
        out = torch.ops.mkldnn._linear_pointwise(x.to(self.compute), self.packed, self.bias, "none", [], "")
        return out.to(torch.float32)


def use_onednn_linears(model: torch.nn.Module, compute: torch.dtype = torch.float32) -> int:
    """Route every float32 `nn.Linear` of `model` on the CPU with at least `MIN_WEIGHTS` weights through
    `PackedLinear` computing in `compute`; returns how many."""
    if not onednn_available():
        return 0
    count = 0
    for module in model.modules():
        if (
            type(module) is torch.nn.Linear
            and module.weight.device.type == "cpu"
            and module.weight.numel() >= MIN_WEIGHTS
        ):
            if not isinstance(module.__dict__.get("forward"), PackedLinear):
                # An instance attribute shadows the class's forward for this layer only.
                module.forward = PackedLinear(module, compute)  # type: ignore[method-assign,assignment]
            count += 1
    return count
