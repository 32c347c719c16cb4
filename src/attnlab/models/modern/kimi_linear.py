"""Kimi Linear (Kimi Team, 2025, arXiv:2510.26692): three Kimi Delta Attention layers to one multi-head latent
attention layer, and a mixture of experts after the first layer.

    layer_types    linear, linear, linear, full, linear, linear, linear, full, ...   (Kimi-Linear-48B: 20 + 7)
    linear layer   x += KDA(RMSNorm(x))        the delta rule with a decay per key channel: attention/kimi_delta.py
    full layer     x += MLA(RMSNorm(x))        DeepSeek's latent attention (attention/latent.py), without RoPE
    every layer    x += FF_i(RMSNorm(x))       SwiGLU for a "dense" layer (the first: first_k_dense_replace = 1),
                                               else DeepSeek-V3's mixture: sigmoid router, correction bias, groups,
                                               routed_scaling_factor, shared experts (layers/moe.py)

**MLA without RoPE.** Kimi's MLA layers keep DeepSeek's shapes, the decoupled key of ``qk_rope_head_dim`` (64)
shared by every head included, but nothing turns it: the checkpoint's ``mla_use_nope`` (transformers' Kimi Linear
applies no rotation at all). The KDA layers (their recurrence and short convolution) are the only place the model
learns where a token stands, so the MLA layers attend by content alone, and there is no rotation to rescale for a
longer context. Here the blocks are simply given no rotary embedding (``ModernBlockSpec(rope=False)``):
:class:`~attnlab.attention.latent.LatentAttention` without one leaves its rope part as it is, and the scores' factor
stays ``1/√(qk_nope_head_dim + qk_rope_head_dim)``.

**The cache.** A KDA layer keeps its convolution's last inputs and a float32 memory ``(H, d, d)`` whatever the
length; an MLA layer its latent and its rope key, ``kv_lora_rank + qk_rope_head_dim`` numbers a token (576 in
Kimi-Linear-48B). With 7 MLA layers of 27, a token adds 7 · 576 numbers: 8,064 bytes in bfloat16, where DeepSeek-V3's
61 MLA layers add 70,272. :meth:`KimiLinearModel.new_cache` gives each layer its kind in one
:class:`~attnlab.models.caches.HybridCache`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from attnlab.arguments import check_positive_int
from attnlab.attention.kimi_delta import KimiDeltaAttentionSpec
from attnlab.attention.latent import LatentAttention, LatentAttentionSpec
from attnlab.i18n import tr
from attnlab.layers.modern_block import ModernBlockSpec
from attnlab.layers.moe import MoESpec
from attnlab.layers.rmsnorm import RMSNorm
from attnlab.models.caches import (
    CacheLayout,
    CacheShape,
    HybridCache,
    LatentLayerCache,
    RecurrentLayerCache,
    compute_dtype,
)
from attnlab.models.caches.shape import layout_of
from attnlab.models.caches.size import Latent, LayerCacheSize, State
from attnlab.models.modern.decoder import ModernDecoderConfig
from attnlab.models.modern.deepseek import check_experts, moe_spec_of
from attnlab.models.modern.hybrid import HybridDecoder

#: a layer's attention in ``layer_types``, and its feed-forward in ``mlp_layer_types`` (transformers' names)
LAYER_KINDS = ("linear_attention", "full_attention")
MLP_KINDS = ("dense", "sparse")

#: the fields of :class:`ModernDecoderConfig` Kimi Linear has no use for, with the value each must keep
_NOT_HERE: dict[str, Any] = dict(qkv_bias=False, out_bias=False, sliding_window=None, qk_norm=None,
                                 attn_softcap=None, final_softcap=None, sinks=False, query_pre_attn_scalar=None,
                                 rope_scaling=None, rope_local_base=None, norm_unit_offset=False,
                                 sandwich_norm=False, activation="silu", embed_scale=False, mlp_bias=False)


def default_layer_types(num_layers: int) -> list[str]:
    """transformers' default without a layer list: layers 4, 8, 12, ... (from 0) full attention, the rest KDA."""
    return ["full_attention" if i and i % 4 == 0 else "linear_attention" for i in range(num_layers)]


