"""A key/value cache for decoding: each new token attends to the keys and values of the earlier
ones, which do not change, so they are kept instead of recomputed.

The buffers are allocated once at full size, ``(B, H, context_length, head_dim)`` per layer, and filled
in place: no ``torch.cat`` (and no copy of the whole cache) per step. They hold the dtype the model computes
in (under autocast, autocast's): an empty cache takes the dtype of the first keys it is given.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.attention.multihead import cached_causal_mask
from attnlab.i18n import tr


class LayerKVCache:
    """One layer's keys and values; ``update`` is what ``MultiHeadAttention`` calls."""

    def __init__(self, batch: int, num_heads: int, context_length: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str | None) -> None:
        self.keys = torch.empty(batch, num_heads, context_length, head_dim, dtype=dtype, device=device)
        self.values = torch.empty_like(self.keys)
        self.length = 0

    @property
    def context_length(self) -> int:
        return self.keys.shape[2]

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key, value (B, H, T, head_dim)``; return all so far ``(B, H, length, head_dim)``."""
        t = key.shape[2]
        if key.shape != value.shape or key.shape[:2] != self.keys.shape[:2] or key.shape[3] != self.keys.shape[3]:
            raise ValueError(
                tr("LayerKVCache: key/value must have shape (B, H, T, head_dim) = ({shape}, {shape_2}, T, {shape_3}), "
                   "got {shape_4} and {shape_5}", shape=self.keys.shape[0], shape_2=self.keys.shape[1],
                   shape_3=self.keys.shape[3], shape_4=tuple(key.shape), shape_5=tuple(value.shape))
            )
        if self.length + t > self.context_length:
            raise ValueError(tr("LayerKVCache: {length} + {t} positions exceed context_length={context_length}",
                                length=self.length, t=t, context_length=self.context_length))
        if key.dtype != self.keys.dtype:
            if self.length:
                raise ValueError(tr("LayerKVCache: holds {dtype} keys, got {dtype_2}; a cache keeps the dtype it was "
                                    "filled in: start a new one (model.new_kv_cache) to switch", dtype=self.keys.dtype,
                                    dtype_2=key.dtype))
            self.keys = torch.empty_like(self.keys, dtype=key.dtype)  # empty: take the compute dtype
            self.values = torch.empty_like(self.keys)
        self.keys[:, :, self.length : self.length + t] = key
        self.values[:, :, self.length : self.length + t] = value
        self.length += t
        return self.keys[:, :, : self.length], self.values[:, :, : self.length]

    def attn_mask(self, t_new: int, is_causal: bool) -> Tensor | None:
        """The ``t_new`` newest queries see the cached keys up to their own position (every key if not causal)."""
        return cached_causal_mask(t_new, self.length, self.keys.device) if is_causal else None


class KVCache:
    """One :class:`LayerKVCache` per layer; ``cache[i]`` goes to block ``i``.

    ``length`` is the number of positions already cached, i.e. the position of the next token.
    """

    def __init__(self, num_layers: int, batch: int, num_heads: int, context_length: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        self.layers = [LayerKVCache(batch, num_heads, context_length, head_dim, dtype, device)
                       for _ in range(num_layers)]

    def __getitem__(self, i: int) -> LayerKVCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def length(self) -> int:
        return self.layers[0].length

    @property
    def context_length(self) -> int:
        return self.layers[0].context_length

    def reset(self) -> None:
        """Forget everything (the buffers are reused)."""
        for layer in self.layers:
            layer.length = 0
