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
from dataclasses import dataclass
from typing import Literal, get_args

from torch import Tensor, nn

from attnlab.arguments import plain
from attnlab.attention.cache import LayerCache
from attnlab.attention.multihead import MultiHeadAttention
from attnlab.attention.spec import AttentionSpec
from attnlab.layers.feedforward import ACTIVATIONS, Activation, FeedForward, dropped
from attnlab.layers.layernorm import LayerNorm

Norm = Literal["post", "pre"]  # where the LayerNorm sits: after the residual addition, or before the sublayer


NORM_MESSAGE = "{owner}: norm must be 'post' or 'pre', got {norm!r}"  # a config translates it (models/config.py)


def check_norm(owner: str, norm: object, translate: Callable[..., str] = plain) -> None:
    """``norm`` must be ``"post"`` or ``"pre"`` (worded by ``translate``: see :func:`attnlab.arguments.plain`)."""
    if norm not in get_args(Norm):
        raise ValueError(translate(NORM_MESSAGE, owner=owner, norm=norm))


@dataclass(frozen=True)
class BlockSpec:
    """One block of the original Transformer, BERT or GPT-2: attention and a feed-forward network, each in a
    residual connection with a LayerNorm (:class:`TransformerBlock`; :class:`~attnlab.layers.DecoderBlock` adds a
    cross-attention with the same options).

    Attributes:
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
        scale: the scores' factor (None: 1/√head_dim; GPT-2's ``scale_attn_by_inverse_layer_idx`` divides it by
            the layer's number + 1).
    """

    d_model: int
    num_heads: int
    d_ff: int
    dropout: float = 0.0
    norm: Norm = "pre"
    is_causal: bool = False
    activation: Activation = "gelu"
    qkv_bias: bool = True
    bias: bool = True
    eps: float = 1e-5
    backend: str = "auto"
    scale: float | None = None

    def __post_init__(self) -> None:
        check_norm("BlockSpec", self.norm)
        if self.activation not in ACTIVATIONS:
            raise ValueError(f"BlockSpec: activation must be one of {ACTIVATIONS}, got {self.activation!r}")

    def attention(self, is_causal: bool | None = None, owner: str = "MultiHeadAttention") -> AttentionSpec:
        """The attention's spec (causal as the block says, unless ``is_causal`` says otherwise: a cross-attention)."""
        causal = self.is_causal if is_causal is None else is_causal
        return AttentionSpec(self.d_model, self.d_model, self.num_heads, dropout=self.dropout, qkv_bias=self.qkv_bias,
                             out_bias=self.bias, is_causal=causal, scale=self.scale, backend=self.backend, owner=owner)


class TransformerBlock(nn.Module):
    """One block: ``(B, T, D)`` -> ``(B, T, D)``; with ``return_weights`` also ``(B, H, T, T)``.

    Built from a :class:`BlockSpec`. Submodules: ``attn`` (:class:`~attnlab.attention.MultiHeadAttention`),
    ``ln1`` (around the attention), ``ff`` (:class:`FeedForward`), ``ln2`` (around the feed-forward).

    Example:
        >>> block = TransformerBlock(BlockSpec(d_model=16, num_heads=4, d_ff=32, norm="post"))
        >>> block(torch.randn(2, 5, 16)).shape
        torch.Size([2, 5, 16])
    """

    def __init__(self, spec: BlockSpec) -> None:
        super().__init__()
        if not isinstance(spec, BlockSpec):
            raise TypeError(f"{type(self).__name__}: spec must be a BlockSpec, got {type(spec).__name__}")
        self.spec, self.norm = spec, spec.norm
        self.attn = MultiHeadAttention.from_spec(spec.attention())
        self.ln1 = LayerNorm(spec.d_model, eps=spec.eps, bias=spec.bias)
        self.ff = FeedForward(spec.d_model, spec.d_ff, activation=spec.activation, dropout=spec.dropout,
                              bias=spec.bias)
        self.ln2 = LayerNorm(spec.d_model, eps=spec.eps, bias=spec.bias)
        self.dropout = nn.Dropout(spec.dropout)  # on the attention sublayer's output, as in the paper

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