def layer_types_from_lists(num_layers: int, full: list[int]) -> list[str]:
    """Kimi's config.json numbers its layers from 1 (``linear_attn_config``'s ``full_attn_layers``)."""
    return ["full_attention" if i + 1 in full else "linear_attention" for i in range(num_layers)]


@dataclass
class KimiLinearConfig(ModernDecoderConfig):
    """Kimi Linear: a :class:`~attnlab.models.ModernDecoderConfig` of KDA and MLA layers and a mixture of experts.

    Its own fields (config.json's names where they are flat there; the loader reads the others):
        kv_lora_rank, q_lora_rank, qk_nope_head_dim, qk_rope_head_dim, v_head_dim, attention_bias: the MLA layers'
            (:class:`~attnlab.attention.latent.LatentAttentionSpec`), their rope part never rotated.
        linear_num_heads, linear_head_dim, linear_conv_kernel: the KDA layers' heads, their width, the short
            convolution's taps (config.json's ``linear_attn_config``: ``num_heads``, ``head_dim``,
            ``short_conv_kernel_size``).
        chunk_size: tokens per chunk of the delta rule (None: token by token); the order of the sums only.
        n_routed_experts, num_experts_per_tok, moe_intermediate_size, n_shared_experts, n_group, topk_group,
            norm_topk_prob, routed_scaling_factor: the mixture (DeepSeek-V3's router, always: sigmoid, ``noaux_tc``,
            the correction bias); config.json's ``num_experts``, ``num_experts_per_token``, ``num_shared_experts``,
            ``num_expert_group``, ``moe_renormalize``.
        mlp_layer_types: per layer ``"dense"`` (a SwiGLU of ``d_ff``) or ``"sparse"`` (the mixture); None: the
            first ``first_k_dense_replace`` layers dense, the rest sparse (dense everywhere without experts).

    ``layer_types`` names each layer ``"linear_attention"`` (KDA) or ``"full_attention"`` (MLA); None:
    transformers' default (:func:`default_layer_types`). ``num_kv_heads`` is ``num_heads`` and ``head_dim`` is
    ``qk_rope_head_dim``, as in :class:`~attnlab.models.modern.deepseek.DeepseekConfig`.
    """

    kv_lora_rank: int = 512
    q_lora_rank: int | None = None
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    attention_bias: bool = False
    linear_num_heads: int = 32
    linear_head_dim: int = 128
    linear_conv_kernel: int = 4
    chunk_size: int | None = 64
    n_routed_experts: int = 0
    num_experts_per_tok: int = 1
    moe_intermediate_size: int | None = None
    n_shared_experts: int = 0
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = True
    routed_scaling_factor: float = 1.0
    first_k_dense_replace: int = 1
    mlp_layer_types: list[str] | None = None

    #: the router is DeepSeek-V3's in every Kimi Linear (what :func:`~attnlab.models.modern.deepseek.moe_spec_of` reads)
    scoring_func: ClassVar[str] = "sigmoid"
    topk_method: ClassVar[str] = "noaux_tc"
    LAYER_TYPES: ClassVar[tuple[str, ...]] = LAYER_KINDS
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # trains in seconds: KDA, KDA, KDA, MLA; a dense first layer, then 8 experts in 4 groups
        "tiny": dict(vocab_size=256, context_length=64, d_model=32, num_layers=4, num_heads=4, d_ff=64,
                     kv_lora_rank=16, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8, linear_num_heads=2,
                     linear_head_dim=8, n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16,
                     n_shared_experts=1, n_group=4, topk_group=2, routed_scaling_factor=2.446,
                     layer_types=["linear_attention"] * 3 + ["full_attention"], tie_weights=True),
        # moonshotai/Kimi-Linear-48B-A3B-Instruct's config.json (transformers' KimiLinearConfig defaults give the same
        # sizes, but not its layer lists: its MLA layers are 4, 8, ..., 24 and 27, counted from 1)
        "kimi-linear-48b-a3b": dict(
            vocab_size=163840, context_length=1048576, d_model=2304, num_layers=27, num_heads=32, d_ff=9216,
            norm_eps=1e-5, kv_lora_rank=512, q_lora_rank=None, qk_nope_head_dim=128, qk_rope_head_dim=64,
            v_head_dim=128, linear_num_heads=32, linear_head_dim=128, linear_conv_kernel=4, n_routed_experts=256,
            num_experts_per_tok=8, moe_intermediate_size=1024, n_shared_experts=1, n_group=1, topk_group=1,
            norm_topk_prob=True, routed_scaling_factor=2.446, first_k_dense_replace=1,
            layer_types=layer_types_from_lists(27, [4, 8, 12, 16, 20, 24, 27]), tie_weights=False),
    }

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name, fine in _NOT_HERE.items():
            if getattr(self, name) != fine:
                raise ValueError(tr("{owner}: {name}={value!r} is not part of a Kimi Linear model (expected {fine!r})",
                                    owner=owner, name=name, value=getattr(self, name), fine=fine))
        for name in ("num_layers", "kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim",
                     "linear_num_heads", "linear_head_dim", "linear_conv_kernel"):
            check_positive_int(owner, name, getattr(self, name), tr)
        if self.q_lora_rank is not None:
            check_positive_int(owner, "q_lora_rank", self.q_lora_rank, tr)
        if self.chunk_size is not None:
            check_positive_int(owner, "chunk_size", self.chunk_size, tr)
        if self.num_kv_heads not in (None, self.num_heads):
            raise ValueError(tr("{owner}: num_kv_heads={num_kv_heads} must equal num_heads={num_heads} (MLA gives "
                                "every head its own keys and values)", owner=owner, num_kv_heads=self.num_kv_heads,
                                num_heads=self.num_heads))
        self.head_dim = self.qk_rope_head_dim
        if self.layer_types is None:
            self.layer_types = default_layer_types(self.num_layers)
        super().__post_init__()  # layer_types checked there: num_layers entries of LAYER_KINDS
        check_experts(self, owner)
        self._check_mlp_layer_types(owner)

    def _check_mlp_layer_types(self, owner: str) -> None:
        types = self.mlp_layer_types
        if types is None:
            return
        if not isinstance(types, list | tuple) or len(types) != self.num_layers or not set(types) <= set(MLP_KINDS):
            raise ValueError(tr("{owner}: mlp_layer_types must list num_layers={num_layers} entries, each one of "
                                "{kinds}, got {value!r}", owner=owner, num_layers=self.num_layers, kinds=MLP_KINDS,
                                value=types))
        if "sparse" in types and not self.n_routed_experts:
            raise ValueError(tr("{owner}: mlp_layer_types has sparse layers but n_routed_experts=0 (no experts)",
                                owner=owner))

    @property
    def kinds(self) -> list[str]:
        """Each layer's attention, ``"linear_attention"`` (KDA) or ``"full_attention"`` (MLA)."""
        return list(self.layer_types or default_layer_types(self.num_layers))

    @property
    def moe_layer_flags(self) -> tuple[bool, ...]:
        """Per layer, whether its feed-forward is the mixture of experts (``"sparse"``)."""
        if self.mlp_layer_types is not None:
            return tuple(kind == "sparse" for kind in self.mlp_layer_types)
        return tuple(bool(self.n_routed_experts) and i >= self.first_k_dense_replace for i in range(self.num_layers))

    def moe_spec(self) -> MoESpec:
        """The sparse layers' mixture: DeepSeek-V3's router and shared experts."""
        return moe_spec_of(self)

    def kda_spec(self) -> KimiDeltaAttentionSpec:
        """A linear layer's attention (its output norm's ε is the model's ``rms_norm_eps``, as transformers')."""
        return KimiDeltaAttentionSpec(self.d_model, self.linear_num_heads, self.linear_head_dim,
                                      self.linear_conv_kernel, self.norm_eps, self.chunk_size,
                                      owner="KimiDeltaAttention")

    def mla_spec(self) -> LatentAttentionSpec:
        """A full layer's attention: DeepSeek's MLA, its scores scaled by ``1/√(nope + rope)``, built without RoPE."""
        return LatentAttentionSpec(self.d_model, self.num_heads, self.kv_lora_rank, self.qk_nope_head_dim,
                                   self.qk_rope_head_dim, self.v_head_dim, q_lora_rank=self.q_lora_rank,
                                   bias=self.attention_bias, dropout=self.dropout, backend=self.backend,
                                   make_norm=partial(RMSNorm), owner="LatentAttention")

    def layer_spec(self, layer: int) -> ModernBlockSpec:
        """Layer ``layer``: KDA or MLA (no rotary embedding either way), then a dense SwiGLU or the mixture."""
        assert self.d_ff is not None
        attention = self.kda_spec() if self.kinds[layer] == "linear_attention" else self.mla_spec()
        ff = self.moe_spec() if self.moe_layer_flags[layer] else None
        return ModernBlockSpec(attention, self.d_ff, eps=self.norm_eps, dropout=self.dropout, ff=ff, rope=False)

    def cache_sizes(self) -> tuple[LayerCacheSize, ...]:
        """What each layer keeps while decoding (:mod:`attnlab.models.caches.size`): an MLA layer its latent and rope
        key per token; a KDA layer its memory ``linear_num_heads · d · d`` in float32 and its convolution's last
        ``conv_kernel − 1`` inputs, the same at any length."""
        kda = self.kda_spec()
        state = State(*kda.memory_shape, conv_channels=kda.conv_channels, conv_kernel=kda.conv_kernel)
        latent = Latent(self.kv_lora_rank, self.qk_rope_head_dim)
        return tuple(state if kind == "linear_attention" else latent for kind in self.kinds)


