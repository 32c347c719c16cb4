"""Gemma 4 (text; transformers' ``Gemma4ForCausalLM``, ``model_type`` ``gemma4_text``): Gemma 3's decoder with
its attention made cheaper to keep, and a second embedding that feeds every layer.

    idx -> √d · embedding ──────────────────────────────┐
        └> per-layer inputs (B, T, L, d_layer_input) ──┐ │
                                                       v v
    N blocks:  x += RMSNorm(Attn(RMSNorm(x)))                      sliding or global attention, scale 1
               x += RMSNorm(GeGLU(RMSNorm(x)))
               x += RMSNorm(W_proj(gelu(W_gate x) ⊙ input_l))   the layer's own per-layer input
               x *= layer_scalar
    -> RMSNorm -> head -> cap · tanh(z / cap)

What is new against Gemma 3 (:mod:`attnlab.models.modern.options`), each a field of :class:`Gemma4Config`:

=================================  ================================================================================
the global layers' own heads       ``global_head_dim`` (512 against the sliding layers' 256) and
                                   ``num_global_kv_heads`` (transformers' ``per_layer_config``)
``k_eq_v``                         a global layer's values are its key projection (no ``W_value``): the values are
                                   the keys before their norm and RoPE, normalised on their own
shared-KV layers                   the last ``num_kv_shared_layers`` layers compute no keys: each attends to the
                                   keys, values and mask of the last earlier layer of its kind
                                   (:mod:`attnlab.attention.shared_kv`), so the cache holds only the layers before
                                   them (:class:`~attnlab.models.caches.layered.LayeredKVCache`); with
                                   ``double_wide_mlp`` those layers' feed-forward is twice as wide
proportional RoPE                  the global layers turn only ``global_rope_fraction`` of their pairs (0.25), at the
                                   whole head's frequencies (:mod:`attnlab.layers.proportional_rope`); the sliding
                                   layers' RoPE is plain, with its own base
scale 1, q/k/v norms               no 1/√d: the queries and keys are RMS-normalised per head (with a weight, ``w·x``,
                                   not Gemma 3's ``(1 + w)·x``), and so are the values (without a weight)
per-layer inputs                   ``d_layer_input``: a table of ``num_layers · d_layer_input`` numbers per token,
                                   √d_layer_input times the token's row, plus a normalised projection of the
                                   embedding, the sum times 1/√2; block l gates its slice into the residual stream
``layer_scalar``                   each block's output times a scalar of its own (stored in the checkpoint)
=================================  ================================================================================

The norms are plain ``w·x`` RMSNorms (``norm_unit_offset=False``) whose gain multiplies in float32 before the cast
back (:class:`Gemma4RMSNorm`: in bf16 a quarter of Llama's order's outputs round differently); the final logits are
soft-capped (``final_softcap``). Not here: the mixture-of-experts layers (``enable_moe_block``) and bidirectional
attention, refused by the loader by name.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar, cast

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.attention.shared_kv import SharedKV, SharedKVAttention, SharedKVAttentionSpec
from attnlab.attention.spec import AttentionSpec
from attnlab.i18n import tr
from attnlab.layers import ModernBlock, ModernBlockSpec, RMSNorm, RotaryEmbedding
from attnlab.layers.proportional_rope import ProportionalRotaryEmbedding
from attnlab.layers.swiglu import GATES
from attnlab.models.caches import CacheLayout, CacheShape, KVCache, StaticKVCache, compute_dtype
from attnlab.models.caches.layered import LayeredKVCache
from attnlab.models.caches.shape import layout_of
from attnlab.models.caches.size import KeysAndValues, LayerCacheSize
from attnlab.models.language_model import LanguageModel
from attnlab.models.modern.decoder import ModernDecoder, ModernDecoderConfig
from attnlab.models.modern.options import is_sliding

#: transformers' default pattern: five sliding layers, then a global one
_DEFAULT_TYPES = (["sliding_attention"] * 5 + ["full_attention"]) * 5


class Gemma4RMSNorm(RMSNorm):
    """An :class:`~attnlab.layers.RMSNorm` whose gain ``w`` multiplies the float32 normalised vector before it is
    cast back, as Gemma 4's checkpoints were trained (Llama's order casts first, then multiplies): ``(..., D)`` ->
    ``(..., D)``, the same in float32, different roundings in bf16."""

    def forward(self, x: Tensor) -> Tensor:
        if self.unit_offset or not self.fused:  # Gemma 3's (1 + w) is in float32 already; the formula: _gain
            return super().forward(x)
        if x.shape[-1] != self.d_model:
            raise ValueError(f"Gemma4RMSNorm: x must have last dim {self.d_model}, got shape {tuple(x.shape)}")
        return (F.rms_norm(x.float(), (self.d_model,), None, self.eps) * self.weight.float()).to(x.dtype)

    def _gain(self, normed: Tensor, dtype: torch.dtype) -> Tensor:
        return super()._gain(normed, dtype) if self.unit_offset else (normed * self.weight.float()).to(dtype)


@dataclass
class Gemma4Config(ModernDecoderConfig):
    """Gemma 4's decoder (see the module docstring), on the fields of :class:`~attnlab.models.ModernDecoderConfig`:
    ``num_kv_heads`` and ``head_dim`` are the sliding layers', ``rope_base`` (and ``rope_scaling``, linear at most)
    the global layers' and ``rope_local_base`` the sliding layers'.

    Args:
        global_head_dim: the global layers' head size (None: ``head_dim``).
        num_global_kv_heads: the global layers' key/value heads (None: ``num_kv_heads``).
        k_eq_v: the global layers' values are their key projection (transformers' ``attention_k_eq_v``).
        num_kv_shared_layers: how many of the last layers read an earlier layer's keys and values instead of
            computing their own; each kind of layer among them needs one of its kind before them.
        double_wide_mlp: the shared-KV layers' feed-forward is ``2 · d_ff`` wide.
        d_layer_input: the width of each layer's per-layer input (transformers' ``hidden_size_per_layer_input``);
            0: none.
        global_rope_fraction: the share of a global head's pairs that RoPE turns (proportional RoPE; 1: all).
    """

    qk_norm: str | None = "head"
    norm_eps: float = 1e-6
    tie_weights: bool = True
    sandwich_norm: bool = True
    activation: str = "gelu_tanh"
    embed_scale: bool = True
    global_head_dim: int | None = None
    num_global_kv_heads: int | None = None
    k_eq_v: bool = False
    num_kv_shared_layers: int = 0
    double_wide_mlp: bool = False
    d_layer_input: int = 0
    global_rope_fraction: float = 1.0

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # every part of Gemma 4 at the baby's scale: 6 layers (two sliding, one global, twice), the last two sharing
        # the keys of layers 3 and 2, global heads of 64 over 1 key/value head with k_eq_v, per-layer inputs of 16
        "baby": dict(vocab_size=256, context_length=64, d_model=128, num_layers=6, num_heads=4, num_kv_heads=2,
                     head_dim=32, global_head_dim=64, num_global_kv_heads=1, k_eq_v=True, d_ff=256,
                     sliding_window=16, layer_types=["sliding_attention"] * 2 + ["full_attention"]
                     + ["sliding_attention"] * 2 + ["full_attention"], rope_base=1000000.0, rope_local_base=10000.0,
                     global_rope_fraction=0.25, num_kv_shared_layers=2, double_wide_mlp=True, d_layer_input=16,
                     final_softcap=30.0),
        # transformers' Gemma4TextConfig() as it stands (its defaults, "similar to google/gemma-4-e2b-it"): 30 layers
        # of 2304, 8 heads over 4 (heads of 256; 512 in the global layers, 4 key/value heads), d_ff 9216, window 512,
        # five sliding layers to one global, proportional RoPE over a quarter of the global pairs, per-layer inputs
        # of 256, vocab 262,144, no shared-KV layers, no k_eq_v, no soft-cap
        "gemma-4-text": dict(vocab_size=262144, context_length=131072, d_model=2304, num_layers=30, num_heads=8,
                             num_kv_heads=4, head_dim=256, global_head_dim=512, d_ff=9216, sliding_window=512,
                             layer_types=_DEFAULT_TYPES, rope_base=1000000.0, rope_local_base=10000.0,
                             global_rope_fraction=0.25, d_layer_input=256),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        if self.global_head_dim is None:
            self.global_head_dim = self.head_dim
        if self.num_global_kv_heads is None:
            self.num_global_kv_heads = self.num_kv_heads
        for name in ("global_head_dim", "num_global_kv_heads"):
            check_positive_int(owner, name, getattr(self, name), tr)
        assert self.global_head_dim is not None and self.num_global_kv_heads is not None  # filled and checked
        if self.global_head_dim % 2:
            raise ValueError(tr("{owner}: global_head_dim must be even (RoPE rotates pairs of features), got "
                                "{global_head_dim}", owner=owner, global_head_dim=self.global_head_dim))
        if self.num_heads % self.num_global_kv_heads:
            raise ValueError(tr("{owner}: num_heads must be divisible by num_global_kv_heads, got num_heads="
                                "{num_heads}, num_global_kv_heads={num_global_kv_heads}", owner=owner,
                                num_heads=self.num_heads, num_global_kv_heads=self.num_global_kv_heads))
        if isinstance(self.d_layer_input, bool) or not isinstance(self.d_layer_input, int) or self.d_layer_input < 0:
            raise ValueError(tr("{owner}: d_layer_input must be an int >= 0 (0: no per-layer inputs), got {value!r}",
                                owner=owner, value=self.d_layer_input))
        f = self.global_rope_fraction
        if isinstance(f, bool) or not isinstance(f, int | float) or not math.isfinite(f) or not 0 < f <= 1:
            raise ValueError(tr("{owner}: global_rope_fraction must be a number in (0, 1] (the share of a global "
                                "head's pairs that RoPE turns), got {value!r}", owner=owner, value=f))
        if f < 1 and self.rope_scaling is not None and self.rope_scaling.get("type") != "linear":
            raise ValueError(tr("{owner}: proportional RoPE (global_rope_fraction={fraction}) scales linearly or not "
                                "at all, got rope_scaling={rope_scaling!r}", owner=owner, fraction=f,
                                rope_scaling=self.rope_scaling))
        self._check_sharing(owner)

    def _check_sharing(self, owner: str) -> None:
        n = self.num_kv_shared_layers
        if isinstance(n, bool) or not isinstance(n, int) or not 0 <= n < self.num_layers:
            raise ValueError(tr("{owner}: num_kv_shared_layers must be an int in [0, num_layers={num_layers}) (the "
                                "first layer computes keys), got {value!r}", owner=owner, num_layers=self.num_layers,
                                value=n))
        for layer in range(self.first_shared_layer, self.num_layers):
            if self.kv_owner(layer) is None:
                raise ValueError(tr("{owner}: layer {layer} shares the keys of the last earlier layer of its kind "
                                    "({kind}), but none of the first {first} layers is one", owner=owner, layer=layer,
                                    kind=self.kind(layer), first=self.first_shared_layer))

    def kind(self, layer: int) -> str:
        """``"sliding_attention"`` or ``"full_attention"`` (transformers' names)."""
        return "sliding_attention" if is_sliding(self, layer) else "full_attention"

    @property
    def first_shared_layer(self) -> int:
        """The first layer that reads another's keys; the layers before it own theirs (and the cache's layers)."""
        return self.num_layers - self.num_kv_shared_layers

    def kv_owner(self, layer: int) -> int | None:
        """The layer whose keys and values ``layer`` attends to: the last one of its kind before the shared ones
        (None: ``layer`` computes its own)."""
        if layer < self.first_shared_layer:
            return None
        same = [i for i in range(self.first_shared_layer) if self.kind(i) == self.kind(layer)]
        return same[-1] if same else None

    def rotary_embedding(self) -> RotaryEmbedding:
        """The global layers' RoPE: over their own head size, proportional where ``global_rope_fraction < 1``."""
        assert self.global_head_dim is not None  # __post_init__ fills it
        if self.global_rope_fraction < 1:
            return ProportionalRotaryEmbedding(self.global_head_dim, self.context_length, self.rope_base,
                                               self.global_rope_fraction, self.rope_scaling)
        return RotaryEmbedding(self.global_head_dim, self.context_length, self.rope_base, self.rope_scaling)

    def layer_spec(self, layer: int) -> ModernBlockSpec:
        """Layer ``layer``'s block: its kind's heads and window, scale 1, the q/k/v norms, ``k_eq_v`` on a global
        layer, no keys of its own on a shared-KV layer (whose feed-forward ``double_wide_mlp`` doubles)."""
        sliding, shared = is_sliding(self, layer), self.kv_owner(layer) is not None
        attention = AttentionSpec(
            self.d_model, self.d_model, self.num_heads,
            num_kv_heads=self.num_kv_heads if sliding else self.num_global_kv_heads,
            head_dim=self.head_dim if sliding else self.global_head_dim, dropout=self.dropout,
            qkv_bias=self.qkv_bias, out_bias=self.out_bias, scale=1.0,
            sliding_window=self.sliding_window if sliding else None, qk_norm=self.qk_norm,
            make_norm=partial(Gemma4RMSNorm, eps=self.norm_eps, unit_offset=self.norm_unit_offset),
            softcap=self.attn_softcap, backend=self.backend, owner="SharedKVAttention")
        spec = SharedKVAttentionSpec(attention, value_norm_eps=self.norm_eps,
                                     k_eq_v=self.k_eq_v and not sliding and not shared, kv_shared=shared)
        assert self.d_ff is not None  # __post_init__ fills it
        d_ff = self.d_ff * 2 if self.double_wide_mlp and shared else self.d_ff
        return ModernBlockSpec(spec, d_ff, activation=self.activation, mlp_bias=self.mlp_bias, eps=self.norm_eps,
                               unit_offset=self.norm_unit_offset, sandwich=self.sandwich_norm, dropout=self.dropout)

    def cache_sizes(self) -> tuple[LayerCacheSize, ...]:
        """What the layers that own keys keep, each its kind's heads and head size (a sliding layer its window);
        the shared-KV layers keep nothing."""
        sizes: list[LayerCacheSize] = []
        for i in range(self.first_shared_layer):
            sliding = is_sliding(self, i)
            heads = self.num_kv_heads if sliding else self.num_global_kv_heads
            width = self.head_dim if sliding else self.global_head_dim
            assert heads is not None and width is not None  # __post_init__ fills them
            sizes.append(KeysAndValues(heads, width, width, self.sliding_window if sliding else None))
        return tuple(sizes)


class Gemma4Block(ModernBlock):
    """Gemma 3's sandwich block, then the layer's per-layer input gated in, then the whole times ``layer_scalar``:
    ``(B, T, D)`` -> ``(B, T, D)``.

    ``Gemma4Block(spec, rotary, d_layer_input)``. Submodules beyond :class:`~attnlab.layers.ModernBlock`'s:
    ``per_layer_input_gate`` ``(D -> d_layer_input)``, ``per_layer_projection`` ``(d_layer_input -> D)`` and
    ``post_per_layer_input_norm`` (with ``d_layer_input``), and the buffer ``layer_scalar (1,)``.
    """

    def __init__(self, spec: ModernBlockSpec, rotary: RotaryEmbedding | None, d_layer_input: int) -> None:
        super().__init__(spec, rotary)
        norm = partial(Gemma4RMSNorm, spec.d_model, eps=spec.eps, unit_offset=spec.unit_offset)
        self.norm1, self.norm2 = norm(), norm()  # ModernBlock's norms, with Gemma 4's order of gain and cast
        if spec.sandwich:
            self.post_attn_norm, self.post_ff_norm = norm(), norm()
        self.register_buffer("layer_scalar", torch.ones(1))  # the checkpoint's value replaces it
        self.d_layer_input = d_layer_input
        if d_layer_input:
            self.per_layer_input_gate = nn.Linear(spec.d_model, d_layer_input, bias=False)
            self.per_layer_projection = nn.Linear(d_layer_input, spec.d_model, bias=False)
            self.post_per_layer_input_norm = norm()

    def forward(self, x: Tensor, *, attn_mask: Tensor | None = None, positions: Tensor | None = None,
                return_weights: bool = False, kv_cache: Any = None, head_mask: Tensor | None = None,
                shared_kv: SharedKV | None = None, layer_input: Tensor | None = None):
        """``x (B, T, D)``, this layer's per-layer input ``(B, T, d_layer_input)`` and the :class:`SharedKV` it
        holds or reads; the rest as :meth:`ModernBlock.forward` takes it."""
        a = self.attn(self.norm1(x), attn_mask=attn_mask, positions=positions, return_weights=return_weights,
                      kv_cache=kv_cache, head_mask=head_mask, shared_kv=shared_kv)
        a, weights = a if return_weights else (a, None)
        if self.sandwich:
            a = self.post_attn_norm(a)
        x = x + (self.dropout(a) if self.training else a)
        f = self.ff(self.norm2(x))
        if self.sandwich:
            f = self.post_ff_norm(f)
        x = x + (self.dropout(f) if self.training else f)
        if self.d_layer_input:  # gate the layer's own input into the stream: D -> d_layer_input -> D
            assert layer_input is not None  # the model gives every block its slice
            gate = GATES[self.spec.activation](self.per_layer_input_gate(x)) * layer_input
            x = x + self.post_per_layer_input_norm(self.per_layer_projection(gate))
        x = x * self.layer_scalar  # type: ignore[operator]  # a buffer
        return (x, weights) if return_weights else x


class Gemma4Decoder(ModernDecoder):
    """Gemma 4's language model, called as :class:`~attnlab.models.ModernDecoder` is (the same door, loss and
    decoding), from a :class:`Gemma4Config`.

    Beyond the modern decoder: ``layer_emb`` (``embed_tokens_per_layer``: ``(vocab, num_layers · d_layer_input)``),
    ``layer_proj`` (``per_layer_model_projection``) and ``layer_proj_norm``; blocks are :class:`Gemma4Block`\\ s. Its
    :meth:`new_cache` holds the layers that compute keys only, each of its own shape (a dynamic cache: the static,
    sink and int8 caches are of one shape for every layer, which Gemma 4's layers are not, and refuse it).

    Example:
        >>> model = Gemma4Decoder(Gemma4Config.from_preset("baby"))
        >>> cache = model.new_cache(1)
        >>> len(model.blocks), len(cache.layers)         # the last two layers keep no cache
        (6, 4)
    """

    def __init__(self, config: Gemma4Config) -> None:
        LanguageModel.__init__(self)
        if not isinstance(config, Gemma4Config):
            raise TypeError(tr("Gemma4Decoder: config must be a Gemma4Config, got {config_type}",
                               config_type=type(config).__name__))
        self.config = c = config
        assert c.head_dim is not None  # ModernDecoderConfig.__post_init__ fills it
        # the global layers: proportional RoPE over their own head size; the sliding ones: plain, their own base
        self.rotary = c.rotary_embedding()
        self.rotary_local = RotaryEmbedding(c.head_dim, c.context_length,
                                            c.rope_base if c.rope_local_base is None else c.rope_local_base)
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            Gemma4Block(c.layer_spec(i), self.rotary_local if is_sliding(c, i) else self.rotary, c.d_layer_input)
            for i in range(c.num_layers))
        self.norm_f = Gemma4RMSNorm(c.d_model, eps=c.norm_eps, unit_offset=c.norm_unit_offset)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.head.weight = self.tok_emb.weight
        if c.d_layer_input:
            self.layer_emb = nn.Embedding(c.vocab_size, c.num_layers * c.d_layer_input)
            self.layer_proj = nn.Linear(c.d_model, c.num_layers * c.d_layer_input, bias=False)
            self.layer_proj_norm = Gemma4RMSNorm(c.d_layer_input, eps=c.norm_eps, unit_offset=c.norm_unit_offset)
        self.init_weights(residual_projections="down_proj")

    def layer_inputs(self, idx: Tensor, x: Tensor) -> Tensor:
        """Every layer's per-layer input ``(B, T, num_layers, d_layer_input)`` for tokens ``idx (B, T)`` embedded as
        ``x (B, T, D)``: the token's own row of ``layer_emb`` times √d_layer_input, and ``layer_proj(x) / √D``
        normalised per layer, added and scaled by 1/√2 (the sum of two unit-variance parts)."""
        c = self.config
        shape = (*idx.shape, c.num_layers, c.d_layer_input)
        own = self.layer_emb(idx) * torch.tensor(c.d_layer_input ** 0.5, dtype=self.layer_emb.weight.dtype)
        projected = self.layer_proj_norm((self.layer_proj(x) * c.d_model ** -0.5).view(shape))
        return (projected + own.view(shape)) * 2 ** -0.5

    def run_blocks(self, x: Tensor, attn_mask: Tensor | None, positions: Tensor | None,
                   kv_cache: KVCache | StaticKVCache | None, return_weights: bool = False,
                   head_mask: Tensor | None = None, idx: Tensor | None = None):
        """The blocks: each owner of keys with its layer of ``kv_cache`` and a :class:`SharedKV` its readers take,
        each block with its slice of the per-layer inputs of ``idx (B, T)``."""
        c = self.config
        if positions is None:  # a reader keeps no cache to count them: every layer is told where the tokens sit
            t = x.shape[1]
            positions = torch.arange(t, device=x.device) if kv_cache is None else kv_cache.positions(t)
        if c.d_layer_input and idx is None:
            raise ValueError(f"{type(self).__name__}: the per-layer inputs are read from the token ids; give idx")
        inputs = self.layer_inputs(idx, x) if c.d_layer_input and idx is not None else None
        shares = {owner: SharedKV() for owner in {c.kv_owner(i) for i in range(c.num_layers)} - {None}}
        attentions = []
        for i, block in enumerate(self.blocks):
            owner = c.kv_owner(i)
            x = block(x, attn_mask=attn_mask, positions=positions, return_weights=return_weights,
                      kv_cache=None if kv_cache is None or owner is not None else kv_cache.layers[i],
                      head_mask=None if head_mask is None else head_mask[i],
                      shared_kv=shares.get(i if owner is None else owner),
                      layer_input=None if inputs is None else inputs[:, :, i])
            if return_weights:
                x, w = x
                attentions.append(w)
        return (x, tuple(attentions)) if return_weights else x

    def owners(self) -> list[SharedKVAttention]:
        """The attention of each layer that computes its keys (the first ``first_shared_layer``)."""
        return [cast(SharedKVAttention, block.attn) for block in self.blocks[: self.config.first_shared_layer]]

    def cache_layout(self) -> CacheLayout:
        """The layers that own keys, with their windows and RoPE; the shape says their count and the first one's
        heads and head size (each layer of :meth:`new_cache` has its own)."""
        w = self.tok_emb.weight
        owners = self.owners()
        return CacheLayout(CacheShape(len(owners), owners[0].num_kv_heads, owners[0].head_dim),
                           tuple(a.sliding_window for a in owners), compute_dtype(w), w.device,
                           self.position_limit, tuple(a.rotary for a in owners), type(self).__name__,
                           own_cache=True)

    def new_cache(self, batch: int, context_length: int | None = None) -> LayeredKVCache:
        """An empty dynamic cache of the layers that compute keys (the shared-KV layers read theirs), each of its
        own heads and head size, a sliding layer's a ring of its window."""
        layout = layout_of(self, batch, own=True)
        owners = self.owners()
        return LayeredKVCache(batch, [a.num_kv_heads for a in owners], [a.head_dim for a in owners],
                              context_length or layout.position_limit, layout.windows, layout.dtype, layout.device,
                              shape=layout.shape)
