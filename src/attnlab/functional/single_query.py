"""One query against the keys: the products of a decoding step, which the CPU runs faster without matmul.

A decoding step with a cache asks ``(..., 1, hd)`` queries against ``(..., L, hd)`` keys. As matrix products those
are ``B·H`` products of a single row, each too small for the batched kernel's setup to pay off; as an elementwise
product summed over one axis they are one pass over the keys (and one over the values). On a CPU that is about
1.5x faster at beam search's sizes (256 rows, 4 heads, L 2-12, hd 16; ``benchmarks/bench_versions.py``); on a GPU
the batched kernels are the better choice, so they stay there. The results equal the matrix products (tested).

torch's softmax over a short last axis (fewer entries than one SIMD register holds) runs a scalar loop, several
times slower than over a leading axis: :func:`softmax_last` moves the axis first there.
"""

from __future__ import annotations

import torch
from torch import Tensor

# below this many keys torch's CPU softmax over the last axis is slower than over a leading one (measured: 4-6x
# at 2-7 keys, 1024 rows; equal at 8, the AVX2 register's eight floats)
SHORT_ROW = 8


def _one_query(query: Tensor, *others: Tensor) -> bool:
    """Whether the elementwise form applies: one query row, on a CPU, every operand in one dtype (autocast casts
    a matmul's operands, an elementwise product would promote them instead)."""
    return query.shape[-2] == 1 and query.device.type == "cpu" and all(t.dtype == query.dtype for t in others)


def query_key_products(query: Tensor, key: Tensor) -> Tensor:
    """``Q Kᵀ``: ``query (..., Tq, hd)``, ``key (..., Tk, hd)`` -> ``(..., Tq, Tk)``, batch axes broadcast."""
    if _one_query(query, key):
        return (query * key).sum(-1).unsqueeze(-2)  # (..., Tk, hd) -> (..., 1, Tk)
    return query @ key.transpose(-2, -1)


def weighted_values(weights: Tensor, value: Tensor) -> Tensor:
    """``weights @ value``: ``(..., Tq, Tk)`` and ``(..., Tk, hd)`` -> ``(..., Tq, hd)``, batch axes broadcast."""
    if _one_query(weights, value):
        return (weights.transpose(-2, -1) * value).sum(-2, keepdim=True)  # (..., Tk, hd) -> (..., 1, hd)
    return weights @ value


def softmax_last(scores: Tensor) -> Tensor:
    """``torch.softmax(scores, dim=-1)``; on a CPU with fewer than :data:`SHORT_ROW` keys, over the keys moved to
    the front (torch makes that copy contiguous, a few kilobytes for a decoding step)."""
    if scores.device.type != "cpu" or scores.shape[-1] >= SHORT_ROW or scores.dim() < 2:
        return torch.softmax(scores, dim=-1)
    return torch.softmax(scores.movedim(-1, 0), dim=0).movedim(0, -1)
