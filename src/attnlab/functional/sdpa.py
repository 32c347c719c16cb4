"""``scaled_dot_product_attention``: one signature (PyTorch's), several ways to compute it.

:func:`scaled_dot_product_attention` is the door: it checks its arguments, then calls :func:`attend`, which
runs the chosen backend. Modules that build q, k and v themselves (and check their own inputs) call
:func:`attend` directly, so nothing is checked twice.
"""

from __future__ import annotations

import dataclasses
from typing import Literal, overload

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.arguments import resolve_backend
from attnlab.functional.backends import AttentionCall, Backend, choose_backend, flash_measured_faster
from attnlab.functional.checks import check_mask, check_options, check_qkv
from attnlab.functional.chunked import chunked_attention
from attnlab.functional.grouped import fold_groups, unfold_groups
from attnlab.functional.masks import merge_masks
from attnlab.functional.math_attention import math_attention


def attend(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
           is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False, backend: str = "auto",
           return_weights: bool = False) -> tuple[Tensor, Tensor | None]:
    """:func:`scaled_dot_product_attention` without the argument checks: ``(output, weights or None)``.

    For callers whose q, k, v and mask are right by construction. ``"auto"`` is resolved by
    :func:`~attnlab.functional.backends.choose_backend`.
    """
    t_q, t_k = query.shape[-2], key.shape[-2]
    groups = query.shape[-3] // key.shape[-3] if enable_gqa else 1
    scale = query.shape[-1] ** -0.5 if scale is None else float(scale)
    auto = backend if backend != "auto" else choose_backend(
        call_facts(query, key, attn_mask, dropout_p, is_causal, return_weights))
    chosen = resolve_backend(backend, auto, return_weights)
    if chosen == "flash":  # reads grouped key/value heads itself
        from attnlab.functional.flash import flash_backend

        return flash_backend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa), None
    folded = chosen != "sdpa" and groups > 1 and not is_causal
    if folded:  # decoding, or a mask of its own: each group's query heads become rows of its key/value head
        query, attn_mask = fold_groups(query, attn_mask, groups)
    elif chosen != "sdpa" and groups > 1:  # causal (top-left per head): repeat each key/value head for its group
        key, value = key.repeat_interleave(groups, dim=-3), value.repeat_interleave(groups, dim=-3)
    if chosen == "chunked":
        output = chunked_attention(query, key, value, attn_mask, is_causal, dropout_p, scale)
        return (unfold_groups(output, groups) if folded else output), None
    if chosen == "sdpa":
        if attn_mask is not None and is_causal:  # torch refuses both at once: merge them ourselves
            attn_mask, is_causal = merge_masks(attn_mask, True, t_q, t_k, query.dtype, query.device), False
        if attn_mask is not None and attn_mask.dtype != torch.bool:
            attn_mask = attn_mask.to(query.dtype)
        return F.scaled_dot_product_attention(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p,
                                              is_causal=is_causal, scale=scale, enable_gqa=groups > 1), None
    # the textbook path; a causal mask alone leaves every query some key, so no empty rows to look for
    mask = merge_masks(attn_mask, is_causal, t_q, t_k, query.dtype, query.device)
    output, weights = math_attention(query, key, value, mask, dropout_p, scale, may_be_empty=attn_mask is not None,
                                     return_weights=return_weights)
    if folded:
        output, weights = unfold_groups(output, groups), None if weights is None else unfold_groups(weights, groups)
    return output, weights if return_weights else None


def call_facts(query: Tensor, key: Tensor, attn_mask: Tensor | None, dropout_p: float, is_causal: bool,
               return_weights: bool) -> AttentionCall:
    """The facts ``"auto"`` decides on, read from shapes, dtypes and devices only (never tensor values).

    Whether flash can run is asked only where :data:`~attnlab.functional.backends.FLASH_FASTER` could pick it:
    the answer imports triton and queries the GPU (once per device).
    """
    mask = ("causal" if is_causal else "none") if attn_mask is None else \
        ("bool" if attn_mask.dtype == torch.bool else "float")
    call = AttentionCall(query.device.type, query.shape[-2], key.shape[-2], dropout_p > 0.0, return_weights,
                         str(query.dtype).removeprefix("torch."), mask)
    if call.device == "cuda" and flash_measured_faster(call):
        from attnlab.functional.flash import flash_can_run

        call = dataclasses.replace(call, flash=flash_can_run(query))
    return call


@overload
def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = ..., dropout_p: float = ...,
    is_causal: bool = ..., scale: float | None = ..., enable_gqa: bool = ..., *, backend: Backend = ...,
    return_weights: Literal[False] = ...,
) -> Tensor: ...
@overload
def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = ..., dropout_p: float = ...,
    is_causal: bool = ..., scale: float | None = ..., enable_gqa: bool = ..., *, backend: Backend = ...,
    return_weights: Literal[True],
) -> tuple[Tensor, Tensor]: ...
def scaled_dot_product_attention(
    query: Tensor,
    key: Tensor,
    value: Tensor,
    attn_mask: Tensor | None = None,
    dropout_p: float = 0.0,
    is_causal: bool = False,
    scale: float | None = None,
    enable_gqa: bool = False,
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
        enable_gqa: grouped-query attention, as in torch: q ``(..., Hq, Tq, D)`` over k, v
            ``(..., Hkv, Tk, D)``, ``Hq`` a multiple of ``Hkv``; query head ``h`` reads key/value head
            ``h // (Hq // Hkv)``. Weights are returned per query head.
        backend: ``"math"`` (explicit score and weight matrices), ``"sdpa"`` (torch's fused
            kernel), ``"chunked"`` (online softmax over key blocks, O(T) memory), ``"flash"`` (attnlab's
            Triton kernel: CUDA, or the CPU under ``TRITON_INTERPRET=1``; no dropout), or ``"auto"``
            (see :func:`~attnlab.functional.backends.choose_backend`).
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
    batch = check_qkv(query, key, value, enable_gqa)
    check_mask(attn_mask, batch, query.shape[-2], key.shape[-2])
    check_options(dropout_p, scale, backend)
    output, weights = attend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, backend,
                             return_weights)
    return (output, weights) if return_weights else output
