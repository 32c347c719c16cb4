"""A decoder as Llama, Qwen2 and Mistral build one: GPT's layout with today's parts.

    idx (B, T) -> token embedding -> N pre-RMSNorm blocks (GQA with RoPE, SwiGLU) -> final RMSNorm
               -> head (its own matrix, or the token embedding's: weight tying) -> logits (B, T, vocab)

What changed since GPT-2, one idea each, all in :mod:`attnlab.layers` and :mod:`attnlab.attention`:

==========================  =====================================  ==============================================
GPT-2                       here                                   why
==========================  =====================================  ==============================================
learned position table      RoPE on q and k                        scores see relative positions; no table to outgrow
LayerNorm (μ, σ, β)         RMSNorm (rms only, no β)               cheaper, trains as well
GELU feed-forward, 4·D      SwiGLU, ~8/3·D, three matrices         better at the same parameter count
multi-head attention        grouped-query attention                a cache ``num_heads / num_kv_heads`` times smaller
biases everywhere           none (Qwen2: on q, k, v)               they add little; fewer parameters to load
full causal attention       optional sliding window (Mistral)      cost per token bounded by the window
==========================  =====================================  ==============================================

The options of Qwen3, Gemma 2 and 3 and gpt-oss (QK-norm, soft-capping, sinks, local and global layers, (1 + w)
norms, GeGLU, ...) are fields of the same config, described in :mod:`attnlab.models.modern.options`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

import torch
from torch import Tensor, nn

from attnlab.arguments import check_positive_int
from attnlab.functional import BACKENDS
from attnlab.functional.logit_options import softcap
from attnlab.i18n import tr
from attnlab.layers import ModernBlock, ModernBlockSpec, RMSNorm, RopeScaling, RotaryEmbedding
from attnlab.models.caches.size import KeysAndValues, LayerCacheSize, bytes_per_token, cache_bytes
from attnlab.models.config import Presets
from attnlab.models.language_model import LanguageModel
from attnlab.models.modern.options import check_layer_options, is_sliding, layer_spec

#: what every Gemma shares: (1 + w) sandwich norms, a GELU gate, embeddings times √d_model
_GEMMA = dict(norm_unit_offset=True, sandwich_norm=True, activation="gelu_tanh", embed_scale=True)


@dataclass
class ModernDecoderConfig(Presets):
    """A decoder of today's open models: Llama, Qwen2, Mistral, and with the newest options Qwen3, Gemma 2 and 3,
    Phi-3 (see :class:`attnlab.models.ModernDecoder`).

    Args:
        vocab_size: number of token ids.
        context_length: the length trained for. RoPE has no table: the model runs and decodes past it (with
            ``rope_scaling`` stretching the frequencies as the checkpoint's config says).
        d_model: width of every token vector.
        num_layers: number of pre-RMSNorm blocks.
        num_heads: query heads per block.
        num_kv_heads: key/value heads per block; must divide ``num_heads`` (None: ``num_heads``; 1: MQA).
        head_dim: width of one head, even (RoPE turns pairs); None means ``d_model // num_heads``.
        d_ff: SwiGLU hidden width; None means 8/3 · ``d_model`` rounded up to a multiple of 8 (the parameters of
            a 4 · ``d_model`` two-matrix network in three matrices).
        dropout: on embeddings, attention weights and sublayer outputs, training only.
        qkv_bias: biases on the query/key/value projections (Qwen2 has them).
        out_bias: a bias on the attention's output projection.
        rope_base: the θ of RoPE's frequencies (Llama 2 and Mistral: 10,000; Llama 3: 500,000; Qwen2.5: 10⁶).
        rope_scaling: None or a dict of :class:`attnlab.layers.RopeScaling` fields (Llama 3.1/3.2: ``llama3``).
        sliding_window: keys each query sees, its own included (Mistral 7B v0.1: 4096), at most
            ``context_length``; None: all before it. Its KV cache keeps only that many positions (a rolling cache).
        norm_eps: RMSNorm epsilon.
        tie_weights: the output head shares the token embedding's matrix (Llama-3.2-1B and Qwen2.5-0.5B do).
        backend: attention backend for the blocks.
        qk_norm, attn_softcap, final_softcap, sinks, query_pre_attn_scalar, layer_types, rope_local_base,
        norm_unit_offset, sandwich_norm, activation, embed_scale, mlp_bias: the newest models' options, one line
            each in :mod:`attnlab.models.modern.options` (with ``layer_types``, ``sliding_window`` is the window of
            the ``"sliding_attention"`` layers only).
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    num_kv_heads: int | None = None
    head_dim: int | None = None
    d_ff: int | None = None
    dropout: float = 0.0
    qkv_bias: bool = False
    out_bias: bool = False
    rope_base: float = 10000.0
    rope_scaling: dict[str, Any] | None = None
    sliding_window: int | None = None
    norm_eps: float = 1e-5
    tie_weights: bool = False
    backend: str = "auto"
    qk_norm: str | None = None
    attn_softcap: float | None = None
    final_softcap: float | None = None
    sinks: bool = False
    query_pre_attn_scalar: float | None = None
    layer_types: list[str] | None = None
    rope_local_base: float | None = None
    norm_unit_offset: bool = False
    sandwich_norm: bool = False
    activation: str = "silu"
    embed_scale: bool = False
    mlp_bias: bool = False

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # trains in seconds; 4 query heads over 2 key/value heads
        "tiny": dict(vocab_size=256, context_length=32, d_model=32, num_layers=2, num_heads=4, num_kv_heads=2,
                     d_ff=88, tie_weights=True),
        # the GPT "baby"'s size (810,368 against 812,032 parameters at vocab_size=82): d_ff = 392 spends on the
        # gated feed-forward what GQA and the missing position table save
        "baby": dict(vocab_size=256, context_length=64, d_model=128, num_layers=4, num_heads=4, num_kv_heads=2,
                     d_ff=392, tie_weights=True),
        # the shapes of the published checkpoints (their config.json files)
        "llama-3.2-1b": dict(vocab_size=128256, context_length=131072, d_model=2048, num_layers=16, num_heads=32,
                             num_kv_heads=8, d_ff=8192, rope_base=500000.0,
                             rope_scaling=dict(type="llama3", factor=32.0, low_freq_factor=1.0,
                                               high_freq_factor=4.0, original_context_length=8192),
                             norm_eps=1e-5, tie_weights=True),
        "llama-3-8b": dict(vocab_size=128256, context_length=8192, d_model=4096, num_layers=32, num_heads=32,
                           num_kv_heads=8, d_ff=14336, rope_base=500000.0, norm_eps=1e-5, tie_weights=False),
        "qwen2.5-0.5b": dict(vocab_size=151936, context_length=32768, d_model=896, num_layers=24, num_heads=14,
                             num_kv_heads=2, d_ff=4864, qkv_bias=True, rope_base=1000000.0, norm_eps=1e-6,
                             tie_weights=True),
        "mistral-7b": dict(vocab_size=32000, context_length=32768, d_model=4096, num_layers=32, num_heads=32,
                           num_kv_heads=8, d_ff=14336, rope_base=10000.0, sliding_window=4096, norm_eps=1e-5,
                           tie_weights=False),
        "qwen3-0.6b": dict(vocab_size=151936, context_length=40960, d_model=1024, num_layers=28, num_heads=16,
                           num_kv_heads=8, head_dim=128, d_ff=3072, rope_base=1000000.0, norm_eps=1e-6,
                           tie_weights=True, qk_norm="head"),
        "gemma-2-2b": dict(vocab_size=256000, context_length=8192, d_model=2304, num_layers=26, num_heads=8,
                           num_kv_heads=4, head_dim=256, d_ff=9216, norm_eps=1e-6, tie_weights=True,
                           sliding_window=4096, layer_types=["sliding_attention", "full_attention"] * 13,
                           attn_softcap=50.0, final_softcap=30.0, query_pre_attn_scalar=256, **_GEMMA),
        "gemma-3-1b": dict(vocab_size=262144, context_length=32768, d_model=1152, num_layers=26, num_heads=4,
                           num_kv_heads=1, head_dim=256, d_ff=6912, norm_eps=1e-6, tie_weights=True,
                           sliding_window=512, layer_types=(["sliding_attention"] * 5 + ["full_attention"]) * 4
                           + ["sliding_attention"] * 2, rope_base=1000000.0, rope_local_base=10000.0,
                           query_pre_attn_scalar=256, qk_norm="head", **_GEMMA),
        "phi-3-mini": dict(vocab_size=32064, context_length=4096, d_model=3072, num_layers=32, num_heads=32,
                           d_ff=8192, sliding_window=2047, norm_eps=1e-5, tie_weights=False),
    }

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads"):
            check_positive_int(owner, name, getattr(self, name), tr)
        if self.num_kv_heads is None:
            self.num_kv_heads = self.num_heads
        check_positive_int(owner, "num_kv_heads", self.num_kv_heads, tr)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(tr("{owner}: num_heads must be divisible by num_kv_heads, got num_heads={num_heads}, "
                                "num_kv_heads={num_kv_heads}", owner=owner, num_heads=self.num_heads,
                                num_kv_heads=self.num_kv_heads))
        if self.head_dim is None:
            if self.d_model % self.num_heads:
                raise ValueError(tr("{owner}: d_model={d_model} must be divisible by num_heads={num_heads} (or give "
                                    "head_dim)", owner=owner, d_model=self.d_model, num_heads=self.num_heads))
            self.head_dim = self.d_model // self.num_heads
        check_positive_int(owner, "head_dim", self.head_dim, tr)
        if self.head_dim % 2:
            raise ValueError(tr("{owner}: head_dim must be even (RoPE rotates pairs of features), got {head_dim}",
                                owner=owner, head_dim=self.head_dim))
        if self.d_ff is None:
            self.d_ff = math.ceil(8 * self.d_model / 3 / 8) * 8
        check_positive_int(owner, "d_ff", self.d_ff, tr)
        if self.sliding_window is not None:
            check_positive_int(owner, "sliding_window (keys seen, own included)", self.sliding_window, tr)
            if self.sliding_window > self.context_length:
                raise ValueError(tr("{owner}: sliding_window={sliding_window} is wider than context_length="
                                    "{context_length}; a window at most context_length wide, or None for full "
                                    "attention", owner=owner, sliding_window=self.sliding_window,
                                    context_length=self.context_length))
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float) or not 0.0 <= self.dropout < 1:
            raise ValueError(tr("{owner}: dropout must be a float in [0, 1), got {dropout!r}", owner=owner,
                                dropout=self.dropout))
        for name in ("rope_base", "norm_eps"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
                raise ValueError(tr("{owner}: {name} must be a number > 0, got {value!r}", owner=owner, name=name,
                                    value=value))
        if self.rope_scaling is not None:
            if not isinstance(self.rope_scaling, dict):
                raise TypeError(tr("{owner}: rope_scaling must be None or a dict, got {rope_scaling_type}",
                                   owner=owner, rope_scaling_type=type(self.rope_scaling).__name__))
            RopeScaling.from_dict(self.rope_scaling)  # every field checked now, not at the first forward
        if self.backend not in BACKENDS:
            raise ValueError(tr("{owner}: backend must be one of {backends}, got {backend!r}", owner=owner,
                                backends=BACKENDS, backend=self.backend))
        check_layer_options(self, owner)

    def rotary_embedding(self) -> RotaryEmbedding:
        """The RoPE the layers turn q and k with (a family of its own may turn only part of each head)."""
        return RotaryEmbedding(self.head_dim or self.d_model // self.num_heads, self.context_length, self.rope_base,
                               self.rope_scaling)

    def layer_spec(self, layer: int) -> ModernBlockSpec:
        """Layer ``layer``'s block, as this config writes it (:func:`~attnlab.models.modern.options.layer_spec`); a
        family of its own overrides it (another attention, a mixture of experts)."""
        return layer_spec(self, layer)

    def cache_sizes(self) -> tuple[LayerCacheSize, ...]:
        """What each layer keeps while decoding (:mod:`attnlab.models.caches.size`): its key/value heads' keys and
        values, a sliding layer no more tokens than its window. A family whose layers keep something else (a
        latent, a recurrent state) writes its own."""
        heads, width = self.num_kv_heads, self.head_dim
        assert heads is not None and width is not None  # __post_init__ sets both
        return tuple(KeysAndValues(heads, width, width, self.sliding_window if is_sliding(self, i) else None)
                     for i in range(self.num_layers))

    def cache_bytes(self, tokens: int, batch: int = 1, dtype: torch.dtype = torch.bfloat16) -> int:
        """Bytes of a decoding cache after ``tokens`` tokens of ``batch`` rows, in ``dtype``."""
        return cache_bytes(self.cache_sizes(), tokens, dtype, batch)

    def cache_bytes_per_token(self, dtype: torch.dtype = torch.bfloat16) -> int:
        """What each token adds to a row's cache once the context is longer than every window (Llama-3.2-1B in
        bf16: 32,768 bytes)."""
        return bytes_per_token(self.cache_sizes(), dtype)


class ModernDecoder(LanguageModel):
    """A Llama-style language model (Qwen2 with ``qkv_bias``, Mistral with ``sliding_window``).

    Called exactly like :class:`~attnlab.models.GPT` (the same :class:`LanguageModel`), so
    :func:`attnlab.generation.generate`, the trainer and :func:`attnlab.inspect.capture` take either.

    Example:
        >>> model = ModernDecoder(ModernDecoderConfig.from_preset("tiny"))
        >>> model(torch.zeros(2, 5, dtype=torch.long)).logits.shape      # (B, T, vocab)
        torch.Size([2, 5, 256])
        >>> model.new_cache(1)[0].keys.shape     # (B, num_kv_heads, capacity, head_dim): 2 heads, not 4
        torch.Size([1, 2, 16, 8])
    """

    FINAL_NORM = "norm_f"
    ROTARY = True  # each block's attention turns q and k by the token's position: nothing is added to x

    def __init__(self, config: ModernDecoderConfig) -> None:
        super().__init__()
        if not isinstance(config, ModernDecoderConfig):
            raise TypeError(tr("ModernDecoder: config must be a ModernDecoderConfig, got {config_type}",
                               config_type=type(config).__name__))
        self.config = c = config
        assert c.head_dim is not None  # ModernDecoderConfig.__post_init__ fills it
        # one rotary embedding for every block: it holds no weights, only the frequencies' recipe
        self.rotary = c.rotary_embedding()
        # Gemma 3: the sliding layers turn q and k with their own base, unscaled
        self.rotary_local = self.rotary if c.rope_local_base is None else \
            RotaryEmbedding(c.head_dim, c.context_length, c.rope_local_base)
        self.tok_emb = nn.Embedding(c.vocab_size, c.d_model)
        self.drop = nn.Dropout(c.dropout)
        self.blocks = nn.ModuleList(
            ModernBlock(c.layer_spec(i), self.rotary_local if is_sliding(c, i) else self.rotary)
            for i in range(c.num_layers)
        )
        self.norm_f = RMSNorm(c.d_model, eps=c.norm_eps, unit_offset=c.norm_unit_offset)
        self.head = nn.Linear(c.d_model, c.vocab_size, bias=False)
        if c.tie_weights:
            self.head.weight = self.tok_emb.weight
        self.init_weights(residual_projections="down_proj")

    @property
    def cache_rebuild_length(self) -> int | None:
        """The sequence length at which a KV cache filled before it must be dropped and the whole sequence
        recomputed (LongRoPE's L₀ + 1: :attr:`~attnlab.layers.RotaryEmbedding.rebuild_length`); None: never."""
        return self.rotary.rebuild_length

    def embed(self, idx: Tensor, positions: Tensor | None, offset: int) -> Tensor:
        """The token embedding alone: positions enter the blocks, as rotations of q and k (with a left-padded
        batch, each token turned by its position among the real tokens of its row). Gemma scales it by √d_model,
        the factor rounded to the embedding's dtype as Gemma's checkpoints were trained."""
        x = self.tok_emb(idx)
        if self.config.embed_scale:
            x = x * torch.tensor(self.config.d_model ** 0.5, dtype=x.dtype)
        return x

    def logits(self, x: Tensor) -> Tensor:
        """The final norm, the head, and Gemma 2's soft-cap ``cap · tanh(z / cap)`` of the logits if it has one."""
        logits = super().logits(x)
        return logits if self.config.final_softcap is None else softcap(logits, self.config.final_softcap)
