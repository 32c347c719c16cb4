"""The position-wise feed-forward network ("Attention Is All You Need", §3.3).

    FFN(x) = act(x W₁ + b₁) W₂ + b₂

applied to every token on its own: ``(B, T, D)`` -> ``(B, T, D)`` through a hidden width ``d_ff``
(usually 4·D). The original Transformer used ReLU; BERT uses the exact (erf) GELU; GPT-2 the tanh
approximation of GELU.
"""

from __future__ import annotations

from typing import Literal

import torch.nn.functional as F
from torch import Tensor, nn

Activation = Literal["relu", "gelu", "gelu_tanh"]
ACTIVATIONS = ("relu", "gelu", "gelu_tanh")


def gelu_tanh(x: Tensor) -> Tensor:
    """GELU's tanh approximation, ``0.5 · x · (1 + tanh(√(2/π) · (x + 0.044715 · x³)))``, as GPT-2 defines it."""
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
        self.linear1 = nn.Linear(d_model, d_ff, bias=bias)
        self.linear2 = nn.Linear(d_ff, d_model, bias=bias)
        self.dropout = nn.Dropout(dropout)

    def forward(self, x: Tensor) -> Tensor:
        return dropped(self.dropout, self.linear2(activate(self.linear1(x), self.activation)))
