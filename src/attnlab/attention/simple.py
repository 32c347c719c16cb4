"""Simplified self-attention, with no trainable weights (Raschka, *Build a LLM From Scratch*, §3.3).

Each token's context vector is a weighted average of all the input vectors, the weights being
the softmax of plain dot products:  ``Z = softmax(X Xᵀ) X``. There is no scaling and nothing to learn.
"""

from __future__ import annotations

from torch import Tensor, nn

from attnlab.attention.checks import as_batched, key_padding, unbatch
from attnlab.functional import attend


class SimpleSelfAttention(nn.Module):
    """``softmax(X Xᵀ) X``: x ``(B, T, D)`` or ``(T, D)`` -> context ``(B, T, D)``, weights ``(B, T, T)``.

    Example:
        >>> x = torch.tensor([[0.43, 0.15, 0.89], [0.55, 0.87, 0.66]])
        >>> SimpleSelfAttention()(x).shape
        torch.Size([2, 3])
    """

    def forward(self, x: Tensor, attention_mask: Tensor | None = None, return_weights: bool = False):
        x, unbatched = as_batched(x, None, type(self).__name__)
        mask = key_padding(attention_mask, x, type(self).__name__)
        mask = None if mask is None else mask[:, 0]  # one head: (B, 1, T)
        out, weights = attend(x, x, x, attn_mask=mask, scale=1.0, return_weights=return_weights)
        return unbatch(out, weights, unbatched, return_weights)
