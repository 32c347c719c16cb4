"""The textbook path in NumPy: every score and every weight is a real matrix, written in place.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        ("Attention Is All You Need", eq. 1)

The ``(..., Tq, Tk)`` score matrix is allocated once and then scaled, masked, exponentiated and
normalised where it lies (``s *= scale``, ``s -= max``, ``exp(s, out=s)``, ``s /= sum``), so the
peak memory is one score matrix, not the two or three an out-of-place chain holds.
"""

from __future__ import annotations

import numpy as np

from attnlab.numpy.softmax import softmax_


def attention_scores(query: np.ndarray, key: np.ndarray, scale: float, mask: np.ndarray | None) -> np.ndarray:
    """Scaled, masked scores ``(..., Tq, Tk)``: ``scale · Q Kᵀ`` plus the mask.

    A bool mask writes ``-inf`` where attention is forbidden; a float mask is added.
    """
    scores = np.matmul(query, np.swapaxes(key, -1, -2))
    scores *= scores.dtype.type(scale)
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


def attention_weights(scores: np.ndarray) -> np.ndarray:
    """Row-wise softmax of the scores, **in place**; a query with no key to attend to gets all-zero weights."""
    return softmax_(scores, dim=-1)


def math_attention(
    query: np.ndarray, key: np.ndarray, value: np.ndarray, mask: np.ndarray | None, scale: float
) -> tuple[np.ndarray, np.ndarray]:
    """Explicit attention. Returns ``(output (..., Tq, Dv), weights (..., Tq, Tk))``.

    ``mask`` is already merged with any causal mask.
    """
    weights = attention_weights(attention_scores(query, key, scale, mask))
    return np.matmul(weights, value), weights
