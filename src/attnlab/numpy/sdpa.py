"""``scaled_dot_product_attention`` in NumPy: the signature and mask conventions of
:func:`attnlab.functional.scaled_dot_product_attention`, two ways to compute it."""

from __future__ import annotations

import numpy as np

from attnlab.arguments import check_choice
from attnlab.numpy.checks import BACKENDS, Backend, check_mask, check_options, check_qkv
from attnlab.numpy.chunked import chunked_attention
from attnlab.numpy.math_attention import math_attention

# Above this many scores per batch the in-place math path would need more memory than it is
# worth (a (B·H, 4096, 4096) fp32 score matrix is 64 MiB per head); "auto" switches to chunked.
_CHUNKED_FROM = 4096 * 4096


def choose_backend(query: np.ndarray, key: np.ndarray, return_weights: bool, backend: str = "auto") -> str:
    """The backend to run: ``backend`` itself, or for ``"auto"`` ``"math"`` if weights are asked for or the score
    matrix is small, else ``"chunked"`` (O(T) memory). Only ``"math"`` materialises the weights."""
    if backend == "auto":
        return "math" if return_weights or query.shape[-2] * key.shape[-2] < _CHUNKED_FROM else "chunked"
    if return_weights and backend != "math":
        raise ValueError(f"backend={backend!r} cannot return weights; use backend='math' or 'auto'")
    return backend


def scaled_dot_product_attention(
    query: np.ndarray,
    key: np.ndarray,
    value: np.ndarray,
    attn_mask: np.ndarray | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
    *,
    backend: Backend = "auto",
    return_weights: bool = False,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """softmax(Q Kᵀ · scale + mask) V, in NumPy, with PyTorch's arguments and mask conventions.

    Args:
        query: ``(..., Tq, D)``.
        key: ``(..., Tk, D)``.
        value: ``(..., Tk, Dv)``. Batch dims of q, k, v broadcast.
        attn_mask: bool (True = may attend) or float (added to the scores), broadcastable to
            ``(..., Tq, Tk)``; a padding mask is typically ``(B, 1, 1, Tk)``.
        dropout_p: must be 0.0; kept so calls read like torch's (this is an inference forward pass).
        is_causal: query i may attend keys j <= i (top-left aligned); may be combined with ``attn_mask``.
        scale: multiplies the scores; default ``1/sqrt(D)``.
        enable_gqa: grouped-query attention, as in torch: q ``(..., Hq, Tq, D)`` over k, v ``(..., Hkv, Tk, D)``;
            query head ``h`` reads key/value head ``h // (Hq // Hkv)``.
        backend: ``"math"`` (explicit matrices, in place), ``"chunked"`` (online softmax over key
            blocks, O(T) memory) or ``"auto"`` (see :func:`choose_backend`).
        return_weights: also return the weights ``(..., Tq, Tk)`` (``"math"`` or ``"auto"`` only).

    Returns:
        ``output (..., Tq, Dv)``, or ``(output, weights)`` when ``return_weights``. A query whose
        keys are all masked gets output 0 and weights 0, never NaN.

    Example:
        >>> q = k = v = np.ones((2, 4, 8, 16), dtype=np.float32)       # (B, H, T, D)
        >>> scaled_dot_product_attention(q, k, v, is_causal=True).shape
        (2, 4, 8, 16)
    """
    batch = check_qkv(query, key, value, enable_gqa)
    t_q, t_k = query.shape[-2], key.shape[-2]
    if enable_gqa and query.shape[-3] != key.shape[-3]:  # each key/value head serves a group of query heads
        groups = query.shape[-3] // key.shape[-3]
        key, value = np.repeat(key, groups, axis=-3), np.repeat(value, groups, axis=-3)
    check_mask(attn_mask, batch, t_q, t_k)
    check_options(dropout_p, scale)
    check_choice("backend", backend, BACKENDS)
    scale = query.shape[-1] ** -0.5 if scale is None else float(scale)
    chosen = choose_backend(query, key, return_weights, backend)
    if chosen == "chunked":
        return chunked_attention(query, key, value, attn_mask, is_causal, scale)
    output, weights = math_attention(query, key, value, attn_mask, scale, is_causal)
    return (output, weights) if return_weights else output
