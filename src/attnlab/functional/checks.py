"""Argument checks for the attention ops: clear errors at the door, not deep inside torch."""

from __future__ import annotations

import math

import numpy as np
import torch
from torch import Tensor

BACKENDS = ("auto", "math", "sdpa", "chunked")


def _shape(t: Tensor) -> tuple[int, ...]:
    return tuple(t.shape)


def check_qkv(query: Tensor, key: Tensor, value: Tensor) -> tuple[int, ...]:
    """Validate q/k/v and return their broadcast batch shape (everything but the last two dims)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{name} must be a torch.Tensor, got {type(t).__name__}")
        if not torch.is_floating_point(t):
            raise TypeError(f"{name} must be a floating-point tensor, got dtype {t.dtype}")
        if t.dim() < 2:
            raise ValueError(f"{name} must have shape (..., T, D), got shape {_shape(t)}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(
            f"query, key and value must share a dtype, got {query.dtype}, {key.dtype} and {value.dtype}"
        )
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same head dim (last dim), got query {_shape(query)} "
            f"and key {_shape(key)}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same sequence length (dim -2), got key {_shape(key)} "
            f"and value {_shape(value)}"
        )
    try:
        return tuple(np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2]))
    except ValueError:
        raise ValueError(
            f"query, key and value batch dims must broadcast, got {_shape(query)}, {_shape(key)}, {_shape(value)}"
        ) from None


def check_mask(attn_mask: Tensor | None, batch: tuple[int, ...], t_q: int, t_k: int) -> None:
    if attn_mask is None:
        return
    if not isinstance(attn_mask, Tensor):
        raise TypeError(f"attn_mask must be a torch.Tensor or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != torch.bool and not torch.is_floating_point(attn_mask):
        raise TypeError(
            f"attn_mask must be bool (True = may attend) or floating (added to the scores), "
            f"got dtype {attn_mask.dtype}"
        )
    target = (*batch, t_q, t_k)
    try:
        ok = tuple(np.broadcast_shapes(attn_mask.shape, target)) == target
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"attn_mask of shape {_shape(attn_mask)} does not broadcast to the scores' shape {target} "
            f"(batch..., Tq, Tk)"
        )


def check_options(dropout_p: float, scale: float | None, backend: str) -> None:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, int | float) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be a float in [0, 1), got {dropout_p!r}")
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale)
    ):
        raise ValueError(f"scale must be a finite float or None (meaning 1/sqrt(D)), got {scale!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
