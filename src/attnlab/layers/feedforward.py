"""The position-wise feed-forward network ("Attention Is All You Need", §3.3).

    FFN(x) = act(x W₁ + b₁) W₂ + b₂

applied to every token on its own: ``(B, T, D)`` -> ``(B, T, D)`` through a hidden width ``d_ff``
(usually 4·D). The original Transformer used ReLU; BERT uses the exact (erf) GELU; GPT-2 the tanh
approximation of GELU.
"""

from __future__ import annotations

import math
from typing import Literal

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.functional.linear import Linear

Activation = Literal["relu", "gelu", "gelu_tanh"]
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")
SQRT_8_OVER_PI = (8 / math.pi) ** 0.5  # 2 · √(2/π): σ(2u) = (1 + tanh(u)) / 2


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation, ``0.5 · x · (1 + tanh(u))`` with ``u = √(2/π) · (x + 0.044715 · x³)``, as GPT-2
    defines it; a graph that ``torch.compile`` traces on the CPU gets it as ``x · σ(2u)``, the same function.

    Why two forms: eager, torch's one fused kernel for the first is the fastest (the second's five operations and
    their backward took 2.3x as long). A compiled graph is fused whatever form it is given, and there inductor's
    vectorized tanh costs about three times its exp on the AVX-512 EPYC attnlab is measured on (torch's own kernels:
    704 against 233 µs over 393,216 floats): the baby GPT's compiled training step ran 1.05-1.08x as fast with σ
    (two runs, 120 and 160 steps each, in turns: 38.3 against 41.3 ms a step, 36.3 against 38.2). The two differ by
    rounding only: values within 5e-7 of each other and of float64 over |x| ≤ 12, gradients within 3e-6 (tested).
    Only on the CPU, where it was measured to pay: a graph for a GPU keeps the form eager runs, as it did before.
    """
    if torch.compiler.is_compiling() and x.device.type == "cpu":
        return x * torch.sigmoid(SQRT_8_OVER_PI * (x + 0.044715 * x * x * x))
    return F.gelu(x, approximate="tanh")


def activate(x: Tensor, activation: str) -> Tensor:
    if activation == "relu":
        return F.relu(x)
    if activation == "gelu":
        return F.gelu(x)
    return gelu_tanh(x)


def dropped(dropout: nn.Dropout, x: Tensor) -> Tensor:
    """``dropout(x)``, without the module call where it would hand ``x`` back as it is (eval mode, or p = 0): a
    decoding step would otherwise make several calls per layer for nothing."""
    return dropout(x) if dropout.training and dropout.p > 0 else x


class FeedForward(nn.Module):
    """Two linear maps with a non-linearity between them, names as in ``torch.nn.TransformerEncoderLayer``.

    Args:
        d_model: input and output width D.
        d_ff: hidden width.
        activation: ``"relu"``, ``"gelu"`` (exact, erf) or ``"gelu_tanh"``.
        dropout: dropout on the output, training mode only.
        bias: biases on both linear maps.
    """

    def __init__(self, d_model: int, d_ff: int, activation: Activation = "gelu", dropout: float = 0.0,
                 bias: bool = True) -> None:
        super().__init__()
        if activation not in ACTIVATIONS:
            raise ValueError(f"FeedForward: activation must be one of {ACTIVATIONS}, got {activation!r}")
        if not 0.0 <= dropout < 1.0:
            raise ValueError(f"FeedForward: dropout must be in [0, 1), got {dropout!r}")
        self.activation = activation
        self.linear1 = Linear(d_model, d_ff, bias=bias)
        self.linear2 = Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        h = self.linear1(x)
        # else fused into linear1 (a packed map holds it); read from its __dict__, as a missing attribute would cost
        # nn.Module.__getattr__ an exception at every call
        if vars(self.linear1).get("activation") != self.activation:
            h = activate(h, self.activation)
        return dropped(self.dropout, self.linear2(h))
