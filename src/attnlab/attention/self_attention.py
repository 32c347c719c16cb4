"""Self-attention with trainable weights: scaled dot-product attention (*Build a LLM From Scratch*, §3.4).

Three projections turn each input into a query, a key and a value:
``Q = X W_q``, ``K = X W_k``, ``V = X W_v``; then ``Z = softmax(Q Kᵀ / √d_k) V``.
Dividing by √d_k keeps the dot products from growing with the dimension, which would push
the softmax into regions with vanishing gradients.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from attnlab.attention.checks import as_batched, check_length, key_padding, unbatch
from attnlab.functional import attend


class _SingleHead(nn.Module):
    """What V1 and V2 share: project, attend, return. Subclasses define ``project``."""

    d_in: int
    is_causal: bool = False
    dropout_p: float = 0.0
    context_length: int | None = None

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        raise NotImplementedError

    def forward(self, x: Tensor, attention_mask: Tensor | None = None, return_weights: bool = False):
        """x ``(B, T, d_in)`` or ``(T, d_in)`` -> context ``(B, T, d_out)`` (and weights ``(B, T, T)``)."""
        owner = type(self).__name__
        x, unbatched = as_batched(x, self.d_in, owner)
        check_length(x.shape[1], self.context_length, owner)
        mask = key_padding(attention_mask, x, owner)
        queries, keys, values = self.project(x)
        out, weights = attend(
            queries, keys, values,
            attn_mask=None if mask is None else mask[:, 0],  # one head: (B, 1, T)
            dropout_p=self.dropout_p if self.training else 0.0,
            is_causal=self.is_causal,
            return_weights=return_weights,
        )
        return unbatch(out, weights, unbatched, return_weights)


class SelfAttentionV1(_SingleHead):
    """Scaled dot-product self-attention with raw ``nn.Parameter`` weight matrices ``(d_in, d_out)``.

    As in the book, ``queries = x @ W_query``, and the weights start uniform in [0, 1).

    Example:
        >>> torch.manual_seed(123)
        >>> SelfAttentionV1(3, 2)(torch.rand(6, 3)).shape
        torch.Size([6, 2])
    """

    def __init__(self, d_in: int, d_out: int) -> None:
        super().__init__()
        self.d_in, self.d_out = d_in, d_out
        self.W_query = nn.Parameter(torch.rand(d_in, d_out))
        self.W_key = nn.Parameter(torch.rand(d_in, d_out))
        self.W_value = nn.Parameter(torch.rand(d_in, d_out))

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return x @ self.W_query, x @ self.W_key, x @ self.W_value


class SelfAttentionV2(_SingleHead):
    """The same mechanism with ``nn.Linear`` projections (better initialisation, optional bias).

    ``nn.Linear`` stores its weight as ``(d_out, d_in)`` and computes ``x @ weight.T``, so
    V2 equals V1 when ``V2.W_query.weight = V1.W_query.T`` (and likewise for keys and values).
    """

    def __init__(self, d_in: int, d_out: int, qkv_bias: bool = False) -> None:
        super().__init__()
        self.d_in, self.d_out = d_in, d_out
        self.W_query = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_key = nn.Linear(d_in, d_out, bias=qkv_bias)
        self.W_value = nn.Linear(d_in, d_out, bias=qkv_bias)

    def project(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        return self.W_query(x), self.W_key(x), self.W_value(x)
