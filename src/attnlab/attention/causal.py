"""Causal (masked) attention (*Build a LLM From Scratch*, §3.5).

A language model must not look ahead: token i may attend only to tokens 0..i. The scores above
the diagonal are set to -inf before the softmax, so each row is renormalised over the allowed keys
(setting weights to 0 *after* the softmax would need a second normalisation; -inf does it in one).
Dropout then zeroes random weights during training and scales the rest by 1/(1-p).
"""

from __future__ import annotations

from attnlab.attention.checks import check_dropout
from attnlab.attention.self_attention import SelfAttentionV2


class CausalAttention(SelfAttentionV2):
    """Single-head causal self-attention: ``(B, T, d_in)`` -> ``(B, T, d_out)``, weights ``(B, T, T)``.

    Args:
        context_length: the longest sequence accepted; a longer one is an error.
        dropout: dropout probability on the attention weights (training mode only).

    Example:
        >>> ca = CausalAttention(3, 2, context_length=6, dropout=0.0)
        >>> out, w = ca(torch.rand(2, 6, 3), return_weights=True)
        >>> bool((w.triu(1) == 0).all())
        True
    """

    is_causal = True

    def __init__(self, d_in: int, d_out: int, context_length: int, dropout: float, qkv_bias: bool = False) -> None:
        super().__init__(d_in, d_out, qkv_bias=qkv_bias)
        check_dropout(type(self).__name__, dropout)
        if context_length < 1:
            raise ValueError(f"CausalAttention: context_length must be >= 1, got {context_length!r}")
        self.context_length = context_length
        self.dropout_p = dropout
