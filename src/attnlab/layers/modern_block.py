"""The block of today's open decoders (Llama, Qwen2, Mistral): GPT-2's pre-norm block with three parts replaced.

    x = x + Attn(RMSNorm(x))        grouped-query attention, RoPE on q and k, optionally a sliding window
    x = x + SwiGLU(RMSNorm(x))      the gated feed-forward

against GPT-2's ``x = x + Attn(LN(x)); x = x + FFN(LN(x))`` with learned positions added at the input. No biases
anywhere (Qwen2 keeps them on q, k and v), no position table: positions enter only as rotations of q and k.

Gemma 2 and 3 normalise each sublayer's output too ("sandwich" norms, ``sandwich=True``), with (1 + w) RMSNorms
(``unit_offset``) and a GELU gate (GeGLU, ``activation="gelu_tanh"``):

    x = x + RMSNorm(Attn(RMSNorm(x)))
    x = x + RMSNorm(GeGLU(RMSNorm(x)))
"""

from __future__ import annotations

from functools import partial
from typing import Any

from torch import Tensor, nn

from attnlab.attention.cache import LayerCache
from attnlab.attention.grouped_query import GroupedQueryAttention
from attnlab.functional import Backend
from attnlab.layers.rmsnorm import RMSNorm
from attnlab.layers.rotary import RotaryEmbedding
from attnlab.layers.swiglu import SwiGLU


class ModernBlock(nn.Module):
    """One pre-RMSNorm block: ``(B, T, D)`` -> ``(B, T, D)``; with ``return_weights`` also ``(B, H, T, L)``.

    Args:
        d_model: width D.
        num_heads: query heads.
        d_ff: SwiGLU hidden width.
        num_kv_heads: key/value heads (None: ``num_heads``); must divide ``num_heads``.
        head_dim: width of one head (None: ``d_model // num_heads``).
        rotary: the model's :class:`RotaryEmbedding`, shared by all blocks (None: no positions).
        sliding_window: keys seen per query, its own included (None: all before it).
        dropout: on the attention weights and on each sublayer's output, training mode only.
        qkv_bias: biases on q, k and v (Qwen2).
        out_bias: a bias on the attention's output projection.
        eps: RMSNorm epsilon.
        backend: attention backend.
        unit_offset: (1 + w) RMSNorms, Gemma's (every norm of the block, the q/k norms included).
        sandwich: also normalise each sublayer's output before it joins the residual stream (Gemma 2 and 3).
        activation: the feed-forward's gate, ``"silu"`` (SwiGLU) or ``"gelu_tanh"`` (GeGLU).
        mlp_bias: biases on the feed-forward's three projections.
        attention_options: more options of :class:`GroupedQueryAttention`: ``qk_norm``, ``softcap``, ``sinks``,
            ``scale``.

    Submodules: ``norm1`` (before the attention), ``attn`` (:class:`GroupedQueryAttention`), ``norm2`` and
    ``ff`` (:class:`SwiGLU`); with ``sandwich`` also ``post_attn_norm`` and ``post_ff_norm``.
    """

    def __init__(self, d_model: int, num_heads: int, d_ff: int, *, num_kv_heads: int | None = None,
                 head_dim: int | None = None, rotary: RotaryEmbedding | None = None, sliding_window: int | None = None,
                 dropout: float = 0.0, qkv_bias: bool = False, out_bias: bool = False, eps: float = 1e-5,
                 backend: Backend = "auto", unit_offset: bool = False, sandwich: bool = False,
                 activation: str = "silu", mlp_bias: bool = False, **attention_options: Any) -> None:
        super().__init__()
        norm = partial(RMSNorm, eps=eps, unit_offset=unit_offset)
        self.norm1 = norm(d_model)
        self.attn = GroupedQueryAttention(d_model, d_model, None, dropout, num_heads, qkv_bias,
                                          num_kv_heads=num_kv_heads, head_dim=head_dim, rotary=rotary,
                                          sliding_window=sliding_window, is_causal=True, out_bias=out_bias,
                                          backend=backend, make_norm=norm, **attention_options)
        self.norm2 = norm(d_model)
        self.ff = SwiGLU(d_model, d_ff, bias=mlp_bias, activation=activation)
        self.dropout = nn.Dropout(dropout)
        self.sandwich = sandwich
        if sandwich:
            self.post_attn_norm, self.post_ff_norm = norm(d_model), norm(d_model)

    def forward(self, x: Tensor, *, attn_mask: Tensor | None = None, positions: Tensor | None = None,
                return_weights: bool = False, kv_cache: LayerCache | None = None, head_mask: Tensor | None = None):
        """``x (B, T, D)``; a model's checked ``attn_mask`` and RoPE ``positions`` (see
        :meth:`GroupedQueryAttention.forward`); ``kv_cache`` for decoding; ``head_mask`` ``(num_heads,)``."""
        a = self.attn(self.norm1(x), attn_mask=attn_mask, positions=positions, return_weights=return_weights,
                      kv_cache=kv_cache, head_mask=head_mask)
        a, weights = a if return_weights else (a, None)
        if self.sandwich:
            a = self.post_attn_norm(a)
        x = x + self.dropout(a)
        f = self.ff(self.norm2(x))
        if self.sandwich:
            f = self.post_ff_norm(f)
        x = x + self.dropout(f)
        return (x, weights) if return_weights else x
