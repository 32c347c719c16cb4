"""Attention as functions, with PyTorch's conventions.

>>> import torch
>>> from attnlab import functional as AF
>>> q = k = v = torch.randn(1, 2, 5, 8)                      # (B, H, T, D)
>>> out, w = AF.scaled_dot_product_attention(q, k, v, is_causal=True, return_weights=True)
>>> w.sum(-1)                                                # every row of weights sums to 1
tensor([[[1.0000, 1.0000, 1.0000, 1.0000, 1.0000],
         [1.0000, 1.0000, 1.0000, 1.0000, 1.0000]]])
"""

from attnlab.functional.alibi import alibi_bias, alibi_slopes
from attnlab.functional.backends import BACKENDS, KERNELS, Backend, CallKind, choose_backend
from attnlab.functional.chunked import chunked_attention
from attnlab.functional.masks import and_masks, causal_mask, key_mask, padding_mask
from attnlab.functional.math_attention import attention_scores, attention_weights, math_attention
from attnlab.functional.sdpa import attend, scaled_dot_product_attention
from attnlab.functional.softmax import softmax
from attnlab.functional.windows import sliding_window_mask

__all__ = [
    "BACKENDS",
    "KERNELS",
    "Backend",
    "CallKind",
    "alibi_bias",
    "alibi_slopes",
    "and_masks",
    "attend",
    "attention_scores",
    "attention_weights",
    "causal_mask",
    "choose_backend",
    "chunked_attention",
    "key_mask",
    "math_attention",
    "padding_mask",
    "scaled_dot_product_attention",
    "sliding_window_mask",
    "softmax",
]
