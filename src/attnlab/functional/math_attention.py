"""The textbook path: every score and every weight is a real matrix you can look at.

    Attention(Q, K, V) = softmax(Q Kᵀ / √d_k) V        ("Attention Is All You Need", eq. 1)

with, as options, Gemma 2's soft-capping of the scores and gpt-oss's sinks (:mod:`attnlab.functional.logit_options`).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor

from attnlab.arguments import broadcast_shapes
from attnlab.functional.logit_options import softcap as cap_scores
from attnlab.functional.logit_options import softmax_with_sinks
from attnlab.functional.masks import open_empty_rows, rows_with_keys


def attention_scores(query: Tensor, key: Tensor, scale: float, mask: Tensor | None = None,
                     softcap: float | None = None) -> Tensor:
    """Scaled, masked scores ``(..., Tq, Tk)``: ``scale · Q Kᵀ`` (soft-capped, ``cap · tanh(s / cap)``, if
    ``softcap``) plus the mask.

    A bool mask writes ``-inf`` where attention is forbidden; a float mask is added (after the cap, as Gemma 2 does).
    """
    scores = query @ key.transpose(-2, -1)
    scores.mul_(scale)  # in place: the matmul's backward needs q and k, not this product
    if softcap is not None:
        scores = cap_scores(scores, softcap)
    if mask is None:
        return scores
    if not _fits(mask.shape, scores.shape):
        scores = scores.expand(broadcast_shapes(mask.shape, scores.shape)).clone()  # the mask adds batch dims
    if mask.dtype == torch.bool:
        return scores.masked_fill_(~mask, float("-inf"))
    return scores.add_(mask.to(scores.dtype))


def _fits(mask: torch.Size, scores: torch.Size) -> bool:
    """Whether a mask of shape ``mask`` broadcasts to ``scores`` without enlarging it (a key padding mask
    ``(B, 1, 1, Tk)`` does): compared here, where a general broadcast of the two would cost more than the add."""
    return len(mask) <= len(scores) and all(m in (1, s) for m, s in zip(reversed(mask), reversed(scores), strict=False))


def attention_weights(scores: Tensor, mask: Tensor | None = None) -> Tensor:
    """Row-wise softmax of the scores (``mask`` as given to :func:`attention_scores`).

    A query with no key to attend to gets all-zero weights, never NaN: ``torch.softmax`` of an all ``-inf``
    row is NaN, so such rows are softmaxed as zeros and then set to 0.
    """
    if mask is None:
        return torch.softmax(scores, dim=-1)
    has_keys = rows_with_keys(mask)
    return torch.softmax(scores.masked_fill(~has_keys, 0.0), dim=-1).masked_fill(~has_keys, 0.0)


def math_attention(query: Tensor, key: Tensor, value: Tensor, mask: Tensor | None, dropout_p: float, scale: float,
                   may_be_empty: bool = True, return_weights: bool = True, softcap: float | None = None,
                   sinks: Tensor | None = None) -> tuple[Tensor, Tensor]:
    """Explicit attention. Returns ``(output (..., Tq, Dv), weights (..., Tq, Tk))``.

    ``mask`` is already merged with any causal mask. Dropout acts on the weights, like the book's
    ``CausalAttention`` and like torch; the weights returned are the ones used. ``may_be_empty=False`` promises
    that every query may attend some key (a causal mask alone), which skips the empty-row handling;
    ``return_weights=False`` skips zeroing the weights of such rows (only the output is used).

    Rows with no key: the mask is opened there (a small tensor), so the softmax stays finite, and the
    row's output and weights are set to 0 afterwards; no pass over the scores is added for them. With ``sinks``
    ``(H,)`` such a row needs nothing: all its weight goes to the sink, none to the values.
    """
    has_keys = rows_with_keys(mask) if mask is not None and may_be_empty and sinks is None else None
    if has_keys is not None:
        assert mask is not None  # has_keys is only computed from a mask
        mask = open_empty_rows(mask, has_keys)
    scores = attention_scores(query, key, scale, mask, softcap)
    weights = torch.softmax(scores, dim=-1) if sinks is None else softmax_with_sinks(scores, sinks)
    if dropout_p > 0.0:
        weights = F.dropout(weights, p=dropout_p, training=True)
    output = weights @ value
    if has_keys is not None:
        output = output.masked_fill_(~has_keys, 0.0)  # in place: a fresh product, which no backward needs
        if return_weights:  # in place where autograd does not need the softmax's output
            weights = weights.masked_fill(~has_keys, 0.0) if weights.requires_grad else \
                weights.masked_fill_(~has_keys, 0.0)
    return output, weights
