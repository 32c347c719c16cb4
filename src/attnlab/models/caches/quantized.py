"""The int8 cache: the dynamic cache with its keys and values kept in 8 bits, for long contexts.

At a long context the cache, not the weights, is what a decoding step reads most: ``2 · num_layers · B · H · L ·
head_dim`` numbers. Kept in int8, each position of each head stores ``head_dim`` codes and one fp16 scale
(symmetric: ``x ≈ code · scale``, ``scale = max |x| / 127`` over the head's vector), about half the bytes of bf16
and a quarter of fp32's (:meth:`Int8KVCache.filled_nbytes`). The attention sees the keys and values dequantized to the
model's dtype, so its arithmetic is unchanged; the error this adds to the logits is measured in the tests and in
docs/decoding.md.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.i18n import tr
from attnlab.models.caches.dynamic import KVCache, LayerKVCache

SCALE_DTYPE = torch.float16  # a scale per head and position: two bytes beside head_dim one-byte codes


def quantize_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x (..., head_dim)`` -> int8 codes ``(..., head_dim)`` and scales ``(..., 1)``: ``x ≈ codes · scales``."""
    scales = (x.float().abs().amax(dim=-1, keepdim=True) / 127).clamp(min=1e-6).to(SCALE_DTYPE)  # as stored
    codes = torch.round(x.float() / scales.float()).clamp(-127, 127).to(torch.int8)  # against the stored scale
    return codes, scales


class Int8LayerKVCache(LayerKVCache):
    """One layer's keys and values as int8 codes ``(B, H, capacity, head_dim)`` and fp16 scales ``(B, H, capacity,
    1)``; ``update`` returns the filled part dequantized to the dtype of the keys it is given."""

    def __init__(self, batch: int, num_heads: int, context_length: int, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str | None) -> None:
        super().__init__(batch, num_heads, context_length, head_dim, torch.int8, device)
        self.key_scales = torch.empty(*self.keys.shape[:3], 1, dtype=SCALE_DTYPE, device=device)
        self.value_scales = torch.empty_like(self.key_scales)

    def reserve(self, length: int) -> None:
        capacity = self.keys.shape[2]
        super().reserve(length)  # grows the codes
        if self.keys.shape[2] != capacity:
            grown = self.keys.shape[2]
            for name in ("key_scales", "value_scales"):
                old = getattr(self, name)
                new = old.new_empty(*old.shape[:2], grown, 1)
                new[:, :, : self.length] = old[:, :, : self.length]
                setattr(self, name, new)

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key, value (B, H, T, head_dim)`` in int8; return all so far ``(B, H, length, head_dim)`` in
        ``key``'s dtype."""
        t, start = key.shape[2], self.length
        k_codes, k_scales = quantize_rows(key)
        v_codes, v_scales = quantize_rows(value)
        super().update(k_codes, v_codes)  # checks the shapes and the room, writes the codes, moves length
        self.key_scales[:, :, start : start + t] = k_scales
        self.value_scales[:, :, start : start + t] = v_scales
        n = self.length
        return (self.keys[:, :, :n].to(key.dtype) * self.key_scales[:, :, :n].to(key.dtype),
                self.values[:, :, :n].to(key.dtype) * self.value_scales[:, :, :n].to(key.dtype))

    def filled_nbytes(self) -> int:
        """Bytes the filled positions take: codes and scales."""
        b, h, _, head_dim = self.keys.shape
        per_position = b * h * (head_dim + SCALE_DTYPE.itemsize)  # codes of one byte, one scale, per head
        return 2 * self.length * per_position  # keys and values


class Int8KVCache(KVCache):
    """A :class:`~attnlab.models.KVCache` whose layers keep int8 keys and values (:class:`Int8LayerKVCache`)."""

    def __init__(self, num_layers: int, batch: int, num_heads: int, context_length: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        self.layers = [Int8LayerKVCache(batch, num_heads, context_length, head_dim, dtype, device)
                       for _ in range(num_layers)]
        self.memory_mask = None

    def filled_nbytes(self) -> int:
        """Bytes the filled positions of every layer take (codes and scales)."""
        return sum(layer.filled_nbytes() for layer in self.layers)

    @property
    def nbytes(self) -> int:
        """The bytes its buffers take, filled or not: codes and scales."""
        return sum(layer.keys.nbytes + layer.values.nbytes + layer.key_scales.nbytes + layer.value_scales.nbytes
                   for layer in self.layers)

    def reorder(self, index: Tensor, memory: bool = True) -> None:
        raise ValueError(tr("Int8KVCache: decodes a decoder-only model's rows as they are; beam search and "
                            "reordered rows need the floating-point cache"))
