"""The textbook path: every score and every weight is a real matrix you can look at.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        ("Attention Is All You Need", eq. 1)
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.functional.masks import rows_with_keys


def attention_scores(query: Tensor, key: Tensor, scale: float, mask: Tensor | None) -> Tensor:
    """Scaled, masked scores ``(..., Tq, Tk)``: ``scale · Q Kᵀ`` plus the mask.

    A bool mask writes ``-inf`` where attention is forbidden; a float mask is added.
    """
    scores = query @ key.transpose(-2, -1)
    scores.mul_(scale)  # in place: the matmul's backward needs q and k, not this product
    if mask is None:
        return scores
    if tuple(np.broadcast_shapes(mask.shape, scores.shape)) != tuple(scores.shape):
        scores = scores.expand(np.broadcast_shapes(mask.shape, scores.shape)).clone()  # mask adds batch dims
    if mask.dtype == torch.bool:
        return scores.masked_fill_(~mask, float("-inf"))
    return scores.add_(mask.to(scores.dtype))


def attention_weights(scores: Tensor, mask: Tensor | None) -> Tensor:
    """Row-wise softmax of the scores; a query with no key to attend to gets all-zero weights.

    ``torch.softmax`` is the fast fused kernel but yields NaN on an all ``-inf`` row. Such rows
    are set to 0 before the softmax (uniform, finite) and to 0 after it, so neither the
    forward nor the backward pass ever sees a NaN.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    has_keys = rows_with_keys(mask)
    if bool(has_keys.all()):
        return torch.softmax(scores, dim=-1)
    scores = scores.masked_fill(~has_keys, 0.0)
    return torch.softmax(scores, dim=-1).masked_fill(~has_keys, 0.0)


def math_attention(
    query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, dropout_p: float, scale: float
) -> tuple[Tensor, Tensor]:
    """Explicit attention. Returns ``(output (..., Tq, Dv), weights (..., Tq, Tk))``.

    ``mask`` is already merged with any causal mask. Dropout acts on the weights, like the
    book's ``CausalAttention`` and like torch; the weights returned are the ones used.
    """
    weights = attention_weights(attention_scores(query, key, scale, mask), mask)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    return weights @ value, weights
