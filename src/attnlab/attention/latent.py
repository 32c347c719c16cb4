"""Multi-head latent attention, MLA (DeepSeek-V2, arXiv:2405.04434, §2.1; DeepSeek-V3, Kimi): every head has keys
and values of its own, yet a token leaves only one small vector in the cache.

Grouped-query attention shrinks the cache by sharing key/value heads. MLA shares something smaller: each token is
compressed into a *latent* ``c_kv`` of ``kv_lora_rank`` numbers (DeepSeek-V3: 512, for 128 heads of 128), and every
head's key and value are linear functions of it. Positions cannot pass through that compression (a rotation between
the down- and up-projection would not commute with them), so a small *decoupled* key of ``qk_rope_head_dim`` numbers
(64), shared by all heads, carries RoPE beside it:

    c_q            = RMSNorm(W_DQ x)                                  (B, T, q_lora_rank)   (or none: V2-Lite)
    q_nope, q_rope = split(W_UQ c_q)                                  (B, H, T, nope), (B, H, T, rope)
    c_kv, k_rope   = split(W_DKV x);  c_kv = RMSNorm(c_kv)            (B, T, kv_lora_rank), (B, 1, T, rope)
    q_rope, k_rope = RoPE(q_rope), RoPE(k_rope)                        the decoupled part, one key for every head
    k_nope, v      = split(W_UKV c_kv)                                (B, H, L, nope), (B, H, L, v_head_dim)
    scores_h       = (q_nope,h · k_nope,h + q_rope,h · k_rope) · scale
    out            = W_O concat_h(softmax(scores_h) v_h)

The checkpoints' names: ``q_a_proj`` = W_DQ, ``q_a_layernorm``, ``q_b_proj`` = W_UQ (``q_proj`` without a query
latent), ``kv_a_proj_with_mqa`` = [W_DKV; W_KR] (the latent and the rope key in one matrix), ``kv_a_layernorm``,
``kv_b_proj`` = [W_UK; W_UV] per head, and ``out_proj`` (their ``o_proj``). The cache keeps ``c_kv`` and the rotated
``k_rope``: ``kv_lora_rank + qk_rope_head_dim`` numbers per token per layer (DeepSeek-V3: 576, where multi-head
attention over the same 128 heads would keep 2 · 128 · 128 = 32,768; :class:`~attnlab.models.caches.LatentCache`).

**Absorbed decoding.** Up-projecting every cached latent into 128 heads' keys and values at every step would spend
what the small cache saved. The products regroup instead (the paper's "W_UK absorbed into W_UQ, W_UV into W_O"):

    q_nope,h · k_nope,h  = q_nope,h · (W_UK,h c_kv)  = (W_UK,hᵀ q_nope,h) · c_kv          a query in latent space
    Σ_j p_hj v_h,j       = W_UV,h (Σ_j p_hj c_kv,j)                                      values left as latents

so a step attends, for every head, straight over the cached latents: multi-query attention with one shared key
``[c_kv; k_rope]`` (``kv_lora_rank + qk_rope_head_dim`` wide) and one shared value ``c_kv``, the heads' own matrices
applied to the query before and to the context after. :meth:`LatentAttention.naive` is the textbook form,
:meth:`LatentAttention.absorbed` the regrouped one; they are equal (tests/attention/test_latent.py, ≤ 1e-5), and
:meth:`~LatentAttention.forward` runs the first without a cache and the second with one.

**Scale.** ``1/√(qk_nope_head_dim + qk_rope_head_dim)``, or the spec's ``scale``: under YaRN DeepSeek multiplies it
by ``mscale²``, ``mscale = 0.1 · mscale_all_dim · ln(factor) + 1`` (the model's config computes it:
:func:`mla_scale`).

**Rotary layout.** DeepSeek's checkpoints rotate neighbouring features ``(2i, 2i + 1)`` of the rope parts
(``rope_interleave``, the paper's layout); they are regrouped here as ``(evens, odds)`` and turned by the usual
rotate-half RoPE, the same rotation written in another order (transformers' ``apply_rotary_pos_emb_interleave``).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.attention.checks import as_batched, check_dropout, check_length, mask_heads, unbatch
from attnlab.attention.multihead import RotaryLike
from attnlab.functional import BACKENDS, and_masks, attend


def mla_scale(qk_head_dim: int, rope_scaling: dict[str, Any] | None = None) -> float:
    """The scores' factor of DeepSeek's MLA: ``1/√qk_head_dim``, times ``mscale²`` under a RoPE scaling that gives
    ``mscale_all_dim`` (YaRN: ``mscale = 0.1 · mscale_all_dim · ln(factor) + 1``, 1 when ``factor ≤ 1``), as
    DeepSeek's code and transformers' ``yarn_apply_mscale`` compute it."""
    scale = qk_head_dim ** -0.5
    if rope_scaling and rope_scaling.get("mscale_all_dim"):
        factor = rope_scaling["factor"]
        mscale = 1.0 if factor <= 1 else 0.1 * rope_scaling["mscale_all_dim"] * math.log(factor) + 1.0
        scale = scale * mscale * mscale
    return scale


@dataclass(frozen=True)
class LatentAttentionSpec:
    """Multi-head latent attention, all it is but its weights; ``spec.build(rotary)`` makes the module.

    Attributes:
        d_model: input and output width.
        num_heads: heads ``H``.
        kv_lora_rank: the latent's width (DeepSeek-V3: 512).
        qk_nope_head_dim: each head's query/key part without positions (128).
        qk_rope_head_dim: the decoupled, rotated part (64), shared by all heads on the key side; the ``rotary``
            given to ``build`` rotates heads of this width.
        v_head_dim: each head's value width (128).
        q_lora_rank: the query latent's width (1536); None: one projection ``q_proj`` (DeepSeek-V2-Lite).
        rope_interleave: the rope features pair as ``(2i, 2i + 1)`` (DeepSeek's checkpoints); False: ``(i, i + R/2)``.
        scale: the scores' factor (None: ``1/√(qk_nope_head_dim + qk_rope_head_dim)``; see :func:`mla_scale`).
        latent_eps: the epsilon of the two latents' RMSNorms (DeepSeek: 1e-6, whatever the model's ``rms_norm_eps``).
        make_norm: ``(width, eps) -> module``, the latents' RMSNorms (a model passes attnlab's
            :class:`~attnlab.layers.RMSNorm`; None: ``torch.nn.RMSNorm``, the same function); not compared.
        bias: biases on ``q_a_proj``, ``kv_a_proj_with_mqa`` and ``out_proj`` (transformers' ``attention_bias``).
        dropout: on the attention weights, training mode only.
        context_length: the longest sequence accepted, cache included (None: no limit).
        backend: the attention kernel (:func:`attnlab.functional.scaled_dot_product_attention`).
        owner: the name errors begin with; not compared.
    """

    d_model: int
    num_heads: int
    kv_lora_rank: int
    qk_nope_head_dim: int
    qk_rope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None = None
    rope_interleave: bool = True
    scale: float | None = None
    latent_eps: float = 1e-6
    bias: bool = False
    dropout: float = 0.0
    context_length: int | None = None
    backend: str = "auto"
    make_norm: Callable[..., nn.Module] | None = field(default=None, compare=False, repr=False)
    owner: str = field(default="LatentAttentionSpec", compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = self.owner
        for name in ("d_model", "num_heads", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            check_positive_int(owner, name, getattr(self, name))
        if self.q_lora_rank is not None:
            check_positive_int(owner, "q_lora_rank", self.q_lora_rank)
        if self.qk_rope_head_dim % 2:
            raise ValueError(f"{owner}: qk_rope_head_dim must be even (RoPE turns pairs), got {self.qk_rope_head_dim}")
        if self.context_length is not None:
            check_positive_int(owner, "context_length", self.context_length)
        for name in ("scale", "latent_eps"):
            value = getattr(self, name)
            if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                                      or not math.isfinite(value) or value <= 0):
                raise ValueError(f"{owner}: {name} must be a finite number > 0, got {value!r}")
        check_dropout(owner, self.dropout)
        if self.backend not in BACKENDS:
            raise ValueError(f"{owner}: backend must be one of {BACKENDS}, got {self.backend!r}")

    @property
    def d_in(self) -> int:
        """The input width, ``d_model`` (what a block reads of any attention's spec)."""
        return self.d_model

    @property
    def qk_head_dim(self) -> int:
        """A head's query and key width: ``qk_nope_head_dim + qk_rope_head_dim``."""
        return self.qk_nope_head_dim + self.qk_rope_head_dim

    @property
    def cache_widths(self) -> tuple[int, ...]:
        """What a token leaves in the cache, part by part: the latent's ``kv_lora_rank`` and the rope key's
        ``qk_rope_head_dim`` numbers (per layer, whatever the heads)."""
        return (self.kv_lora_rank, self.qk_rope_head_dim)

    def replace(self, **changes: Any) -> LatentAttentionSpec:
        """This spec with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)

    def build(self, rotary: RotaryLike | None = None) -> LatentAttention:
        """The module this spec describes, its rope part turned by ``rotary`` (the model's, shared by its layers)."""
        return LatentAttention(self, rotary)


class LatentLayerCache(Protocol):
    """What MLA asks of one layer of its cache (:class:`attnlab.models.caches.LatentLayerCache` is one): the
    :class:`~attnlab.attention.cache.LayerCache` protocol with the latents in place of keys and values."""

    length: int

    def update(self, latent: Tensor, rope_key: Tensor,
               index_key: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Keep this step's ``latent (B, T, kv_lora_rank)`` and ``rope_key (B, T, qk_rope_head_dim)`` (and a sparse
        layer's ``index_key``); return all so far, ``(B, L, ·)`` each (``index_key``'s too, or None)."""
        ...

    def attn_mask(self, t_new: int, is_causal: bool, window: int | None = None) -> Tensor | None: ...

    def positions(self, t_new: int) -> Tensor: ...

    def select_keys(self, key_mask: Tensor | None) -> Tensor | None: ...


def deinterleave(x: Tensor) -> Tensor:
    """``(..., R)`` -> its features ``(0, 2, 4, ..., 1, 3, 5, ...)``: pairs ``(2i, 2i + 1)`` become ``(i, i + R/2)``,
    the pairs rotate-half RoPE turns together."""
    return torch.cat((x[..., 0::2], x[..., 1::2]), dim=-1)


class LatentAttention(nn.Module):
    """Causal multi-head latent attention: ``x (B, T, d_model)`` -> ``(B, T, d_model)``; with ``return_weights`` also
    the weights ``(B, H, T, L)`` (the same in both forms).

    ``LatentAttention(spec, rotary=None)``: a :class:`LatentAttentionSpec` and the model's rotary embedding for heads
    of ``qk_rope_head_dim`` (None: no positions). Called as the one attention module is, ``forward(x, *,
    attn_mask=None, positions=None, return_weights=False, kv_cache=None, head_mask=None)``: ``attn_mask`` a model's
    checked mask broadcastable to ``(B, H, T, L)`` (its key padding), ``positions (T,)`` or ``(B, T)``, ``kv_cache``
    one layer of a :class:`~attnlab.models.caches.LatentCache`, ``head_mask (H,)``.

    Example:
        >>> spec = LatentAttentionSpec(64, num_heads=4, kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=4,
        ...                            v_head_dim=8, q_lora_rank=24)
        >>> mla = spec.build()
        >>> mla(torch.randn(2, 5, 64)).shape
        torch.Size([2, 5, 64])
        >>> mla.kv_a_proj_with_mqa.weight.shape          # one latent of 16 and one rope key of 4 per token
        torch.Size([20, 64])
    """

    def __init__(self, spec: LatentAttentionSpec, rotary: RotaryLike | None = None) -> None:
        super().__init__()
        if not isinstance(spec, LatentAttentionSpec):
            raise TypeError(f"LatentAttention: spec must be a LatentAttentionSpec, got {type(spec).__name__}")
        if rotary is not None and getattr(rotary, "head_dim", None) != spec.qk_rope_head_dim:
            raise ValueError(f"{spec.owner}: rotary must rotate heads of width "
                             f"qk_rope_head_dim={spec.qk_rope_head_dim}, got one for "
                             f"head_dim={getattr(rotary, 'head_dim', None)!r}")
        self.spec, self.rotary = spec, rotary
        s = spec
        self.num_heads, self.is_causal, self.sliding_window = s.num_heads, True, None
        self.nope, self.rope, self.v_head_dim, self.rank = s.qk_nope_head_dim, s.qk_rope_head_dim, s.v_head_dim, \
            s.kv_lora_rank
        self.scale = s.qk_head_dim ** -0.5 if s.scale is None else float(s.scale)
        norm = s.make_norm or nn.RMSNorm
        heads_qk = s.num_heads * s.qk_head_dim
        if s.q_lora_rank is None:
            self.q_proj = nn.Linear(s.d_model, heads_qk, bias=False)
        else:
            self.q_a_proj = nn.Linear(s.d_model, s.q_lora_rank, bias=s.bias)        # W_DQ: down to the query latent
            self.q_a_layernorm = norm(s.q_lora_rank, eps=s.latent_eps)
            self.q_b_proj = nn.Linear(s.q_lora_rank, heads_qk, bias=False)         # W_UQ: up to every head
        self.kv_a_proj_with_mqa = nn.Linear(s.d_model, s.kv_lora_rank + s.qk_rope_head_dim, bias=s.bias)
        self.kv_a_layernorm = norm(s.kv_lora_rank, eps=s.latent_eps)
        self.kv_b_proj = nn.Linear(s.kv_lora_rank, s.num_heads * (s.qk_nope_head_dim + s.v_head_dim), bias=False)
        self.out_proj = nn.Linear(s.num_heads * s.v_head_dim, s.d_model, bias=s.bias)
        self.dropout = nn.Dropout(s.dropout)

    # --- the steps, in order -------------------------------------------------------------------------------------

    def query_latent(self, x: Tensor) -> Tensor | None:
        """``c_q = RMSNorm(W_DQ x)`` ``(B, T, q_lora_rank)``; None without a query latent (the sparse indexer reads
        it too)."""
        return self.q_a_layernorm(self.q_a_proj(x)) if self.spec.q_lora_rank is not None else None

    def queries(self, x: Tensor, c_q: Tensor | None) -> tuple[Tensor, Tensor]:
        """Every head's query, split: ``q_nope (B, H, T, nope)`` and ``q_rope (B, H, T, rope)`` (not yet rotated)."""
        q = self.q_proj(x) if c_q is None else self.q_b_proj(c_q)              # (B, T, H · (nope + rope))
        q = q.view(*x.shape[:2], self.num_heads, -1).transpose(1, 2)          # (B, H, T, nope + rope)
        return q.split([self.nope, self.rope], dim=-1)

    def latents(self, x: Tensor) -> tuple[Tensor, Tensor]:
        """What a token leaves in the cache: ``c_kv (B, T, kv_lora_rank)``, normalised, and the rope key
        ``(B, T, rope)`` (not yet rotated)."""
        c_kv, k_rope = self.kv_a_proj_with_mqa(x).split([self.rank, self.rope], dim=-1)
        return self.kv_a_layernorm(c_kv), k_rope

    def rotate(self, q_rope: Tensor, k_rope: Tensor, positions: Tensor) -> tuple[Tensor, Tensor]:
        """RoPE on the decoupled parts: ``q_rope (B, H, T, rope)``, ``k_rope (B, T, rope)`` -> the same, rotated."""
        if self.rotary is None:
            return q_rope, k_rope
        if self.spec.rope_interleave:
            q_rope, k_rope = deinterleave(q_rope), deinterleave(k_rope)
        q_rope, k_rope = self.rotary.apply(q_rope, k_rope[:, None], positions)
        return q_rope, k_rope[:, 0]

    def naive(self, q_nope: Tensor, q_rope: Tensor, c_kv: Tensor, k_rope: Tensor, mask: Tensor | None,
              is_causal: bool, return_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """The textbook form: every head's keys and values up-projected from the latents, then attention.

        ``q_nope (B, H, T, nope)``, ``q_rope (B, H, T, rope)``, ``c_kv (B, L, kv_lora_rank)``, ``k_rope (B, L, rope)``
        -> contexts ``(B, H, T, v_head_dim)`` and, if asked, weights ``(B, H, T, L)``.
        """
        keys, values = self.keys_and_values(c_kv, k_rope)                                  # every head's, (B, H, L, ·)
        queries = torch.cat([q_nope, q_rope], dim=-1)                                      # (B, H, T, nope + rope)
        return self.attend(queries, keys, values, mask, is_causal, return_weights)

    def keys_and_values(self, c_kv: Tensor, k_rope: Tensor) -> tuple[Tensor, Tensor]:
        """Every head's keys and values from the latents: ``c_kv (B, L, kv_lora_rank)``, ``k_rope (B, L, rope)`` ->
        keys ``(B, H, L, nope + rope)`` (the rope key shared by every head) and values ``(B, H, L, v_head_dim)``."""
        b, length, _ = c_kv.shape
        kv = self.kv_b_proj(c_kv).view(b, length, self.num_heads, -1).transpose(1, 2)  # (B, H, L, nope + v)
        k_nope, values = kv.split([self.nope, self.v_head_dim], dim=-1)
        return torch.cat([k_nope, k_rope[:, None].expand(-1, self.num_heads, -1, -1)], dim=-1), values

    def scored_heads(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        """For one sequence ``x (T, d_model)`` at positions 0..T−1: every head's queries, keys and values as the
        textbook form's scores see them, ``(H, T, nope + rope)``, ``(H, T, nope + rope)``, ``(H, T, v_head_dim)``:
        what :func:`attnlab.inspect.capture` records, so that ``explain`` works through a head of MLA."""
        x = x[None]
        q_nope, q_rope = self.queries(x, self.query_latent(x))
        c_kv, k_rope = self.latents(x)
        q_rope, k_rope = self.rotate(q_rope, k_rope, torch.arange(x.shape[1], device=x.device))
        keys, values = self.keys_and_values(c_kv, k_rope)
        return torch.cat([q_nope, q_rope], dim=-1)[0], keys[0], values[0]

    def absorbed(self, q_nope: Tensor, q_rope: Tensor, c_kv: Tensor, k_rope: Tensor, mask: Tensor | None,
                 is_causal: bool, return_weights: bool = False) -> tuple[Tensor, Tensor | None]:
        """The same, regrouped: ``W_UK`` folded into the query, ``W_UV`` applied to the context; attention runs over
        the latents themselves, one key/value head for all ``H`` (arguments and results: :meth:`naive`)."""
        w = self.kv_b_proj.weight.view(self.num_heads, self.nope + self.v_head_dim, self.rank)
        w_uk, w_uv = w.split([self.nope, self.v_head_dim], dim=1)               # (H, nope, C), (H, v, C)
        q_latent = torch.einsum("bhtn,hnc->bhtc", q_nope, w_uk)                 # (B, H, T, C): W_UKᵀ q_nope
        queries = torch.cat([q_latent, q_rope], dim=-1)                         # (B, H, T, C + rope)
        keys = torch.cat([c_kv, k_rope], dim=-1)[:, None]                       # (B, 1, L, C + rope): shared by all
        context, weights = self.attend(queries, keys, c_kv[:, None], mask, is_causal, return_weights,
                                       enable_gqa=self.num_heads > 1)           # (B, H, T, C): Σ_j p_j c_kv,j
        return torch.einsum("bhtc,hvc->bhtv", context, w_uv), weights           # (B, H, T, v): W_UV times it

    def attend(self, queries: Tensor, keys: Tensor, values: Tensor, mask: Tensor | None, is_causal: bool,
               return_weights: bool, enable_gqa: bool = False) -> tuple[Tensor, Tensor | None]:
        """softmax(q kᵀ · scale) v by the spec's backend (the scale is MLA's, not the keys' width's)."""
        return attend(queries, keys, values, attn_mask=mask, is_causal=is_causal,
                      dropout_p=self.dropout.p if self.training else 0.0, scale=self.scale, enable_gqa=enable_gqa,
                      backend=self.spec.backend, return_weights=return_weights)

    # --- the call ------------------------------------------------------------------------------------------------

    def forward(self, x: Tensor, *, attn_mask: Tensor | None = None, positions: Tensor | None = None,
                return_weights: bool = False, kv_cache: LatentLayerCache | None = None,
                head_mask: Tensor | None = None):
        """Attend causally over ``x`` (after what ``kv_cache`` holds); arguments and shapes: the class docstring."""
        owner = type(self).__name__
        x, unbatched = as_batched(x, self.spec.d_model, owner)                # (B, T, d_model)
        t = x.shape[1]
        c_q = self.query_latent(x)
        q_nope, q_rope = self.queries(x, c_q)                                  # (B, H, T, nope), (B, H, T, rope)
        c_kv, k_rope = self.latents(x)                                         # (B, T, C), (B, T, rope)
        if positions is None:
            positions = torch.arange(t, device=x.device) if kv_cache is None else kv_cache.positions(t)
        q_rope, k_rope = self.rotate(q_rope, k_rope, positions)
        form = self.naive
        if kv_cache is not None:  # decoding: every latent so far, attended in latent space
            c_kv, k_rope = kv_cache.update(c_kv, k_rope)[:2]
            form = self.absorbed
        mask, is_causal = self.visible(attn_mask, t, c_kv.shape[1], kv_cache)
        context, weights = form(q_nope, q_rope, c_kv, k_rope, mask, is_causal, return_weights)   # (B, H, T, v)
        return self.merge(context, weights, head_mask, unbatched, return_weights)

    def visible(self, mask: Tensor | None, t: int, length: int,
                kv_cache: LatentLayerCache | None) -> tuple[Tensor | None, bool]:
        """Which of the ``length`` keys each of the ``t`` queries sees: the model's padding ``mask`` and causality
        (the kernel's own, top-left, without a cache; the cache's, bottom-right, with one)."""
        check_length(length, self.spec.context_length, type(self).__name__)
        if kv_cache is None:
            return mask, True
        if mask is not None:
            mask = kv_cache.select_keys(mask)
        return and_masks(mask, kv_cache.attn_mask(t, True)), False

    def merge(self, context: Tensor, weights: Tensor | None, head_mask: Tensor | None, unbatched: bool,
              return_weights: bool):
        """The heads' contexts ``(B, H, T, v)`` side by side, through ``out_proj``: ``(B, T, d_model)``."""
        b, _, t, _ = context.shape
        context = mask_heads(context, head_mask, type(self).__name__)
        out = self.out_proj(context.transpose(1, 2).reshape(b, t, -1))
        return unbatch(out, weights, unbatched, return_weights) if unbatched or return_weights else out

    def extra_repr(self) -> str:
        s = self.spec
        q = f"q_lora_rank={s.q_lora_rank}, " if s.q_lora_rank is not None else ""
        return (f"d_model={s.d_model}, num_heads={s.num_heads}, {q}kv_lora_rank={s.kv_lora_rank}, "
                f"qk_nope_head_dim={s.qk_nope_head_dim}, qk_rope_head_dim={s.qk_rope_head_dim}, "
                f"v_head_dim={s.v_head_dim}, scale={self.scale:.6g}")
