"""int8 storage for a cache's keys and values: an option of the dynamic cache (``KVCache(..., storage="int8")``),
for long contexts.

At a long context the cache, not the weights, is what a decoding step reads most: ``2 · num_layers · B · H · L ·
head_dim`` numbers. Kept in int8, each position of each head stores ``head_dim`` codes and one fp16 scale
(symmetric: ``x ≈ code · scale``, ``scale = max |x| / 127`` over the head's vector), about half the bytes of bf16
and a quarter of fp32's (:meth:`~attnlab.models.KVCache.filled_nbytes`). The attention sees the keys and values
dequantized to the model's dtype, so its arithmetic is unchanged; the error this adds to the logits is measured in
the tests and in docs/decoding.md.
"""

from __future__ import annotations

import torch
from torch import Tensor

SCALE_DTYPE = torch.float16  # a scale per head and position: two bytes beside head_dim one-byte codes
#: how a cache may keep its keys and values: as they come, or in int8 with a scale per head and position
STORAGES = ("float", "int8")


def quantize_rows(x: Tensor) -> tuple[Tensor, Tensor]:
    """``x (..., head_dim)`` -> int8 codes ``(..., head_dim)`` and scales ``(..., 1)``: ``x ≈ codes · scales``."""
    scales = (x.float().abs().amax(dim=-1, keepdim=True) / 127).clamp(min=1e-6).to(SCALE_DTYPE)  # as stored
    codes = torch.round(x.float() / scales.float()).clamp(-127, 127).to(torch.int8)  # against the stored scale
    return codes, scales


class Int8Storage:
    """The scales beside a layer's int8 codes: ``key_scales`` and ``value_scales`` ``(B, H, capacity, 1)``."""

    def __init__(self, codes: Tensor) -> None:
        self.key_scales = torch.empty(*codes.shape[:3], 1, dtype=SCALE_DTYPE, device=codes.device)
        self.value_scales = torch.empty_like(self.key_scales)

    def grow(self, capacity: int, filled: int) -> None:
        """Room for ``capacity`` positions, the first ``filled`` kept."""
        for name in ("key_scales", "value_scales"):
            old = getattr(self, name)
            new = old.new_empty(*old.shape[:2], capacity, 1)
            new[:, :, :filled] = old[:, :, :filled]
            setattr(self, name, new)

    def write(self, start: int, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """The codes of ``key, value (B, H, T, head_dim)``, their scales written at positions ``start ..``."""
        (k_codes, k_scales), (v_codes, v_scales) = quantize_rows(key), quantize_rows(value)
        t = key.shape[2]
        self.key_scales[:, :, start : start + t] = k_scales
        self.value_scales[:, :, start : start + t] = v_scales
        return k_codes, v_codes

    def read(self, keys: Tensor, values: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """The filled codes ``(B, H, n, head_dim)`` dequantized to ``dtype``."""
        n = keys.shape[2]
        return (keys.to(dtype) * self.key_scales[:, :, :n].to(dtype),
                values.to(dtype) * self.value_scales[:, :, :n].to(dtype))

    @property
    def nbytes(self) -> int:
        return self.key_scales.nbytes + self.value_scales.nbytes
