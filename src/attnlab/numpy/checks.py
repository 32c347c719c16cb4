"""Argument checks for the NumPy twin: clear errors at the door, named after the argument."""

from __future__ import annotations

from typing import Literal, get_args

import numpy as np

from attnlab.arguments import check_mask_shape, check_scale, qkv_batch

Backend = Literal["auto", "math", "chunked"]
BACKENDS: tuple[str, ...] = get_args(Backend)  # the twin's backends, in one place


def check_float_array(x: object, name: str, owner: str) -> None:
    if not isinstance(x, np.ndarray):
        raise TypeError(f"{owner}: {name} must be a numpy.ndarray, got {type(x).__name__}")
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"{owner}: {name} must be a floating-point array, got dtype {x.dtype}")


def check_qkv(query: np.ndarray, key: np.ndarray, value: np.ndarray, enable_gqa: bool = False) -> tuple[int, ...]:
    """Validate q/k/v and return their broadcast batch shape (everything but the last two dims)."""
    for name, t in (("query", query), ("key", key), ("value", value)):
        check_float_array(t, name, "scaled_dot_product_attention")
    if not (query.dtype == key.dtype == value.dtype):
        raise TypeError(f"query, key and value must share a dtype, got {query.dtype}, {key.dtype} and {value.dtype}")
    return qkv_batch(query.shape, key.shape, value.shape, enable_gqa)


def check_mask(attn_mask: np.ndarray | None, batch: tuple[int, ...], t_q: int, t_k: int) -> None:
    if attn_mask is None:
        return
    if not isinstance(attn_mask, np.ndarray):
        raise TypeError(f"attn_mask must be a numpy.ndarray or None, got {type(attn_mask).__name__}")
    if attn_mask.dtype != np.bool_ and not np.issubdtype(attn_mask.dtype, np.floating):
        raise TypeError(
            "attn_mask must be bool (True = may attend) or floating (added to the scores), got dtype "
            f"{attn_mask.dtype}"
        )
    check_mask_shape(attn_mask.shape, batch, t_q, t_k)


def check_options(dropout_p: float, scale: float | None) -> None:
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, int | float) or dropout_p != 0.0:
        raise ValueError(f"dropout_p must be 0.0: the NumPy twin is an inference forward pass, got {dropout_p!r}")
    check_scale(scale)
