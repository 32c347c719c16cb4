"""The Transformer block: attention, then a feed-forward network, each wrapped in a residual
connection and a LayerNorm. Where the norm sits is the one design choice that differs between models:

* post-LN (the original Transformer, BERT):  x = LN(x + Attn(x));   x = LN(x + FFN(x))
* pre-LN  (GPT-2 and most decoders since):    x = x + Attn(LN(x));   x = x + FFN(LN(x))

Pre-LN keeps an un-normalised residual path from input to output, so gradients reach the early
layers undamped and deep stacks train without a careful warm-up; it then needs one final LayerNorm
after the last block. Post-LN is what BERT's weights were trained with, so loading them needs it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, get_args

from torch import Tensor, nn

from attnlab.arguments import plain
from attnlab.attention.cache import LayerCache
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.functional import Backend
from attnlab.layers.feedforward import Activation, FeedForward, dropped
from attnlab.layers.layernorm import LayerNorm

Norm = Literal["post", "pre"]  # where the LayerNorm sits: after the residual addition, or before the sublayer


NORM_MESSAGE = "{owner}: norm must be 'post' or 'pre', got {norm!r}"  # a config translates it (models/config.py)


def check_norm(owner: str, norm: object, translate: Callable[..., str] = plain) -> None:
    """``norm`` must be ``"post"`` or ``"pre"`` (worded by ``translate``: see :func:`attnlab.arguments.plain`)."""
    if norm not in get_args(Norm):
        raise ValueError(translate(NORM_MESSAGE, owner=owner, norm=norm))


class TransformerBlock(nn.Module):
    """One block: ``(B, T, D)`` -> ``(B, T, D)``; with ``return_weights`` also ``(B, H, T, T)``.

    Args:
        d_model: width D.
        num_heads: attention heads; must divide ``d_model``.
        d_ff: feed-forward hidden width.
        dropout: on the attention weights and on each sublayer's output, training mode only.
        norm: ``"post"`` (original Transformer, BERT) or ``"pre"`` (GPT-2).
        is_causal: mask future tokens (decoder) or not (encoder).
        activation: the feed-forward non-linearity.
        qkv_bias: biases on the query/key/value projections.
        bias: biases on the attention's out_proj, the feed-forward maps and the LayerNorms.
        eps: LayerNorm epsilon.
        backend: attention backend (see :func:`attnlab.functional.scaled_dot_product_attention`).
        scale: the scores' factor (None: 1/√head_dim).

    Submodules: ``attn`` (:class:`~attnlab.attention.MultiHeadAttention`), ``ln1`` (around the
    attention), ``ff`` (:class:`FeedForward`), ``ln2`` (around the feed-forward).
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, dropout: float = 0.0, norm: Norm = "pre",
                 is_causal: bool = False, activation: Activation = "gelu", qkv_bias: bool = True, bias: bool = True,
                 eps: float = 1e-5, backend: Backend = "auto", scale: float | None = None) -> None:
        super().__init__()
        check_norm(type(self).__name__, norm)
        self.norm = norm
        self.attn = MultiHeadAttention(d_model, d_model, None, dropout, num_heads, qkv_bias, is_causal=is_causal,
                                       out_bias=bias, backend=backend, scale=scale)
        self.ln1 = LayerNorm(d_model, eps=eps, bias=bias)
        self.ff = FeedForward(d_model, d_ff, activation=activation, dropout=dropout, bias=bias)
        self.ln2 = LayerNorm(d_model, eps=eps, bias=bias)
        self.dropout = nn.Dropout(dropout)  # on the attention sublayer's output, as in the paper

    def forward(self, x: Tensor, attention_mask: Tensor | None = None, *, attn_mask: Tensor | None = None,
                return_weights: bool = False, kv_cache: LayerCache | None = None, head_mask: Tensor | None = None):
        """``x (B, T, D)``; ``attention_mask (B, T)`` 1 = real token, or a model's checked ``attn_mask``
        (see :meth:`~attnlab.attention.MultiHeadAttention.forward`); ``kv_cache`` for decoding; ``head_mask``
        ``(num_heads,)``."""
        h = self.ln1(x) if self.norm == "pre" else x
        a = self.attn(h, attention_mask=attention_mask, attn_mask=attn_mask, return_weights=return_weights,
                      kv_cache=kv_cache, head_mask=head_mask)
        a, weights = a if return_weights else (a, None)
        if self.norm == "pre":
            x = x + dropped(self.dropout, a)
            x = x + self.ff(self.ln2(x))
        else:
            x = self.ln1(x + dropped(self.dropout, a))
            x = self.ln2(x + self.ff(x))
        return (x, weights) if return_weights else x
