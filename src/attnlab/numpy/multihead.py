"""Multi-head attention in NumPy, the twin of :class:`attnlab.attention.MultiHeadAttention`:

    MultiHead(X) = Concat(head_1, ..., head_h) W_o,   head_i = Attention(X W_q^i, X W_k^i, X W_v^i)

and, with a ``memory`` M (cross-attention, the decoder of the original Transformer),
``head_i = Attention(X W_q^i, M W_k^i, M W_v^i)``.

One projection of width ``d_out`` per q/k/v, split into heads with a reshape, all heads in one
batched call, then ``out_proj``. Parameters are read by the torch module's names:
``W_query``, ``W_key``, ``W_value`` and ``out_proj`` (``.weight``, optional ``.bias``).
"""

from __future__ import annotations

import numpy as np

from attnlab.numpy.checks import check_float_array
from attnlab.numpy.linear import linear_from
from attnlab.numpy.masks import padding_mask
from attnlab.numpy.sdpa import Backend, scaled_dot_product_attention
from attnlab.numpy.weights import Params, require

_OWNER = "multi_head_attention"


def split_heads(t: np.ndarray, num_heads: int) -> np.ndarray:
    """``(B, T, d_out)`` -> ``(B, num_heads, T, head_dim)``."""
    b, n, d = t.shape
    return t.reshape(b, n, num_heads, d // num_heads).transpose(0, 2, 1, 3)


def multi_head_attention(
    x: np.ndarray,
    params: Params,
    num_heads: int,
    attention_mask: np.ndarray | None = None,
    *,
    is_causal: bool = True,
    backend: Backend = "auto",
    return_weights: bool = False,
    memory: np.ndarray | None = None,
) -> np.ndarray | tuple[np.ndarray, np.ndarray]:
    """Multi-head attention ``(B, Tq, d_in)`` -> ``(B, Tq, d_out)`` (weights ``(B, num_heads, Tq, Tk)``):
    self-attention, or cross-attention to ``memory``.

    Args:
        x: ``(B, T, d_in)``.
        params: ``W_query/W_key/W_value/out_proj`` ``.weight`` (and ``.bias``), e.g. from
            :func:`attnlab.numpy.state_dict_to_arrays` of a ``MultiHeadAttention``.
        num_heads: number of heads; must divide ``d_out``.
        attention_mask: ``(B, Tk)`` padding mask of the keys' sequence (``x``, or ``memory``), 1 for real tokens,
            0 for padding (keys that nobody attends).
        is_causal: mask future tokens (a decoder); False for an encoder and for cross-attention.
        backend: ``"math"``, ``"chunked"`` or ``"auto"``, see :func:`scaled_dot_product_attention`.
        return_weights: also return the attention weights.
        memory: ``(B, Tk, d_in)``, the sequence the keys and values come from (an encoder's output); None: ``x``.
    """
    check_float_array(x, "x", _OWNER)
    if x.ndim != 3:
        raise ValueError(f"{_OWNER}: x must have shape (B, T, D), got {x.shape}")
    d_out = require(params, "W_query.weight", _OWNER).shape[0]
    if not isinstance(num_heads, int) or num_heads < 1 or d_out % num_heads:
        raise ValueError(f"{_OWNER}: num_heads must be a positive divisor of d_out={d_out}, got {num_heads!r}")
    b, t, _ = x.shape
    source = x
    if memory is not None:
        check_float_array(memory, "memory", _OWNER)
        if memory.ndim != 3 or memory.shape[0] != b or memory.shape[2] != x.shape[2]:
            raise ValueError(f"{_OWNER}: memory must have shape (B, Tk, D) = ({b}, Tk, {x.shape[2]}), got "
                             f"{memory.shape}")
        source = memory
    mask = None
    if attention_mask is not None:
        if tuple(attention_mask.shape) != source.shape[:2]:
            raise ValueError(f"{_OWNER}: attention_mask must have shape (B, T) = {source.shape[:2]}, got "
                             f"{attention_mask.shape}")
        mask = padding_mask(attention_mask)
    q = split_heads(linear_from(params, "W_query", x, _OWNER), num_heads)
    k, v = (split_heads(linear_from(params, name, source, _OWNER), num_heads) for name in ("W_key", "W_value"))
    result = scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=is_causal, backend=backend,
                                          return_weights=return_weights)
    out, weights = result if isinstance(result, tuple) else (result, None)  # a tuple: return_weights
    out = linear_from(params, "out_proj", out.transpose(0, 2, 1, 3).reshape(b, t, d_out), _OWNER)  # concat heads, mix
    return out if weights is None else (out, weights)
