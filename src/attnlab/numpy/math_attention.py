"""The textbook path in NumPy: every score and every weight is a real matrix, written in place.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        ("Attention Is All You Need", eq. 1)

The ``(..., Tq, Tk)`` score matrix is allocated once and then masked, exponentiated and normalised
where it lies (``s[future] = -inf``, ``s -= max``, ``exp(s, out=s)``, ``s *= 1/sum``), so the peak
memory is one score matrix, not the two or three an out-of-place chain holds. The scale is applied
to Q (``Tq·D`` multiplies) rather than to the scores (``Tq·Tk``), and a causal mask is written row
by row into the upper triangle instead of being built as a ``(Tq, Tk)`` boolean matrix.
"""

from __future__ import annotations

import numpy as np

from attnlab.numpy.softmax import softmax_


def attention_scores(query: np.ndarray, key: np.ndarray, scale: float, mask: np.ndarray | None) -> np.ndarray:
    """Scaled, masked scores ``(..., Tq, Tk)``: ``scale · Q Kᵀ`` plus the mask.

    A bool mask writes ``-inf`` where attention is forbidden; a float mask is added.
    """
    scores = np.matmul(query * query.dtype.type(scale), np.swapaxes(key, -1, -2))
    if mask is None:
        return scores
    full = tuple(np.broadcast_shapes(mask.shape, scores.shape))
    if full != scores.shape:  # the mask adds batch dims
        scores = np.broadcast_to(scores, full).copy()
    if mask.dtype == np.bool_:
        np.copyto(scores, scores.dtype.type(-np.inf), where=~mask)
    else:
        scores += mask.astype(scores.dtype, copy=False)
    return scores


def mask_future_(scores: np.ndarray) -> np.ndarray:
    """Write ``-inf`` where key j > query i (top-left aligned, like torch's ``is_causal``), in place."""
    neg_inf = scores.dtype.type(-np.inf)
    for i in range(min(scores.shape[-2], scores.shape[-1] - 1)):
        scores[..., i, i + 1 :] = neg_inf
    return scores


def attention_weights(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax of the scores, **in place**; a query with no key to attend to gets all-zero weights."""
    return softmax_(scores, dim=-1)


def math_attention(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, mask: np.ndarray | None, scale: float,
    is_causal: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Explicit attention. Returns ``(output (..., Tq, Dv), weights (..., Tq, Tk))``.

    ``mask`` is a bool or float mask; ``is_causal`` additionally hides future keys.
    """
    scores = attention_scores(query, key, scale, mask)
    if is_causal:
        mask_future_(scores)
    weights = attention_weights(scores)
    return np.matmul(weights, value), weights
