"""Proportional RoPE: Gemma 4's global layers turn only a fraction of each head's pairs (transformers' rope type
``"proportional"``, with its ``partial_rotary_factor``).

Plain RoPE turns every pair ``(i, i + D/2)`` of a head by ``m · θ_i`` with ``θ_i = base^(−2i/D)``, the first pairs
fastest. Proportional RoPE keeps the first ``n = int(fraction · D // 2)`` frequencies exactly as the whole head
would have them (the exponent still divides by the whole ``D``: the rotated pairs are the head's fast ones) and
gives the other ``D/2 − n`` pairs the frequency 0, so they do not turn at all:

    θ_i = base^(−2i/D)   for i < n              (turned by m · θ_i, as in plain RoPE)
    θ_i = 0              for n ≤ i < D/2        (cos 0 = 1, sin 0 = 0: left as they are)

Gemma 4's global layers (heads of 512, ``fraction = 0.25``) turn 64 of their 256 pairs, with base 10⁶: those carry
relative position, the 192 others compare content at any distance. The layout stays rotate-half's (the pairs
``(i, i + D/2)``), unlike Qwen3-Next's partial RoPE, which turns the first features of the head as a smaller head
of their own. A linear scaling (transformers' ``factor``) divides the turning frequencies and leaves the zeros.

Example:
    >>> rope = ProportionalRotaryEmbedding(head_dim=8, context_length=16, base=10000.0, fraction=0.5)
    >>> rope.inv_freq()                   # 2 of the 4 pairs turn, at plain RoPE's first two frequencies
    tensor([1.0000, 0.1000, 0.0000, 0.0000])
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor

from attnlab.layers.rotary import RopeScaling, RotaryEmbedding


class ProportionalRotaryEmbedding(RotaryEmbedding):
    """RoPE over the first ``fraction`` of each head's pairs, the rest unturned (see the module docstring).

    Args:
        head_dim, context_length, base: as :class:`~attnlab.layers.RotaryEmbedding`'s.
        fraction: the share of the ``head_dim / 2`` pairs that turn, in (0, 1] (Gemma 4: 0.25); 1 is plain RoPE.
        scaling: None or a ``linear`` :class:`~attnlab.layers.RopeScaling` (the others change cos and sin by an
            attention factor or by length, which proportional RoPE does not).
    """

    def __init__(self, head_dim: int, context_length: int, base: float = 10000.0, fraction: float = 1.0,
                 scaling: RopeScaling | dict[str, Any] | None = None) -> None:
        super().__init__(head_dim, context_length, base, scaling)
        if isinstance(fraction, bool) or not isinstance(fraction, int | float) or not math.isfinite(fraction) \
                or not 0 < fraction <= 1:
            raise ValueError(f"ProportionalRotaryEmbedding: fraction must be a number in (0, 1] (the share of the "
                             f"pairs that turn), got {fraction!r}")
        if self.scaling is not None and self.scaling.type != "linear":
            raise ValueError(f"ProportionalRotaryEmbedding: scaling must be None or linear, got "
                             f"{self.scaling.type!r}")
        self.fraction = float(fraction)
        #: how many pairs turn: int(fraction · head_dim // 2), as transformers counts them
        self.rotated_pairs = int(self.fraction * head_dim // 2)

    def inv_freq(self, seq_len: int | None = None, device: torch.device | str | None = None) -> Tensor:
        """The ``head_dim / 2`` frequencies: plain RoPE's (scaled) for the first ``rotated_pairs``, then zeros."""
        inv_freq = super().inv_freq(seq_len, device)
        return torch.cat((inv_freq[: self.rotated_pairs], inv_freq.new_zeros(len(inv_freq) - self.rotated_pairs)))

    def __repr__(self) -> str:
        return f"{super().__repr__()[:-1]}, fraction={self.fraction})".replace("RotaryEmbedding(",
                                                                              "ProportionalRotaryEmbedding(", 1)
