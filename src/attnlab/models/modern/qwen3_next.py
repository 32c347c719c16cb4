"""Qwen3-Next and Qwen3.5 (text): three Gated DeltaNet layers to one gated softmax layer.

    layer_types    linear, linear, linear, full, linear, linear, linear, full, ...   (full_attention_interval 4)
    linear layer   x += GatedDeltaNet(RMSNorm₁₊(x))        the delta rule's memory: :mod:`attnlab.attention.delta_net`
    full layer     x += GatedAttention(RMSNorm₁₊(x))       softmax attention, QK-norm, RoPE on a quarter of each
                                                           head, each head's context times σ(W_gate x)
    every layer    x += FF(RMSNorm₁₊(x))                   a SwiGLU of d_ff, or (Qwen3-Next's layers with
                                                           num_experts) a mixture of experts: below

with (1 + w) RMSNorms everywhere (``RMSNorm₁₊``, Gemma's; the q/k norms and the final norm too, not the DeltaNet's
gated output norm). A softmax layer's cache grows with the length and a linear layer's does not: Qwen3.5-9B keeps
keys and values in 8 layers of 32 (32,768 bytes a token in bfloat16: 8 GiB at 262,144 tokens) and, in the other 24,
a memory of 2 MiB (float32) and 48 KiB of convolution inputs each, at any length.

Qwen3.5 is the same text model with its projections of the DeltaNet split (``in_proj_qkv``, ``in_proj_z``,
``in_proj_b``, ``in_proj_a``: attnlab's layout; Qwen3-Next fuses them per key head, the loader splits them) and its
RoPE written as multimodal RoPE, which for text positions (the same position on every axis) is partial RoPE.

Qwen3-Next's feed-forward is a mixture of experts (:mod:`attnlab.layers.moe`) in every layer ``i`` with ``(i + 1) %
decoder_sparse_step == 0`` not listed in ``mlp_only_layers`` (those keep a SwiGLU of ``d_ff``):

    p       = softmax(x · W_routerᵀ)                  (N, E)   over all num_experts
    chosen  = top_k(p)                                 (N, k)   k = num_experts_per_tok
    w       = p[chosen] / Σ p[chosen]                  (N, k)   with norm_topk_prob (else p[chosen])
    y       = Σ_k w_k · SwiGLU_k(x) + σ(x · w_gate) · SwiGLU_shared(x)

routed experts of ``moe_intermediate_size``, one shared expert of ``shared_expert_intermediate_size`` on every
token, scaled by a sigmoid gate of its own (``shared_expert_gate``: one number a token). Qwen3-Next-80B-A3B: 512
experts, 10 a token, in all 48 layers: 79.7 B parameters, of which a token uses 3.9 B (3.3 B besides the embedding
and the head).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar

import torch

from attnlab.arguments import check_positive_int
from attnlab.attention.delta_net import GatedDeltaNetSpec
from attnlab.attention.spec import AttentionSpec
from attnlab.i18n import tr
from attnlab.layers import ModernBlockSpec
from attnlab.layers.moe import MoESpec, moe_layers
from attnlab.layers.partial_rotary import PartialRotaryEmbedding
from attnlab.models.caches.size import KeysAndValues, LayerCacheSize, State, cache_bytes
from attnlab.models.modern.decoder import ModernDecoderConfig

#: a layer's kind in a Qwen3-Next ``layer_types`` (transformers' names)
LAYER_KINDS = ("linear_attention", "full_attention")


def interleaved_layer_types(num_layers: int, interval: int = 4) -> list[str]:
    """transformers' default: every ``interval``-th layer full attention, the others linear."""
    return ["linear_attention" if (i + 1) % interval else "full_attention" for i in range(num_layers)]


