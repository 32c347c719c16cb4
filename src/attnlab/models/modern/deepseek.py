"""DeepSeek-V2, V3 and V3.2: a Llama-shaped decoder whose attention is multi-head latent attention (MLA; V3.2: its
sparse form, DSA) and whose feed-forward is, after the first few layers, a mixture of experts.

    idx (B, T) -> token embedding -> N pre-RMSNorm blocks -> final RMSNorm -> head -> logits (B, T, vocab)
    block i:   x = x + MLA(RMSNorm(x))                        :mod:`attnlab.attention.latent`
               x = x + FF_i(RMSNorm(x))                       SwiGLU for i < first_k_dense_replace, else a mixture
                                                              of experts (:mod:`attnlab.layers.moe`)

==============================  ==================================================  ================================
field (config.json's)           what                                                DeepSeek-V3 (V2)
==============================  ==================================================  ================================
``kv_lora_rank``                the latent every key and value is made from         512 (512)
``q_lora_rank``                 the query's latent; None: one ``q_proj``            1536 (1536; V2-Lite: None)
``qk_nope_head_dim``            each head's query/key part without positions        128
``qk_rope_head_dim``            the rotated part, one key shared by all heads       64
``v_head_dim``                  each head's value                                   128
``rope_interleave``             the rope features pair as (2i, 2i + 1)              True (V2: always)
``n_routed_experts``            routed experts per mixture (0: every layer dense)   256 (160)
``num_experts_per_tok``         experts each token goes to                          8 (6)
``moe_intermediate_size``       each expert's SwiGLU width                          2048 (1536)
``n_shared_experts``            experts every token goes through                    1 (2)
``scoring_func``                ``"sigmoid"`` (V3) or ``"softmax"`` (V2)            sigmoid (softmax)
``topk_method``                 ``"noaux_tc"`` (V3), ``"greedy"`` or                noaux_tc (group_limited_greedy)
                                ``"group_limited_greedy"`` (V2)
``n_group``, ``topk_group``     the experts' groups, and those a token may use      8, 4 (8, 3)
``norm_topk_prob``              the chosen weights divided by their sum             True (False)
``routed_scaling_factor``       the routed experts' weights times it                2.5 (16)
``first_k_dense_replace``       the first layers keep a dense SwiGLU (``d_ff``)     3 (1)
``attention_bias``              biases on q_a_proj, kv_a_proj_with_mqa and o_proj   False
``num_nextn_predict_layers``    multi-token-prediction modules stored after the     1 (0)
                                layers: not part of the causal LM, changes nothing
``index_topk``                  DeepSeek-V3.2's sparse attention: the keys each     2048 in V3.2 (None)
                                query attends to (None: dense MLA)
``index_n_heads``,              the lightning indexer's heads and their width       64, 128 in V3.2
``index_head_dim``
==============================  ==================================================  ================================

What a token leaves in the cache is the latent and the rope key, ``kv_lora_rank + qk_rope_head_dim`` numbers a
layer (:class:`~attnlab.models.caches.LatentCache`; :meth:`DeepseekConfig.cache_bytes_per_token`): DeepSeek-V3's 61
layers keep 61 · 576 = 35,136 numbers a token (70,272 bytes in bf16), where multi-head attention over its 128 heads of
128 would keep 61 · 2 · 128 · 128 = 1,998,848. Decoding attends in latent space (the absorbed form).

The options of the other families (QK-norm, windows, soft-caps, sinks, Gemma's norms) are no part of these models:
each is refused by name if set.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from functools import partial
from typing import Any, ClassVar

from attnlab.arguments import check_positive_int
from attnlab.attention.latent import LatentAttentionSpec, mla_scale
from attnlab.attention.sparse import SparseAttentionSpec
from attnlab.i18n import tr
from attnlab.layers.modern_block import ModernBlockSpec
from attnlab.layers.moe import SCORINGS, TOPK_METHODS, MoESpec, moe_layers
from attnlab.layers.rmsnorm import RMSNorm
from attnlab.models.caches import CacheLayout, CacheShape, LatentCache, compute_dtype
from attnlab.models.caches.size import Latent, LayerCacheSize
from attnlab.models.modern.decoder import ModernDecoder, ModernDecoderConfig

#: the fields of :class:`ModernDecoderConfig` a DeepSeek model has no use for, with the value each must keep
_NOT_HERE: dict[str, Any] = dict(qkv_bias=False, out_bias=False, sliding_window=None, qk_norm=None,
                                 attn_softcap=None, final_softcap=None, sinks=False, query_pre_attn_scalar=None,
                                 layer_types=None, rope_local_base=None, norm_unit_offset=False, sandwich_norm=False,
                                 activation="silu", embed_scale=False)

#: DeepSeek-V3 (671B): its config.json, as transformers' DeepseekV3Config defaults write it
_V3 = dict(vocab_size=129280, context_length=163840, d_model=7168, num_layers=61, num_heads=128, d_ff=18432,
           norm_eps=1e-6, rope_base=10000.0,
           rope_scaling=dict(type="yarn", factor=40.0, original_max_position_embeddings=4096, beta_fast=32.0,
                             beta_slow=1.0, mscale=1.0, mscale_all_dim=1.0),
           kv_lora_rank=512, q_lora_rank=1536, qk_nope_head_dim=128, qk_rope_head_dim=64, v_head_dim=128,
           n_routed_experts=256, num_experts_per_tok=8, moe_intermediate_size=2048, n_shared_experts=1,
           scoring_func="sigmoid", topk_method="noaux_tc", n_group=8, topk_group=4, norm_topk_prob=True,
           routed_scaling_factor=2.5, first_k_dense_replace=3, num_nextn_predict_layers=1)


def check_experts(cfg: Any, owner: str) -> None:
    """The mixture-of-experts fields of a DeepSeek-like config (DeepSeek's, Kimi Linear's), each named with its value
    if wrong; then the remaining checks of :class:`~attnlab.layers.moe.MoESpec` (a group's size against top_k)."""
    if isinstance(cfg.n_routed_experts, bool) or not isinstance(cfg.n_routed_experts, int) \
            or cfg.n_routed_experts < 0:
        raise ValueError(tr("{owner}: n_routed_experts must be an int >= 0 (0: every layer dense), got {value!r}",
                            owner=owner, value=cfg.n_routed_experts))
    if isinstance(cfg.first_k_dense_replace, bool) or not isinstance(cfg.first_k_dense_replace, int) \
            or cfg.first_k_dense_replace < 0:
        raise ValueError(tr("{owner}: first_k_dense_replace must be an int >= 0, got {value!r}", owner=owner,
                            value=cfg.first_k_dense_replace))
    if not cfg.n_routed_experts:
        return
    for name in ("num_experts_per_tok", "moe_intermediate_size", "n_group", "topk_group"):
        check_positive_int(owner, name, getattr(cfg, name), tr)
    if isinstance(cfg.n_shared_experts, bool) or not isinstance(cfg.n_shared_experts, int) \
            or cfg.n_shared_experts < 0:
        raise ValueError(tr("{owner}: n_shared_experts must be an int >= 0, got {value!r}", owner=owner,
                            value=cfg.n_shared_experts))
    for name, choices in (("scoring_func", SCORINGS), ("topk_method", TOPK_METHODS)):
        if getattr(cfg, name) not in choices:
            raise ValueError(tr("{owner}: {name} must be one of {choices}, got {value!r}", owner=owner, name=name,
                                choices=choices, value=getattr(cfg, name)))
    if cfg.n_routed_experts % cfg.n_group:
        raise ValueError(tr("{owner}: n_routed_experts={experts} must be divisible by n_group={groups} (the "
                            "experts are split into equal groups)", owner=owner, experts=cfg.n_routed_experts,
                            groups=cfg.n_group))
    if cfg.topk_group > cfg.n_group:
        raise ValueError(tr("{owner}: topk_group={topk_group} must be at most n_group={groups}", owner=owner,
                            topk_group=cfg.topk_group, groups=cfg.n_group))
    if cfg.num_experts_per_tok > cfg.n_routed_experts:
        raise ValueError(tr("{owner}: num_experts_per_tok={k} must be at most n_routed_experts={experts}",
                            owner=owner, k=cfg.num_experts_per_tok, experts=cfg.n_routed_experts))
    factor = cfg.routed_scaling_factor
    if isinstance(factor, bool) or not isinstance(factor, int | float) or not math.isfinite(factor) \
            or factor <= 0:
        raise ValueError(tr("{owner}: routed_scaling_factor must be a finite number > 0, got {value!r}",
                            owner=owner, value=factor))
    moe_spec_of(cfg)  # the remaining checks (a group's size against top_k and noaux_tc), named by the spec


def moe_spec_of(cfg: Any) -> MoESpec:
    """The mixture of experts of a DeepSeek-like config's sparse layers (shared experts as one SwiGLU of
    ``n_shared_experts · moe_intermediate_size``)."""
    assert cfg.moe_intermediate_size is not None
    return MoESpec(cfg.d_model, cfg.n_routed_experts, cfg.num_experts_per_tok, cfg.moe_intermediate_size,
                   scoring=cfg.scoring_func, topk_method=cfg.topk_method, n_group=cfg.n_group,
                   topk_group=cfg.topk_group, norm_topk_prob=cfg.norm_topk_prob,
                   routed_scaling_factor=cfg.routed_scaling_factor,
                   correction_bias=cfg.topk_method == "noaux_tc",
                   d_shared=cfg.n_shared_experts * cfg.moe_intermediate_size, shared_bias=cfg.mlp_bias)


@dataclass
class DeepseekConfig(ModernDecoderConfig):
    """DeepSeek-V2 / V3: a :class:`ModernDecoderConfig` whose blocks are MLA and (after ``first_k_dense_replace``)
    a mixture of experts; the fields the module docstring's table lists, named as the checkpoints' config.json.

    ``num_kv_heads`` is ``num_heads`` (every head has its own keys and values, made from the shared latent) and
    ``head_dim`` is ``qk_rope_head_dim``, the width the model's rotary embedding turns; ``d_ff`` is the dense
    layers' SwiGLU width (``intermediate_size``).

    Example:
        >>> config = DeepseekConfig.from_preset("tiny")
        >>> config.cache_bytes_per_token(torch.bfloat16)      # 2 layers · (16 + 8) numbers · 2 bytes
        96
        >>> DeepseekConfig.from_preset("deepseek-v3").cache_bytes_per_token(torch.bfloat16)
        70272
    """

    kv_lora_rank: int = 512
    q_lora_rank: int | None = None
    qk_nope_head_dim: int = 128
    qk_rope_head_dim: int = 64
    v_head_dim: int = 128
    rope_interleave: bool = True
    attention_bias: bool = False
    n_routed_experts: int = 0
    num_experts_per_tok: int = 1
    moe_intermediate_size: int | None = None
    n_shared_experts: int = 0
    scoring_func: str = "softmax"
    topk_method: str = "greedy"
    n_group: int = 1
    topk_group: int = 1
    norm_topk_prob: bool = False
    routed_scaling_factor: float = 1.0
    first_k_dense_replace: int = 0
    num_nextn_predict_layers: int = 0
    index_topk: int | None = None
    index_n_heads: int = 64
    index_head_dim: int = 128

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # trains in seconds: MLA with a query latent, 8 experts in 4 groups, V3's router
        "tiny": dict(vocab_size=256, context_length=64, d_model=32, num_layers=2, num_heads=4, d_ff=64,
                     kv_lora_rank=16, q_lora_rank=24, qk_nope_head_dim=8, qk_rope_head_dim=8, v_head_dim=8,
                     n_routed_experts=8, num_experts_per_tok=2, moe_intermediate_size=16, n_shared_experts=1,
                     scoring_func="sigmoid", topk_method="noaux_tc", n_group=4, topk_group=2, norm_topk_prob=True,
                     routed_scaling_factor=2.5, first_k_dense_replace=1, tie_weights=True),
        "deepseek-v3": _V3,
        # DeepSeek-V3.2: V3 with the sparse attention's lightning indexer in every layer
        "deepseek-v3.2": dict(_V3, index_topk=2048, index_n_heads=64, index_head_dim=128),
    }

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name, fine in _NOT_HERE.items():
            if getattr(self, name) != fine:
                raise ValueError(tr("{owner}: {name}={value!r} is not part of a DeepSeek model (expected {fine!r})",
                                    owner=owner, name=name, value=getattr(self, name), fine=fine))
        for name in ("kv_lora_rank", "qk_nope_head_dim", "qk_rope_head_dim", "v_head_dim"):
            check_positive_int(owner, name, getattr(self, name), tr)
        if self.q_lora_rank is not None:
            check_positive_int(owner, "q_lora_rank", self.q_lora_rank, tr)
        if self.num_kv_heads not in (None, self.num_heads):
            raise ValueError(tr("{owner}: num_kv_heads={num_kv_heads} must equal num_heads={num_heads} (MLA gives "
                                "every head its own keys and values)", owner=owner, num_kv_heads=self.num_kv_heads,
                                num_heads=self.num_heads))
        if self.head_dim not in (None, self.qk_rope_head_dim):
            raise ValueError(tr("{owner}: head_dim={head_dim} must equal qk_rope_head_dim={qk_rope_head_dim} (the "
                                "width RoPE turns) or be None", owner=owner, head_dim=self.head_dim,
                                qk_rope_head_dim=self.qk_rope_head_dim))
        self.head_dim = self.qk_rope_head_dim
        super().__post_init__()
        check_experts(self, owner)
        if self.index_topk is not None:
            for name in ("index_topk", "index_n_heads", "index_head_dim"):
                check_positive_int(owner, name, getattr(self, name), tr)
            if self.q_lora_rank is None:
                raise ValueError(tr("{owner}: index_topk={index_topk} needs a query latent (the indexer reads it), "
                                    "but q_lora_rank is None", owner=owner, index_topk=self.index_topk))
        value = self.num_nextn_predict_layers
        if isinstance(value, bool) or not isinstance(value, int) or value < 0:
            raise ValueError(tr("{owner}: num_nextn_predict_layers must be an int >= 0, got {value!r}", owner=owner,
                                value=value))

    @property
    def moe_layer_flags(self) -> tuple[bool, ...]:
        """Per layer, whether its feed-forward is a mixture of experts."""
        if not self.n_routed_experts:
            return (False,) * self.num_layers
        return moe_layers(self.num_layers, first_dense=self.first_k_dense_replace)

    def moe_spec(self) -> MoESpec:
        """The mixture of experts of the sparse layers (:func:`moe_spec_of`)."""
        return moe_spec_of(self)

    def attention_spec(self) -> LatentAttentionSpec:
        """Every layer's MLA (the scores' factor DeepSeek's: :func:`~attnlab.attention.latent.mla_scale`); with
        ``index_topk``, DeepSeek Sparse Attention (:mod:`attnlab.attention.sparse`)."""
        spec = LatentAttentionSpec(
            self.d_model, self.num_heads, self.kv_lora_rank, self.qk_nope_head_dim, self.qk_rope_head_dim,
            self.v_head_dim, q_lora_rank=self.q_lora_rank, rope_interleave=self.rope_interleave,
            scale=mla_scale(self.qk_nope_head_dim + self.qk_rope_head_dim, self.rope_scaling),
            bias=self.attention_bias, dropout=self.dropout, backend=self.backend,
            make_norm=partial(RMSNorm), owner="LatentAttention")
        if self.index_topk is None:
            return spec
        fields = {f.name: getattr(spec, f.name) for f in dataclasses.fields(spec)}
        return SparseAttentionSpec(**{**fields, "owner": "SparseLatentAttention"}, index_topk=self.index_topk,
                                   index_n_heads=self.index_n_heads, index_head_dim=self.index_head_dim)

    def layer_spec(self, layer: int) -> ModernBlockSpec:
        """Layer ``layer``: MLA, then a dense SwiGLU of ``d_ff`` or the mixture of experts."""
        assert self.d_ff is not None
        ff = self.moe_spec() if self.moe_layer_flags[layer] else None
        return ModernBlockSpec(self.attention_spec(), self.d_ff, mlp_bias=self.mlp_bias, eps=self.norm_eps,
                               dropout=self.dropout, ff=ff)

    def cache_numbers_per_token(self) -> int:
        """Numbers the cache keeps per token, all layers together: ``num_layers · (kv_lora_rank +
        qk_rope_head_dim)``, and ``index_head_dim`` more a layer for the sparse attention's indexer key."""
        index = 0 if self.index_topk is None else self.index_head_dim
        return self.num_layers * (self.kv_lora_rank + self.qk_rope_head_dim + index)

    def cache_sizes(self) -> tuple[LayerCacheSize, ...]:
        """What each layer keeps while decoding (:mod:`attnlab.models.caches.size`): the latent and the rope key,
        and the indexer's key with sparse attention; ``cache_bytes`` and ``cache_bytes_per_token`` add them up."""
        index = 0 if self.index_topk is None else self.index_head_dim
        return (Latent(self.kv_lora_rank, self.qk_rope_head_dim, index),) * self.num_layers


