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

import dataclasses
from dataclasses import dataclass
from functools import partial
from typing import Any, Protocol

from torch import Tensor, nn

from attnlab.arguments import check_positive_int, expect_one_of
from attnlab.attention.cache import LayerCache
from attnlab.attention.grouped_query import GroupedQueryAttention
from attnlab.attention.spec import AttentionSpec
from attnlab.layers.rmsnorm import RMSNorm
from attnlab.layers.rotary import RotaryEmbedding
from attnlab.layers.swiglu import GATES, SwiGLU


class AttentionKind(Protocol):
    """What a block reads of another kind of attention's spec (a latent or a linear attention's): its input width,
    its q/k norm (None where it has none) and ``build(rotary)``."""

    @property
    def d_in(self) -> int: ...

    @property
    def qk_norm(self) -> str | None: ...

    def build(self, rotary: Any = None) -> nn.Module: ...


@dataclass(frozen=True)
class ModernBlockSpec:
    """One block of today's decoders: its attention (an :class:`~attnlab.attention.spec.AttentionSpec`, causal,
    width ``d_model``), its gated feed-forward and its norms.

    Attributes:
        attention: the attention's spec (grouped key/value heads, window, QK-norm, soft-cap, sinks, scale).
        d_ff: the gated feed-forward's hidden width.
        activation: the feed-forward's gate, ``"silu"`` (SwiGLU) or ``"gelu_tanh"`` (GeGLU).
        mlp_bias: biases on the feed-forward's three projections.
        eps: RMSNorm epsilon.
        unit_offset: (1 + w) RMSNorms, Gemma's (every norm of the block, the q/k norms included).
        sandwich: also normalise each sublayer's output before it joins the residual stream (Gemma 2 and 3).
        dropout: on each sublayer's output, training mode only (the attention's own is the spec's).
        ff: another feed-forward's spec, with ``build()`` (a mixture of experts); None: the gated network above.

    Any spec of attention with ``build(rotary)`` may stand as ``attention`` (an ``AttentionSpec`` is the one attention
    module's; a latent or linear attention builds its own), as long as its module is called as that one is.
    """

    attention: AttentionSpec | AttentionKind
    d_ff: int
    activation: str = "silu"
    mlp_bias: bool = False
    eps: float = 1e-5
    unit_offset: bool = False
    sandwich: bool = False
    dropout: float = 0.0
    ff: Any = None

    def __post_init__(self) -> None:
        check_positive_int("ModernBlockSpec", "d_ff", self.d_ff)
        expect_one_of("ModernBlockSpec: activation", self.activation, tuple(GATES))
        if isinstance(self.attention, AttentionSpec) and self.attention.qk_norm is not None \
                and self.attention.make_norm is None:  # the block's own norms
            object.__setattr__(self, "attention", dataclasses.replace(self.attention, make_norm=self.make_norm))

    @property
    def d_model(self) -> int:
        return self.attention.d_in

    def make_norm(self, width: int) -> RMSNorm:
        """An RMSNorm of ``width`` as every norm of the block is."""
        return RMSNorm(width, eps=self.eps, unit_offset=self.unit_offset)


class ModernBlock(nn.Module):
    """One pre-RMSNorm block: ``(B, T, D)`` -> ``(B, T, D)``; with ``return_weights`` also ``(B, H, T, L)``.

    ``ModernBlock(spec, rotary=None)``: a :class:`ModernBlockSpec` and the model's :class:`RotaryEmbedding`, shared
    by all blocks (None: no positions).

    Submodules: ``norm1`` (before the attention), ``attn`` (:class:`GroupedQueryAttention`, or what the spec's
    attention builds), ``norm2`` and ``ff`` (:class:`SwiGLU`, or what ``spec.ff`` builds); with ``sandwich`` also
    ``post_attn_norm`` and ``post_ff_norm``.

    Example:
        >>> spec = ModernBlockSpec(AttentionSpec(32, 32, num_heads=4, num_kv_heads=2, out_bias=False), d_ff=88)
        >>> ModernBlock(spec)(torch.randn(2, 5, 32)).shape
        torch.Size([2, 5, 32])
    """

    def __init__(self, spec: ModernBlockSpec, rotary: RotaryEmbedding | None = None) -> None:
        super().__init__()
        if not isinstance(spec, ModernBlockSpec):
            raise TypeError(f"ModernBlock: spec must be a ModernBlockSpec, got {type(spec).__name__}")
        self.spec = spec
        norm = partial(RMSNorm, eps=spec.eps, unit_offset=spec.unit_offset)
        self.norm1 = norm(spec.d_model)
        attention = spec.attention  # the one attention module, or another kind's own (its spec builds it)
        self.attn = GroupedQueryAttention(attention, rotary) if isinstance(attention, AttentionSpec) else \
            attention.build(rotary)
        self.norm2 = norm(spec.d_model)
        self.ff = spec.ff.build() if spec.ff is not None else \
            SwiGLU(spec.d_model, spec.d_ff, bias=spec.mlp_bias, activation=spec.activation)
        self.dropout = nn.Dropout(spec.dropout)
        self.sandwich = spec.sandwich
        if spec.sandwich:
            self.post_attn_norm, self.post_ff_norm = norm(spec.d_model), norm(spec.d_model)

    def forward(self, x: Tensor, *, attn_mask: Tensor | None = None, positions: Tensor | None = None,
                return_weights: bool = False, kv_cache: LayerCache | None = None, head_mask: Tensor | None = None):
        """``x (B, T, D)``; a model's checked ``attn_mask`` and RoPE ``positions`` (see
        :meth:`~attnlab.attention.MultiHeadAttention.forward`); ``kv_cache`` for decoding; ``head_mask``
        ``(num_heads,)``."""
        a = self.attn(self.norm1(x), attn_mask=attn_mask, positions=positions, return_weights=return_weights,
                      kv_cache=kv_cache, head_mask=head_mask)
        a, weights = a if return_weights else (a, None)
        if self.sandwich:
            a = self.post_attn_norm(a)
        x = x + (self.dropout(a) if self.training else a)
        f = self.ff(self.norm2(x))
        if self.sandwich:
            f = self.post_ff_norm(f)
        x = x + (self.dropout(f) if self.training else f)
        return (x, weights) if return_weights else x
