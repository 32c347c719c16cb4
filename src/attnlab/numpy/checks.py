"""Argument checks for the NumPy twin: clear errors at the door, named after the argument."""

from __future__ import annotations

import math

import numpy as np

BACKENDS = ("auto", "math", "chunked")


def check_float_array(x: object, name: str, owner: str) -> None:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{owner}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{owner}: {name} must be a floating-point array, got dtype {x.dtype}")


def check_qkv(query: np.ndarray, key: np.ndarray, value: np.ndarray) -> tuple[int, ...]:
    """Validate q/k/v and return their broadcast batch shape (everything but the last two dims)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_float_array(t, name, "scaled_dot_product_attention")
        if t.ndim < 2:
            raise ValueError(f"{name} must have shape (..., T, D), got shape {t.shape}")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype} and {value.dtype}")
    if query.shape[-1] != key.shape[-1]:
        raise ValueError(
            f"query and key must have the same head dim (last dim), got query {query.shape} and key {key.shape}"
        )
    if key.shape[-2] != value.shape[-2]:
        raise ValueError(
            f"key and value must have the same sequence length (dim -2), got key {key.shape} and value {value.shape}"
        )
    try:
        return tuple(np.broadcast_shapes(query.shape[:-2], key.shape[:-2], value.shape[:-2]))
    except ValueError:
        raise ValueError(
            f"query, key and value batch dims must broadcast, got {query.shape}, {key.shape}, {value.shape}"
        ) from None


def check_mask(attn_mask: np.ndarray | None, batch: tuple[int, ...], t_q: int, t_k: int) -> None:
    if attn_mask is None:
        return
    if not isinstance(attn_mask, np.ndarray):
        raise TypeError(f"attn_mask must be a numpy.ndarray or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != np.bool_ and not np.issubdtype(attn_mask.dtype, np.floating):
        raise TypeError(
            f"attn_mask must be bool (True = may attend) or floating (added to the scores), got dtype {attn_mask.dtype}"
        )
    target = (*batch, t_q, t_k)
    try:
        ok = tuple(np.broadcast_shapes(attn_mask.shape, target)) == target
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(
            f"attn_mask of shape {attn_mask.shape} does not broadcast to the scores' shape {target} (batch..., Tq, Tk)"
        )


def check_options(dropout_p: float, scale: float | None, backend: str) -> None:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, int | float) or dropout_p != 0.0:
        raise ValueError(f"dropout_p must be 0.0: the NumPy twin is an inference forward pass, got {dropout_p!r}")
    if scale is not None and (
        isinstance(scale, bool) or not isinstance(scale, int | float) or not math.isfinite(scale)
    ):
        raise ValueError(f"scale must be a finite float or None (meaning 1/sqrt(D)), got {scale!r}")
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {', '.join(map(repr, BACKENDS))}, got {backend!r}")