class DeepseekModel(ModernDecoder):
    """DeepSeek-V2 / V3 (:class:`DeepseekConfig`): a :class:`~attnlab.models.ModernDecoder` whose blocks are MLA
    and mixtures of experts, decoded with a :class:`~attnlab.models.caches.LatentCache`.

    Example:
        >>> model = DeepseekModel(DeepseekConfig.from_preset("tiny"))
        >>> model(torch.zeros(1, 5, dtype=torch.long)).logits.shape
        torch.Size([1, 5, 256])
        >>> model.new_cache(1).shape             # one "head" of 16 + 8 numbers a token a layer
        CacheShape(num_layers=2, num_heads=1, head_dim=24)
    """

    def __init__(self, config: DeepseekConfig) -> None:
        if not isinstance(config, DeepseekConfig):
            raise TypeError(tr("DeepseekModel: config must be a DeepseekConfig, got {config_type}",
                               config_type=type(config).__name__))
        super().__init__(config)

    def cache_layout(self) -> CacheLayout:
        """One latent "head" per layer, ``kv_lora_rank + qk_rope_head_dim`` wide; no windows."""
        c, w = self.config, self.tok_emb.weight
        width = c.cache_numbers_per_token() // c.num_layers
        return CacheLayout(CacheShape(c.num_layers, 1, width), (None,) * c.num_layers, compute_dtype(w), w.device,
                           self.position_limit, (self.rotary,) * c.num_layers, type(self).__name__)

    def new_cache(self, batch: int, context_length: int | None = None) -> LatentCache:  # type: ignore[override]
        """An empty :class:`~attnlab.models.caches.LatentCache` for ``batch`` sequences (the latent and the rope key
        of every layer, in the dtype the model computes in)."""
        return LatentCache.for_model(self, batch, context_length=context_length)
