"""Positional information: attention itself is blind to order, so each position gets a vector.

* :class:`SinusoidalPositionalEncoding` ("Attention Is All You Need", §3.5): fixed, nothing learned,
  PE(pos, 2i) = sin(pos / 10000^(2i/d)),  PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).
* :class:`LearnedPositionalEmbedding` (BERT, GPT-2): one trained vector per position.

Both take ``(d_model, context_length)`` and add their vectors to the token embeddings:
``x (B, T, D)`` -> ``x + P[offset : offset + T]``.
``offset`` is the position of the first token, which a decoder with a KV cache needs.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn

from attnlab.arguments import check_positive_int


def _check_positions(x: Tensor, d_model: int, context_length: int, offset: int, owner: str) -> None:
    if not isinstance(x, Tensor) or x.dim() != 3 or x.shape[-1] != d_model:
        got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
        raise ValueError(f"{owner}: x must have shape (B, T, {d_model}), got {got}")
    if isinstance(offset, bool) or not isinstance(offset, int) or offset < 0:
        raise ValueError(f"{owner}: offset must be an int >= 0, got {offset!r}")
    if offset + x.shape[1] > context_length:
        raise ValueError(
            f"{owner}: positions {offset}..{offset + x.shape[1] - 1} exceed context_length={context_length}"
        )


def _check_sizes(d_model: int, context_length: int, owner: str) -> None:
    for name, n in (("d_model", d_model), ("context_length", context_length)):
        check_positive_int(owner, name, n)


def sinusoidal_table(context_length: int, d_model: int) -> Tensor:
    """The ``(context_length, d_model)`` table of the paper's formula, computed in float64 then cast to float32.

    ``d_model`` must be even: sin and cos come in pairs, one pair per frequency.
    """
    _check_sizes(d_model, context_length, "sinusoidal_table")
    if d_model % 2:
        raise ValueError(f"sinusoidal_table: d_model must be even (sin/cos pairs), got {d_model}")
    pos = torch.arange(context_length, dtype=torch.float64)[:, None]  # (context_length, 1)
    inv_freq = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float64) * (-math.log(10000.0) / d_model))
    pe = torch.empty(context_length, d_model, dtype=torch.float64)
    pe[:, 0::2] = torch.sin(pos * inv_freq)
    pe[:, 1::2] = torch.cos(pos * inv_freq)
    return pe.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoidal positions added to ``x (B, T, D)``; a buffer, not a parameter.

    Example:
        >>> pe = SinusoidalPositionalEncoding(d_model=8, context_length=16)
        >>> pe(torch.zeros(1, 3, 8))[0, 0]          # position 0: sin 0 = 0, cos 0 = 1
        tensor([0., 1., 0., 1., 0., 1., 0., 1.])
    """

    pe: Tensor  # (context_length, d_model), the buffer registered below

    def __init__(self, d_model: int, context_length: int = 5000) -> None:
        super().__init__()
        self.d_model, self.context_length = d_model, context_length
        self.register_buffer("pe", sinusoidal_table(context_length, d_model), persistent=False)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_positions(x, self.d_model, self.context_length, offset, type(self).__name__)
        pe = self.pe[offset : offset + x.shape[1]]
        return x + (pe if pe.dtype == x.dtype else pe.to(x.dtype))  # .to() parses its arguments even when a no-op


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position (``weight (context_length, D)``), added to ``x (B, T, D)``.

    It cannot extrapolate: a model with ``context_length`` positions never saw position ``context_length``.
    """

    def __init__(self, d_model: int, context_length: int) -> None:
        super().__init__()
        _check_sizes(d_model, context_length, type(self).__name__)
        self.d_model, self.context_length = d_model, context_length
        self.weight = nn.Parameter(torch.empty(context_length, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x: Tensor, offset: int = 0) -> Tensor:
        _check_positions(x, self.d_model, self.context_length, offset, type(self).__name__)
        return x + self.weight[offset : offset + x.shape[1]]
