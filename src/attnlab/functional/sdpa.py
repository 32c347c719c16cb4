"""``scaled_dot_product_attention``: one signature (PyTorch's), several ways to compute it.

:func:`scaled_dot_product_attention` is the door: it checks its arguments, then calls :func:`attend`, which
runs the chosen backend. Modules that build q, k and v themselves (and check their own inputs) call
:func:`attend` directly, so nothing is checked twice.
"""

from __future__ import annotations

from typing import Literal, overload

import torch
from torch import Tensor

from attnlab.arguments import check_choice, check_scale
from attnlab.functional.backends import BACKENDS, KERNELS, Backend, auto_backend
from attnlab.functional.checks import check_mask, check_qkv
from attnlab.functional.logit_options import check_sinks, check_softcap


def attend(query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = None, dropout_p: float = 0.0,
           is_causal: bool = False, scale: float | None = None, enable_gqa: bool = False, backend: str = "auto",
           return_weights: bool = False, softcap: float | None = None,
           sinks: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """:func:`scaled_dot_product_attention` without the argument checks: ``(output, weights or None)``.

    For callers whose q, k, v and mask are right by construction. The backend's row of
    :data:`~attnlab.functional.backends.KERNELS` runs the call; for ``"auto"``, the row chosen for this kind of call
    (device, dtype, shape class, mask kind, what is asked), which :func:`~attnlab.functional.backends.auto_backend`
    decides once per kind.
    """
    if backend == "auto":
        mask = ("causal" if is_causal else "none") if attn_mask is None else \
            ("bool" if attn_mask.dtype == torch.bool else "float")
        # torch.compile decides once per graph anyway, and warns about tracing through a cache
        choose = auto_backend.__wrapped__ if torch.compiler.is_compiling() else auto_backend
        kernel = choose(query.device, query.dtype, query.shape[-2].bit_length(), key.shape[-2].bit_length(),
                        query.shape[-1], mask, dropout_p > 0.0, return_weights, softcap is not None, sinks is not None)
    else:
        kernel = KERNELS[backend]
        if return_weights and not kernel.weights:
            raise ValueError(f"backend={backend!r} cannot return weights; use backend='math' or 'auto'")
    return kernel.run(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                      scale=query.shape[-1] ** -0.5 if scale is None else float(scale),
                      groups=query.shape[-3] // key.shape[-3] if enable_gqa else 1, return_weights=return_weights,
                      softcap=softcap, sinks=sinks)


def check_options(dropout_p: float, scale: float | None, backend: str, softcap: float | None = None) -> None:
    """The plain options of a call: a dropout probability, a scale, a backend that can do what is asked."""
    if isinstance(dropout_p, bool) or not isinstance(dropout_p, int | float) or not 0.0 <= dropout_p < 1.0:
        raise ValueError(f"dropout_p must be a float in [0, 1), got {dropout_p!r}")
    if scale is not None:
        check_scale(scale)
    if backend not in BACKENDS:
        check_choice("backend", backend, BACKENDS)
    if softcap is not None:
        check_softcap(softcap)
        if backend != "auto" and not KERNELS[backend].softcap:
            able = [name for name, kernel in KERNELS.items() if kernel.softcap]
            raise ValueError(f"backend={backend!r} cannot soft-cap the scores; use one of {able} or 'auto'")


@overload
def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = ..., dropout_p: float = ...,
    is_causal: bool = ..., scale: float | None = ..., enable_gqa: bool = ..., *, backend: Backend = ...,
    return_weights: Literal[False] = ..., softcap: float | None = ..., sinks: Tensor | None = ...,
) -> Tensor: ...
@overload
def scaled_dot_product_attention(
    query: Tensor, key: Tensor, value: Tensor, attn_mask: Tensor | None = ..., dropout_p: float = ...,
    is_causal: bool = ..., scale: float | None = ..., enable_gqa: bool = ..., *, backend: Backend = ...,
    return_weights: Literal[True], softcap: float | None = ..., sinks: Tensor | None = ...,
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
    softcap: float | None = None,
    sinks: Tensor | None = None,
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
            (torch's fused kernel unless the call needs what it cannot do: see
            :func:`~attnlab.functional.backends.choose_backend`).
        return_weights: also return the weights ``(..., Tq, Tk)`` (``"math"`` or ``"auto"`` only).
        softcap: scores become ``softcap · tanh(s / softcap)`` before the mask (Gemma 2: 50); a number > 0, or
            None. ``"math"``, ``"chunked"`` and ``"flash"`` can; ``"auto"`` then picks one of them.
        sinks: ``(H,)`` one learned logit per query head (``H = query.shape[-3]``) that joins every row's softmax
            and is dropped after it (gpt-oss): the weights sum to less than 1. Every backend; differentiable.

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
    if attn_mask is not None:
        check_mask(attn_mask, batch, query.shape[-2], key.shape[-2])
    check_options(dropout_p, scale, backend, softcap)
    if sinks is not None:
        check_sinks(sinks, query)
    output, weights = attend(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa, backend,
                             return_weights, softcap, sinks)
    if return_weights:
        assert weights is not None  # attend returns the weights whenever they are asked for
        return output, weights
    return output
