"""A few queries against a few keys, many times over: decoding steps, where torch's fused kernel and the CPU's small
kernels lose.

On the CPU, a few queries over a few keys (a decoding step of a few tokens per row; a search's beams querying their
source's memory together) are two small matmuls: torch's fused kernel spends more setting up its blocks per head
than the work takes (measured 2-5x slower at Tq 2-8, Tk 20-128, head_dim 16-32; as fast at head_dim 64). So a
decoding step there runs :func:`few_queries_kernel` (:class:`~attnlab.fast.attention.FastAttention` picks it), the
math path with two more CPU-specific choices:

A decoding step with a cache multiplies ``(..., 1, Tk)`` weights by ``(..., Tk, hd)`` values, one small product per
row and head. At beam search's sizes (256 rows × 4 heads, Tk 1-12, hd 16) the batched matmul spends more on each
product's setup than on its arithmetic; an elementwise product summed over the keys is one pass over the values,
2-3x faster. With few products, a long row or wide heads the matmul is as fast or faster (a GPT decoding one
sequence: 4-6 heads, hd 16-64, Tk 9-208), so it stays there, and on a GPU. The two are equal (tested).

The scores before them, ``(..., 1, hd)`` by ``(..., Tk, hd)`` transposed, stay a matmul: summed elementwise over
``hd`` they measured slower (the matmul's time 0.5-1.0x) at every size from 64 to 4,000 rows with 2 to 11 keys read
from a cache's buffer (``benchmarks/bench_single_query.py``, ``benchmarks/results/single_query.md``), since
broadcasting the query over the keys leaves the product an inner loop of ``hd`` numbers; only a single key (a
search's first step) goes 1.1-1.4x faster elementwise, not worth a branch.

torch's CPU softmax over a short last axis (fewer entries than one vector register holds: 8 floats with AVX2, 16 with
AVX-512, twice as many bf16 or fp16 values) runs a scalar loop, 3-13x slower than over a leading axis:
:func:`softmax_last` moves the axis to the front there.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.functional.backends import math_kernel
from attnlab.functional.grouped import fold_groups, unfold_groups
from attnlab.functional.masks import open_empty_rows, rows_with_keys
from attnlab.functional.math_attention import attention_scores

# measured on one CPU thread, products of (1, Tk) by (Tk, hd): the elementwise sum wins from this many of them
# (1.2-7x at 64-4,000 rows of 4 heads, Tk 1-11, hd 16: benchmarks/results/single_query.md) while Tk and hd stay
# within SHORT_PRODUCT; below 64 products, or from Tk 40, the matmul is as fast or faster
MANY_PRODUCTS, SHORT_PRODUCT = 64, 32
# torch's CPU softmax over the last axis runs a scalar loop below one vector register of entries: slower there than
# over a leading axis, from MANY_ROWS rows. A register holds VECTOR_BYTES (AVX2 32, AVX-512 64): 8 or 16 floats, 16
# or 32 bf16/fp16 values. The move's speed-up, one thread, 4,000 rows: AVX-512 float32 10-13x at 2-15 keys, 0.8x at
# 16; bf16 and fp16 5-8x at 4-20 keys, equal at 32; torch's AVX2 kernels (ATEN_CPU_CAPABILITY=avx2) float32 9-10x at
# 4-7 keys, 0.8x at 8; bf16 3-4x at 4-15 keys, equal at 16. (AVX2 also softmaxes 9-15 floats 2.6x faster moved, but
# the weighted sum after reads moved weights strided and loses as much: no gain for the two together, a loss at 15.)
VECTOR_BYTES = 64 if torch.backends.cpu.get_cpu_capability().startswith("AVX512") else 32
SHORT_ROW = {dtype: VECTOR_BYTES // dtype.itemsize for dtype in (torch.float32, torch.bfloat16, torch.float16)}
MANY_ROWS = 64


def weighted_values(weights: Tensor, value: Tensor) -> Tensor:
    """``weights @ value``: ``(..., Tq, Tk)`` and ``(..., Tk, hd)`` -> ``(..., Tq, hd)``, batch axes broadcast; for
    one query's row many times over, on a CPU, in one dtype (autocast casts a matmul's operands; a product would
    promote them instead), with ``Tk`` and ``hd`` short, as an elementwise product summed over the keys."""
    if (weights.shape[-2] == 1 and weights.is_cpu and weights.dtype == value.dtype
            and max(value.shape[-2:]) <= SHORT_PRODUCT and weights.numel() >= MANY_PRODUCTS * weights.shape[-1]):
        return (weights.transpose(-2, -1) * value).sum(-2, keepdim=True)  # (..., Tk, 1) · (..., Tk, hd) over Tk
    return weights @ value


def softmax_last(scores: Tensor) -> Tensor:
    """``torch.softmax(scores, dim=-1)``; on a CPU, for many rows of fewer entries than one vector register holds
    (:data:`SHORT_ROW` of the dtype), over the entries moved to the front (torch makes that copy contiguous: a few
    kilobytes for a decoding step)."""
    short = scores.shape[-1] < SHORT_ROW.get(scores.dtype, 0) and scores.numel() >= MANY_ROWS * scores.shape[-1]
    if not scores.is_cpu or not short:  # is_cpu: device.type builds a string at every call
        return torch.softmax(scores, dim=-1)
    return torch.softmax(scores.movedim(-1, 0), dim=0).movedim(0, -1)


def few_queries_kernel(query: Tensor, key: Tensor, value: Tensor, *, attn_mask: Tensor | None = None,
                       dropout_p: float = 0.0, is_causal: bool = False, scale: float, groups: int = 1,
                       return_weights: bool = False, softcap: float | None = None,
                       sinks: Tensor | None = None) -> tuple[Tensor, Tensor | None]:
    """An attention function of the table's signature (:data:`~attnlab.functional.backends.AttentionFunction`)
    for a few queries on a CPU: the math path, its softmax and weighted sum taken by :func:`softmax_last` and
    :func:`weighted_values`. Anything it was not written for (weights, dropout, a cap, sinks, a causal mask of
    torch's alignment, rows that may see no key) goes to the math kernel itself."""
    if return_weights or dropout_p or softcap is not None or sinks is not None or is_causal or \
            (attn_mask is not None and attn_mask.dtype != torch.bool):
        return math_kernel(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                           scale=scale, groups=groups, return_weights=return_weights, softcap=softcap, sinks=sinks)
    if groups > 1:  # each group's query heads as rows of its key/value head: the cache is never copied per head
        query, attn_mask = fold_groups(query, attn_mask, groups)
    has_keys = None if attn_mask is None else rows_with_keys(attn_mask)
    if has_keys is not None:  # a row that sees no key gets zeros, as in every backend (never NaN)
        assert attn_mask is not None  # has_keys is only computed from a mask
        attn_mask = open_empty_rows(attn_mask, has_keys)
    output = weighted_values(softmax_last(attention_scores(query, key, scale, attn_mask)), value)
    if has_keys is not None:
        output = output.masked_fill_(~has_keys, 0.0)
    return (unfold_groups(output, groups) if groups > 1 else output), None
