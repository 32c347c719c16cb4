"""``scaled_dot_product_attention``: one signature (PyTorch's), several ways to compute it."""

from __future__ import annotations

from typing import Literal, overload

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.arguments import resolve_backend
from attnlab.functional.checks import check_mask, check_options, check_qkv
from attnlab.functional.chunked import chunked_attention
from attnlab.functional.masks import merge_masks
from attnlab.functional.math_attention import math_attention

Backend = Literal["auto", "math", "sdpa", "chunked"]

# torch's fused kernel falls back to its O(T²) math kernel when dropout is on; above this many
# scores per head "auto" prefers our chunked kernel there, to keep memory O(T).
_DROPOUT_CHUNKED_FROM = 1024 * 1024


def choose_backend(query: Tensor, key: Tensor, dropout_p: float, return_weights: bool) -> str:
    """What ``backend="auto"`` runs: the fastest backend that can do what was asked.

    - weights requested: ``"math"`` (the only backend that materialises them);
    - dropout on long sequences: ``"chunked"`` (torch's fused kernel has no dropout on CPU);
    - otherwise ``"sdpa"``, torch's fused flash kernel.
    """
    if return_weights:
        return "math"
    if dropout_p > 0.0 and query.shape[-2] * key.shape[-2] >= _DROPOUT_CHUNKED_FROM:
        return "chunked"
    return "sdpa"


@overload
def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = ..., dropout_p: float = ...,
    is_causal: bool = ..., scale: float | None = ..., *, backend: Backend = ..., return_weights: Literal[False] = ...,
) -> Tensor: ...
@overload
def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = ..., dropout_p: float = ...,
    is_causal: bool = ..., scale: float | None = ..., *, backend: Backend = ..., return_weights: Literal[True],
) -> tuple[Tensor, Tensor]: ...
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    *,
    backend: Backend = "auto",
    return_weights: bool = False,
) -> Tensor | tuple[Tensor, Tensor]:
    """softmax(Q Kᵀ · scale + mask) V, with PyTorch's arguments and mask conventions.

    Args:
        query: ``(..., Tq, D)``.
        key: ``(..., Tk, D)``.
        value: ``(..., Tk, Dv)``. Batch dims of q, k, v broadcast.
        attn_mask: bool (True = may attend) or float (added to the scores), broadcastable to
            ``(..., Tq, Tk)``; a padding mask is typically ``(B, 1, 1, Tk)``.
        dropout_p: dropout probability on the attention weights, in [0, 1). Applied whenever > 0,
            as in torch: modules pass 0 in eval mode.
        is_causal: query i may attend keys j <= i (top-left aligned, as in torch). Unlike torch,
            it may be combined with ``attn_mask`` (both must allow a key).
        scale: multiplies the scores; default ``1/sqrt(D)``.
        backend: ``"math"`` (explicit score and weight matrices), ``"sdpa"`` (torch's fused
            kernel), ``"chunked"`` (online softmax over key blocks, O(T) memory), or ``"auto"``
            (see :func:`choose_backend`).
        return_weights: also return the weights ``(..., Tq, Tk)`` (``"math"`` or ``"auto"`` only).

    Returns:
        ``output (..., Tq, Dv)``, or ``(output, weights)`` when ``return_weights``.

    A query whose keys are all masked (a padding row) gets output 0 and weights 0 in every
    backend, never NaN. (torch 2.13's own SDPA does the same; releases before 2.5 gave NaN.)

    Example:
        >>> q = k = v = torch.randn(2, 4, 8, 16)          # (B, H, T, D)
        >>> out = scaled_dot_product_attention(q, k, v, is_causal=True)
        >>> out.shape
        torch.Size([2, 4, 8, 16])
    """
    batch = check_qkv(query, key, value)
    t_q, t_k = query.shape[-2], key.shape[-2]
    check_mask(attn_mask, batch, t_q, t_k)
    check_options(dropout_p, scale, backend)
    scale = query.shape[-1] ** -0.5 if scale is None else float(scale)
    chosen = resolve_backend(backend, choose_backend(query, key, dropout_p, return_weights), return_weights)

    if chosen == "chunked":
        return chunked_attention(query, key, value, attn_mask, is_causal, dropout_p, scale)
    if chosen == "sdpa":
        if attn_mask is not None and is_causal:  # torch refuses both at once: merge them ourselves
            attn_mask, is_causal = merge_masks(attn_mask, True, t_q, t_k, query.dtype, query.device), False
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.to(query.dtype)
        return F.scaled_dot_product_attention(
            query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, scale=scale
        )
    mask = merge_masks(attn_mask, is_causal, t_q, t_k, query.dtype, query.device)
    output, weights = math_attention(query, key, value, mask, dropout_p, scale)
    return (output, weights) if return_weights else output
