"""The options of :class:`~attnlab.models.ModernDecoderConfig` that the newest open models added, checked here, and
the spec each block of a :class:`~attnlab.models.ModernDecoder` is built from (:func:`layer_spec`).

=================================  ==========================================  ===================================
field                              what it does                                who
=================================  ==========================================  ===================================
``qk_norm``                        RMSNorm on q and k before RoPE              Qwen3, Gemma 3 (``"head"``),
                                                                               OLMo 2 (``"projection"``)
``attn_softcap``                   scores ``cap · tanh(s / cap)``              Gemma 2 (50)
``final_softcap``                  logits ``cap · tanh(z / cap)``              Gemma 2 (30)
``sinks``                          a learned logit per head in the softmax     gpt-oss
``query_pre_attn_scalar``          scores scaled by ``1/√scalar``, not         Gemma 2 and 3 (256)
                                   ``1/√head_dim``
``layer_types``                    per layer ``"full_attention"`` or           Gemma 2 (1:1), Gemma 3 (5 local :
                                   ``"sliding_attention"`` (the window)        1 global), Qwen2's
                                                                               ``max_window_layers``
``rope_local_base``                RoPE's base on the sliding layers           Gemma 3 (10,000; global: 10⁶)
``norm_unit_offset``               (1 + w) RMSNorms                            Gemma
``sandwich_norm``                  each sublayer's output normalised too       Gemma 2 and 3
``activation``                     ``"silu"`` (SwiGLU), ``"gelu_tanh"``        Gemma
                                   (GeGLU)
``embed_scale``                    embeddings times √d_model                   Gemma
``mlp_bias``                       biases in the feed-forward                  some Llama configs
=================================  ==========================================  ===================================
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from attnlab.attention.spec import QK_NORMS, AttentionSpec
from attnlab.i18n import tr
from attnlab.layers.modern_block import ModernBlockSpec
from attnlab.layers.rmsnorm import RMSNorm
from attnlab.layers.swiglu import GATES

#: a layer's kind in ``layer_types`` (transformers' names)
LAYER_TYPES = ("full_attention", "sliding_attention")


def _positive(owner: str, name: str, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int | float)
                              or not math.isfinite(value) or value <= 0):
        raise ValueError(tr("{owner}: {name} must be None or a finite number > 0, got {value!r}", owner=owner,
                            name=name, value=value))


def check_layer_options(cfg: Any, owner: str) -> None:
    """The newest options of a :class:`~attnlab.models.ModernDecoderConfig`, each named with its value if wrong."""
    if cfg.qk_norm is not None and cfg.qk_norm not in QK_NORMS:
        raise ValueError(tr("{owner}: qk_norm must be None, 'head' or 'projection', got {qk_norm!r}", owner=owner,
                            qk_norm=cfg.qk_norm))
    for name in ("attn_softcap", "final_softcap", "query_pre_attn_scalar", "rope_local_base"):
        _positive(owner, name, getattr(cfg, name))
    if cfg.activation not in GATES:
        raise ValueError(tr("{owner}: activation must be one of {activations}, got {activation!r}", owner=owner,
                            activations=tuple(GATES), activation=cfg.activation))
    if cfg.layer_types is None:
        return
    types, kinds = cfg.layer_types, getattr(cfg, "LAYER_TYPES", LAYER_TYPES)  # a family may name other kinds
    if not isinstance(types, list | tuple) or len(types) != cfg.num_layers or not set(types) <= set(kinds):
        raise ValueError(tr("{owner}: layer_types must list num_layers={num_layers} entries, each one of {kinds}, got "
                            "{layer_types!r}", owner=owner, num_layers=cfg.num_layers, kinds=kinds,
                            layer_types=types))
    if "sliding_attention" in types and cfg.sliding_window is None:
        raise ValueError(tr("{owner}: layer_types has sliding_attention layers but sliding_window is None",
                            owner=owner))


def is_sliding(cfg: Any, layer: int) -> bool:
    """Whether layer ``layer`` attends within the window: every layer without ``layer_types`` (Mistral)."""
    if cfg.sliding_window is None:
        return False
    return cfg.layer_types is None or cfg.layer_types[layer] == "sliding_attention"


def layer_spec(cfg: Any, layer: int) -> ModernBlockSpec:
    """Layer ``layer``'s :class:`~attnlab.layers.ModernBlockSpec`, the config's fields written down once."""
    scale = None if cfg.query_pre_attn_scalar is None else cfg.query_pre_attn_scalar ** -0.5
    attention = AttentionSpec(cfg.d_model, cfg.d_model, cfg.num_heads, num_kv_heads=cfg.num_kv_heads,
                              head_dim=cfg.head_dim, dropout=cfg.dropout, qkv_bias=cfg.qkv_bias, out_bias=cfg.out_bias,
                              scale=scale, sliding_window=cfg.sliding_window if is_sliding(cfg, layer) else None,
                              qk_norm=cfg.qk_norm, softcap=cfg.attn_softcap, sinks=cfg.sinks, backend=cfg.backend,
                              make_norm=partial(RMSNorm, eps=cfg.norm_eps, unit_offset=cfg.norm_unit_offset),
                              owner="GroupedQueryAttention")
    return ModernBlockSpec(attention, cfg.d_ff, activation=cfg.activation, mlp_bias=cfg.mlp_bias, eps=cfg.norm_eps,
                           unit_offset=cfg.norm_unit_offset, sandwich=cfg.sandwich_norm, dropout=cfg.dropout)
