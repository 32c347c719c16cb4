"""A key/value cache for decoding: each new token attends to the keys and values of the earlier
ones, which do not change, so they are kept instead of recomputed.

The buffers are allocated once at full size, ``(B, H, max_len, head_dim)`` per layer, and filled
in place: no ``torch.cat`` (and no copy of the whole cache) per step.
"""

from __future__ import annotations

import torch
from torch import Tensor


class LayerKVCache:
    """One layer's keys and values; ``update`` is what ``MultiHeadAttention`` calls."""

    def __init__(self, batch: int, n_heads: int, max_len: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str | None) -> None:
        self.keys = torch.empty(batch, n_heads, max_len, head_dim, dtype=dtype, device=device)
        self.values = torch.empty_like(self.keys)
        self.length = 0

    @property
    def max_len(self) -> int:
        return self.keys.shape[2]

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key, value (B, H, T, head_dim)``; return all so far ``(B, H, length, head_dim)``."""
        t = key.shape[2]
        if key.shape != value.shape or key.shape[:2] != self.keys.shape[:2] or key.shape[3] != self.keys.shape[3]:
            raise ValueError(
                f"LayerKVCache: key/value must have shape (B, H, T, head_dim) = "
                f"({self.keys.shape[0]}, {self.keys.shape[1]}, T, {self.keys.shape[3]}), "
                f"got {tuple(key.shape)} and {tuple(value.shape)}"
            )
        if self.length + t > self.max_len:
            raise ValueError(f"LayerKVCache: {self.length} + {t} positions exceed max_len={self.max_len}")
        self.keys[:, :, self.length : self.length + t] = key
        self.values[:, :, self.length : self.length + t] = value
        self.length += t
        return self.keys[:, :, : self.length], self.values[:, :, : self.length]


class KVCache:
    """One :class:`LayerKVCache` per layer; ``cache[i]`` goes to block ``i``.

    ``length`` is the number of positions already cached, i.e. the position of the next token.
    """

    def __init__(self, n_layers: int, batch: int, n_heads: int, max_len: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        self.layers = [LayerKVCache(batch, n_heads, max_len, head_dim, dtype, device) for _ in range(n_layers)]

    def __getitem__(self, i: int) -> LayerKVCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def length(self) -> int:
        return self.layers[0].length

    @property
    def max_len(self) -> int:
        return self.layers[0].max_len

    def reset(self) -> None:
        """Forget everything (the buffers are reused)."""
        for layer in self.layers:
            layer.length = 0
