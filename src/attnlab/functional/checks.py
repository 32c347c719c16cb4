"""Argument checks for the attention op: clear errors at the door, not deep inside torch.

They read shapes, dtypes and plain values only, never tensor contents, so they never wait for a device.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.arguments import check_mask_shape, qkv_batch


def check_qkv(query: Tensor, key: Tensor, value: Tensor, enable_gqa: bool = False) -> tuple[int, ...]:
    """Validate q/k/v and return their broadcast batch shape (everything but the last two dims)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not torch.is_floating_point(t):
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype} and {value.dtype}"
        )
    return qkv_batch(query.shape, key.shape, value.shape, enable_gqa)


def check_mask(attn_mask: Tensor | None, batch: tuple[int, ...], t_q: int, t_k: int) -> None:
    if attn_mask is None:
        return
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not torch.is_floating_point(attn_mask):
        raise TypeError(
            "attn_mask must be bool (True = may attend) or floating (added to the scores), got dtype "
            f"{attn_mask.dtype}"
        )
    check_mask_shape(attn_mask.shape, batch, t_q, t_k)
