"""The gated feed-forward network of Llama, Qwen and Mistral: SwiGLU (Shazeer, 2020, "GLU Variants Improve
Transformer", arXiv:2002.05202).

    SwiGLU(x) = W_down (silu(W_gate x) ⊙ W_up x),    silu(z) = z · σ(z)

Two projections up to ``d_ff`` instead of one: one goes through SiLU (Swish) and *gates* the other, element by
element, before the projection back down. At equal parameter count it beats ReLU and GELU (Shazeer's table 1);
Llama keeps the count of a 4·D ReLU network by taking d_ff ≈ 2/3 · 4·D, rounded up to a multiple of 256.

Gated by GELU instead (tanh approximation), the same network is GeGLU, Gemma's (``activation="gelu_tanh"``).
"""

from __future__ import annotations

from collections.abc import Callable

import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int, expect_one_of
from attnlab.layers.feedforward import gelu_tanh

#: what may gate: SiLU (SwiGLU: Llama, Qwen, Mistral, Phi-3) or GELU's tanh form (GeGLU: Gemma)
GATES: dict[str, Callable[[Tensor], Tensor]] = {"silu": F.silu, "gelu_tanh": gelu_tanh}


class SwiGLU(nn.Module):
    """``down_proj(silu(gate_proj(x)) * up_proj(x))``: ``(..., D)`` -> ``(..., D)``, through width ``d_ff``.

    The names are Llama's (``gate_proj``, ``up_proj``, ``down_proj``), so a checkpoint's MLP weights load one to one.

    Args:
        d_model: input and output width D.
        d_ff: hidden width (Llama 2 7B: 11008 for D = 4096).
        bias: biases on the three linear maps (Llama has none; a Llama config's ``mlp_bias`` turns them on).
        activation: the gate, ``"silu"`` (SwiGLU) or ``"gelu_tanh"`` (GeGLU).
    """

    def __init__(self, d_model: int, d_ff: int, bias: bool = False, activation: str = "silu") -> None:
        super().__init__()
        for name, n in (("d_model", d_model), ("d_ff", d_ff)):
            check_positive_int("SwiGLU", name, n)
        expect_one_of("SwiGLU: activation", activation, tuple(GATES))
        self.activation = activation
        self.gate_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.up_proj = nn.Linear(d_model, d_ff, bias=bias)
        self.down_proj = nn.Linear(d_ff, d_model, bias=bias)

    def forward(self, x: Tensor) -> Tensor:
        if x.shape[-1] != self.gate_proj.in_features:
            raise ValueError(
                f"SwiGLU: x must have last dim {self.gate_proj.in_features} (d_model), got shape {tuple(x.shape)}"
            )
        return self.down_proj(GATES[self.activation](self.gate_proj(x)) * self.up_proj(x))