@dataclass
class Qwen3NextConfig(ModernDecoderConfig):
    """Qwen3-Next and Qwen3.5 (text): a :class:`~attnlab.models.ModernDecoderConfig` with Gated DeltaNet layers.

    Its own fields (the ``linear_*`` names are transformers'):
        linear_num_key_heads, linear_num_value_heads: the DeltaNet's query/key heads and value heads (a multiple).
        linear_key_head_dim, linear_value_head_dim: their widths d_k and d_v.
        linear_conv_kernel: taps of the short convolution.
        partial_rotary_factor: the fraction of each full-attention head RoPE turns (Qwen3-Next: 0.25).
        chunk_size: tokens per chunk of the delta rule (None: the recurrence, token by token); changes the order of
            the sums only.
        num_experts: routed experts of each mixture-of-experts layer (0: every layer a dense SwiGLU of ``d_ff``).
        num_experts_per_tok: experts each token goes to (``k``).
        moe_intermediate_size: each routed expert's SwiGLU width.
        shared_expert_intermediate_size: the gated shared expert's SwiGLU width.
        norm_topk_prob: the chosen experts' softmax weights divided by their sum.
        decoder_sparse_step: every ``decoder_sparse_step``-th layer is a mixture (1: every layer).
        mlp_only_layers: layers kept dense whatever the step.

    Different defaults: ``layer_types`` (None: every fourth layer full), QK-norm per head, (1 + w) norms, ε 1e-6.
    """

    qk_norm: str | None = "head"
    norm_unit_offset: bool = True
    norm_eps: float = 1e-6
    linear_num_key_heads: int = 16
    linear_num_value_heads: int = 32
    linear_key_head_dim: int = 128
    linear_value_head_dim: int = 128
    linear_conv_kernel: int = 4
    partial_rotary_factor: float = 0.25
    chunk_size: int | None = 64
    num_experts: int = 0
    num_experts_per_tok: int = 10
    moe_intermediate_size: int = 512
    shared_expert_intermediate_size: int = 512
    norm_topk_prob: bool = True
    decoder_sparse_step: int = 1
    mlp_only_layers: tuple[int, ...] = ()

    LAYER_TYPES: ClassVar[tuple[str, ...]] = LAYER_KINDS
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # trains in seconds: layers 0-2 linear, 3 full
        "tiny": dict(vocab_size=256, context_length=64, d_model=32, num_layers=4, num_heads=4, num_kv_heads=2,
                     head_dim=8, d_ff=88, linear_num_key_heads=2, linear_num_value_heads=4, linear_key_head_dim=8,
                     linear_value_head_dim=8, tie_weights=True),
        # Qwen3.5-9B's language model (its config.json's text_config; transformers' Qwen3_5TextConfig defaults)
        "qwen3.5-9b": dict(vocab_size=248320, context_length=262144, d_model=4096, num_layers=32, num_heads=16,
                           num_kv_heads=4, head_dim=256, d_ff=12288, rope_base=10000000.0, tie_weights=False),
        # Qwen3-Next-80B-A3B (its config.json; transformers' Qwen3NextConfig defaults): every layer a mixture of 512
        # experts, 10 a token, so d_ff (its intermediate_size) is built nowhere
        "qwen3-next-80b-a3b": dict(vocab_size=151936, context_length=262144, d_model=2048, num_layers=48,
                                   num_heads=16, num_kv_heads=2, head_dim=256, d_ff=5120, rope_base=10000000.0,
                                   num_experts=512, num_experts_per_tok=10, moe_intermediate_size=512,
                                   shared_expert_intermediate_size=512, tie_weights=False),
        # Qwen3.5-35B-A3B's language model (transformers' Qwen3_5MoeTextConfig defaults): every layer 256 experts,
        # 8 a token; no dense layer (its config.json has no intermediate_size: d_ff is built nowhere)
        "qwen3.5-35b-a3b": dict(vocab_size=248320, context_length=262144, d_model=2048, num_layers=40, num_heads=16,
                                num_kv_heads=2, head_dim=256, d_ff=512, rope_base=10000000.0, num_experts=256,
                                num_experts_per_tok=8, moe_intermediate_size=512, shared_expert_intermediate_size=512,
                                tie_weights=False),
    }

    def __post_init__(self) -> None:
        owner = type(self).__name__
        check_positive_int(owner, "num_layers", self.num_layers, tr)
        if self.layer_types is None:
            self.layer_types = interleaved_layer_types(self.num_layers)
        super().__post_init__()
        for name in ("linear_num_key_heads", "linear_num_value_heads", "linear_key_head_dim", "linear_value_head_dim",
                     "linear_conv_kernel"):
            check_positive_int(owner, name, getattr(self, name), tr)
        if self.linear_num_value_heads % self.linear_num_key_heads:
            raise ValueError(tr("{owner}: linear_num_value_heads={values} must be a multiple of linear_num_key_heads="
                                "{keys} (each key head serves a whole group of value heads)", owner=owner,
                                values=self.linear_num_value_heads, keys=self.linear_num_key_heads))
        factor = self.partial_rotary_factor
        numeric = isinstance(factor, int | float) and not isinstance(factor, bool)
        rotary_dim = int(self.width * factor) if numeric else 0
        if not numeric or not 0 < factor <= 1 or rotary_dim < 2 or rotary_dim % 2:
            raise ValueError(tr("{owner}: partial_rotary_factor={factor!r} turns int(head_dim · factor) = {rotary_dim} "
                                "features of each head; expected a factor in (0, 1] that makes an even number >= 2",
                                owner=owner, factor=factor, rotary_dim=rotary_dim))
        if self.chunk_size is not None:
            check_positive_int(owner, "chunk_size", self.chunk_size, tr)
        self._check_experts(owner)

    def _check_experts(self, owner: str) -> None:
        """The mixture's fields, each named with its value when wrong (which layers are mixtures always; the
        mixture's own sizes only with ``num_experts`` > 0, where they are read)."""
        experts = self.num_experts
        if isinstance(experts, bool) or not isinstance(experts, int) or experts < 0:
            raise ValueError(tr("{owner}: num_experts must be an int >= 0 (0: every layer dense), got {value!r}",
                                owner=owner, value=experts))
        check_positive_int(owner, "decoder_sparse_step", self.decoder_sparse_step, tr)
        layers = self.mlp_only_layers
        if not isinstance(layers, list | tuple) or not all(
                isinstance(i, int) and not isinstance(i, bool) and 0 <= i < self.num_layers for i in layers):
            raise ValueError(tr("{owner}: mlp_only_layers must list layer indices in [0, {layers}), got {value!r}",
                                owner=owner, layers=self.num_layers, value=layers))
        self.mlp_only_layers = tuple(layers)
        if not experts:
            return
        for name in ("num_experts_per_tok", "moe_intermediate_size", "shared_expert_intermediate_size"):
            check_positive_int(owner, name, getattr(self, name), tr)
        if self.num_experts_per_tok > experts:
            raise ValueError(tr("{owner}: num_experts_per_tok={k} must be at most num_experts={experts}",
                                owner=owner, k=self.num_experts_per_tok, experts=experts))
        if not isinstance(self.norm_topk_prob, bool):
            raise ValueError(tr("{owner}: {name} must be True or False, got {value!r}", owner=owner,
                                name="norm_topk_prob", value=self.norm_topk_prob))

    @property
    def width(self) -> int:
        """A full-attention head's width (``head_dim``, filled in by the config)."""
        return self.head_dim or self.d_model // self.num_heads

    @property
    def kinds(self) -> list[str]:
        """Each layer's kind, ``"linear_attention"`` or ``"full_attention"`` (``layer_types``, filled in)."""
        return list(self.layer_types or interleaved_layer_types(self.num_layers))

    @property
    def rotary_dim(self) -> int:
        """The features of each full-attention head RoPE turns: ``int(head_dim · partial_rotary_factor)``."""
        return int(self.width * self.partial_rotary_factor)

    # RotaryEmbedding's interface (apply, scaling, rebuild_length, head_dim), on part of each head
    def rotary_embedding(self) -> PartialRotaryEmbedding:  # type: ignore[override]
        """RoPE on the first :attr:`rotary_dim` features of each head, the rest unturned."""
        return PartialRotaryEmbedding(self.width, self.rotary_dim, self.context_length, self.rope_base,
                                      self.rope_scaling)

    def delta_net_spec(self) -> GatedDeltaNetSpec:
        """A linear layer's attention."""
        return GatedDeltaNetSpec(self.d_model, self.linear_num_key_heads, self.linear_num_value_heads,
                                 self.linear_key_head_dim, self.linear_value_head_dim, self.linear_conv_kernel,
                                 self.norm_eps, self.chunk_size, owner="GatedDeltaNet")

    @property
    def moe_layer_flags(self) -> tuple[bool, ...]:
        """Per layer, whether its feed-forward is a mixture of experts (as transformers' decoder layer decides)."""
        if not self.num_experts:
            return (False,) * self.num_layers
        return moe_layers(self.num_layers, sparse_step=self.decoder_sparse_step, dense_layers=self.mlp_only_layers)

    def moe_spec(self) -> MoESpec:
        """A mixture-of-experts layer's feed-forward: a softmax over every expert, the ``num_experts_per_tok`` best
        (renormalised with ``norm_topk_prob``), and the shared expert gated by σ(x · w_gate); the router's logits in
        the model's dtype, its softmax in float32 and the weights cast back, as transformers computes them."""
        return MoESpec(self.d_model, self.num_experts, self.num_experts_per_tok, self.moe_intermediate_size,
                       scoring="softmax", topk_method="greedy", norm_topk_prob=self.norm_topk_prob,
                       d_shared=self.shared_expert_intermediate_size, shared_gate=True, float32_router=False)

    def layer_spec(self, layer: int) -> ModernBlockSpec:
        """Layer ``layer``: a Gated DeltaNet, or gated softmax attention (the output gate on the decoder's own spec);
        its feed-forward a SwiGLU or the mixture of experts (:attr:`moe_layer_flags`)."""
        spec = super().layer_spec(layer)
        if self.moe_layer_flags[layer]:
            spec = dataclasses.replace(spec, ff=self.moe_spec())
        if self.kinds[layer] == "linear_attention":
            return dataclasses.replace(spec, attention=self.delta_net_spec())
        attention = spec.attention
        if not isinstance(attention, AttentionSpec):  # the decoder's own layers are softmax attention
            raise TypeError(f"{type(self).__name__}: layer {layer} is not softmax attention")
        return dataclasses.replace(spec, attention=attention.replace(output_gate=True))

    def cache_sizes(self) -> tuple[LayerCacheSize, ...]:
        """What each layer keeps while decoding (:mod:`attnlab.models.caches.size`): a full-attention layer its key/
        value heads' keys and values per token; a linear layer its short convolution's last ``conv_kernel − 1``
        inputs and its memory ``linear_num_value_heads · d_k · d_v`` in float32, the same at any length."""
        linear = self.delta_net_spec()
        state = State(*linear.memory_shape, conv_channels=linear.conv_channels, conv_kernel=linear.conv_kernel)
        full = KeysAndValues(self.num_kv_heads or self.num_heads, self.width, self.width)
        return tuple(state if kind == "linear_attention" else full for kind in self.kinds)

    def state_bytes_per_sequence(self, dtype: torch.dtype = torch.bfloat16) -> int:
        """What the linear layers keep for one sequence, at any length (the convolution's inputs in ``dtype``)."""
        return cache_bytes([s for s in self.cache_sizes() if isinstance(s, State)], 0, dtype)