class KimiLinearModel(HybridDecoder):
    """Kimi Linear (:class:`KimiLinearConfig`): a :class:`~attnlab.models.modern.hybrid.HybridDecoder` of KDA and
    MLA blocks, decoded with a :class:`~attnlab.models.caches.HybridCache` of recurrent and latent layer caches.

    Example:
        >>> model = KimiLinearModel(KimiLinearConfig.from_preset("tiny"))
        >>> model(torch.zeros(1, 5, dtype=torch.long)).logits.shape
        torch.Size([1, 5, 256])
        >>> [type(layer).__name__ for layer in model.new_cache(1).layers]
        ['RecurrentLayerCache', 'RecurrentLayerCache', 'RecurrentLayerCache', 'LatentLayerCache']
    """

    def __init__(self, config: KimiLinearConfig) -> None:
        if not isinstance(config, KimiLinearConfig):
            raise TypeError(tr("KimiLinearModel: config must be a KimiLinearConfig, got {config_type}",
                               config_type=type(config).__name__))
        super().__init__(config)

    def cache_layout(self) -> CacheLayout:
        """One latent "head" per MLA layer, ``kv_lora_rank + qk_rope_head_dim`` wide (what a cache is checked
        against); no windows, no rotations."""
        c, w = self.config, self.tok_emb.weight
        shape = CacheShape(c.num_layers, 1, c.kv_lora_rank + c.qk_rope_head_dim)
        return CacheLayout(shape, (None,) * c.num_layers, compute_dtype(w), w.device, self.position_limit,
                           (None,) * c.num_layers, type(self).__name__)

    def new_cache(self, batch: int, context_length: int | None = None) -> HybridCache:  # type: ignore[override]
        """An empty cache for ``batch`` sequences: the latents of each MLA layer (in the compute dtype, up to
        ``context_length`` positions; None: no limit), a recurrent state for each KDA layer (float32)."""
        layout = layout_of(self, batch)
        layers: list[Any] = [
            LatentLayerCache(batch, block.attn.spec.cache_widths, context_length, layout.dtype, layout.device)
            if isinstance(block.attn, LatentAttention) else RecurrentLayerCache(batch) for block in self.blocks]
        return HybridCache(layers, layout.shape, batch)


__all__ = ["LAYER_KINDS", "MLP_KINDS", "KimiLinearConfig", "KimiLinearModel", "default_layer_types",
           "layer_types_from_lists"]
