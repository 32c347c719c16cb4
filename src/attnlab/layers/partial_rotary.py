"""Partial RoPE: only the first ``rotary_dim`` features of each head turn; the others carry no position at all.

    rope_partial(x, m) = (rope(x[:r], m), x[r:]),      r = rotary_dim = head_dim · partial_rotary_factor

with RoPE's own formula on the first ``r`` features (pairs ``(i, i + r/2)``, frequencies ``base^(−2i/r)``). Qwen3-Next
and Qwen3.5 turn a quarter of each 256-wide head (``partial_rotary_factor = 0.25``): the other 192 features match
keys by content alone, at any distance (GPT-NeoX and Phi-2 did the same with other fractions). This is the layout of
transformers' ``apply_rotary_pos_emb`` there: the rotated part first, the rest passed through.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnlab.layers.rotary import RopeScaling, RotaryEmbedding


class PartialRotaryEmbedding:
    """RoPE on the first ``rotary_dim`` features of heads ``head_dim`` wide (a :class:`RotaryEmbedding` of width
    ``rotary_dim`` inside), called as a :class:`RotaryEmbedding` is: ``apply(q, k, positions)``.

    Args:
        head_dim: the heads' width (what the attention module checks).
        rotary_dim: how many of the first features turn: even, at most ``head_dim``.
        context_length, base, scaling: as :class:`RotaryEmbedding`'s, for the turned features.

    Example:
        >>> rope = PartialRotaryEmbedding(8, 2, context_length=16)
        >>> q = k = torch.ones(1, 1, 3, 8)
        >>> q_rot, _ = rope.apply(q, k, torch.arange(3))
        >>> bool((q_rot[..., 2:] == 1).all())          # features 2..7 keep no position
        True
    """

    def __init__(self, head_dim: int, rotary_dim: int, context_length: int, base: float = 10000.0,
                 scaling: RopeScaling | dict[str, Any] | None = None) -> None:
        if isinstance(rotary_dim, bool) or not isinstance(rotary_dim, int) or not 0 < rotary_dim <= head_dim:
            raise ValueError(f"PartialRotaryEmbedding: rotary_dim must be an int in 1..head_dim={head_dim}, got "
                             f"{rotary_dim!r}")
        self.rope = RotaryEmbedding(rotary_dim, context_length, base, scaling)
        self.head_dim, self.rotary_dim = head_dim, rotary_dim

    @property
    def scaling(self) -> RopeScaling | None:
        return self.rope.scaling

    @property
    def rebuild_length(self) -> int | None:
        """As :attr:`RotaryEmbedding.rebuild_length`."""
        return self.rope.rebuild_length

    def apply(self, q: Tensor, k: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """Turn the first ``rotary_dim`` features of ``q (B, H, T, head_dim)`` and ``k (B, H_kv, T, head_dim)``."""
        for name, x in (("q", q), ("k", k)):
            if not isinstance(x, Tensor) or x.dim() != 4 or x.shape[-1] != self.head_dim:
                got = tuple(x.shape) if isinstance(x, Tensor) else type(x).__name__
                raise ValueError(f"PartialRotaryEmbedding: {name} must have shape (B, H, T, {self.head_dim}), got "
                                 f"{got}")
        r = self.rotary_dim
        q_turned, k_turned = self.rope.apply(q[..., :r], k[..., :r], positions)
        return torch.cat([q_turned, q[..., r:]], dim=-1), torch.cat([k_turned, k[..., r:]], dim=-1)

    __call__ = apply

    def __repr__(self) -> str:
        return f"PartialRotaryEmbedding(head_dim={self.head_dim}, rotary_dim={self.rotary_dim}, rope={self.rope!r})"
