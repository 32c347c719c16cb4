"""Model configurations: dataclasses checked in ``__post_init__``, with named presets.

``GPTConfig.from_preset("gpt2-small")``, ``EncoderConfig.from_preset("bert-base", vocab_size=...)`` or
``ModernDecoderConfig.from_preset("llama-3.2-1b")``:
any field may be overridden by keyword. Parameter counts of the presets are in docs/transformer.md
and checked by the tests (on the meta device: nothing allocated).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from attnlab.functional import BACKENDS
from attnlab.i18n import tr
from attnlab.layers.feedforward import ACTIVATIONS
from attnlab.layers.rotary import RopeScaling


def _positive_int(owner: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(tr("{owner}: {name} must be a positive int, got {value!r}", owner=owner, name=name,
                            value=value))


def _common_checks(cfg: Any, owner: str) -> None:
    for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"):
        _positive_int(owner, name, getattr(cfg, name))
    if cfg.d_model % cfg.num_heads:
        raise ValueError(tr("{owner}: d_model={d_model} must be divisible by num_heads={num_heads}", owner=owner,
                            d_model=cfg.d_model, num_heads=cfg.num_heads))
    if isinstance(cfg.dropout, bool) or not isinstance(cfg.dropout, int | float) or not 0.0 <= cfg.dropout < 1.0:
        raise ValueError(tr("{owner}: dropout must be a float in [0, 1), got {dropout!r}", owner=owner,
                            dropout=cfg.dropout))
    if cfg.activation not in ACTIVATIONS:
        raise ValueError(tr("{owner}: activation must be one of {activations}, got {activation!r}", owner=owner,
                            activations=ACTIVATIONS, activation=cfg.activation))
    if not isinstance(cfg.layer_norm_eps, int | float) or not cfg.layer_norm_eps > 0:
        raise ValueError(tr("{owner}: layer_norm_eps must be a float > 0, got {layer_norm_eps!r}", owner=owner,
                            layer_norm_eps=cfg.layer_norm_eps))
    if cfg.backend not in BACKENDS:
        raise ValueError(tr("{owner}: backend must be one of {backends}, got {backend!r}", owner=owner,
                            backends=BACKENDS, backend=cfg.backend))


class _Presets:
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> Self:
        """The named configuration, with any field overridden by keyword."""
        if name not in cls.PRESETS:
            raise ValueError(tr("{name}: unknown preset {name_2!r}; choose from {presets}", name=cls.__name__,
                                name_2=name, presets=sorted(cls.PRESETS)))
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise TypeError(tr("{name}.from_preset: unknown field(s) {unknown}; fields are {fields}",
                               name=cls.__name__, unknown=unknown, fields=sorted(fields)))
        return cls(**{**cls.PRESETS[name], **overrides})


@dataclass
class GPTConfig(_Presets):
    """A GPT-style decoder (see :class:`attnlab.models.GPT`).

    Args:
        vocab_size: number of token ids.
        context_length: the most positions the model has (learned position table size).
        d_model: width of every token vector.
        num_layers: number of pre-LN causal blocks.
        num_heads: attention heads per block; must divide ``d_model``.
        d_ff: feed-forward hidden width; None means ``4 · d_model``.
        dropout: on embeddings, attention weights and sublayer outputs, training only.
        qkv_bias: biases on the query/key/value projections (GPT-2 has them).
        bias: biases on the attention output projection, the feed-forward maps and the LayerNorms
            (nanoGPT's ``bias=False`` is ``bias=False, qkv_bias=False``).
        activation: feed-forward non-linearity (GPT-2: ``"gelu_tanh"``).
        layer_norm_eps: LayerNorm epsilon.
        backend: attention backend for the blocks.
        tie_weights: the output head shares the token embedding's matrix (GPT-2); False gives the head its own.
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int | None = None
    dropout: float = 0.0
    qkv_bias: bool = False
    bias: bool = True
    activation: str = "gelu_tanh"
    layer_norm_eps: float = 1e-5
    backend: str = "auto"
    tie_weights: bool = True

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # trains in seconds on a laptop CPU; byte-sized vocabulary by default
        "tiny": dict(vocab_size=256, context_length=32, d_model=32, num_layers=2, num_heads=2, qkv_bias=True),
        # nanoGPT's "baby" Shakespeare model
        "baby": dict(vocab_size=256, context_length=64, d_model=128, num_layers=4, num_heads=4, qkv_bias=True),
        "gpt2-small": dict(vocab_size=50257, context_length=1024, d_model=768, num_layers=12, num_heads=12,
                           qkv_bias=True),
        "gpt2-xl": dict(vocab_size=50257, context_length=1024, d_model=1600, num_layers=48, num_heads=25,
                        qkv_bias=True),
    }

    def __post_init__(self) -> None:
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if isinstance(self.d_model, int) else self.d_model
        _common_checks(self, type(self).__name__)

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


@dataclass
class EncoderConfig(_Presets):
    """A BERT-style encoder (see :class:`attnlab.models.TransformerEncoder`).

    Args:
        vocab_size: number of token ids.
        context_length: the most positions the model has (BERT: 512).
        d_model: width of every token vector.
        num_layers: number of post-LN blocks.
        num_heads: attention heads per block; must divide ``d_model``.
        d_ff: feed-forward hidden width; None means ``4 · d_model``.
        type_vocab_size: number of token types (segments A/B in BERT); 0 for none.
        dropout: on embeddings, attention weights and sublayer outputs, training only.
        activation: feed-forward non-linearity (BERT: exact ``"gelu"``).
        layer_norm_eps: LayerNorm epsilon (BERT: 1e-12).
        pad_token_id: the id used for padding.
        backend: attention backend for the blocks.
    """

    vocab_size: int
    context_length: int
    d_model: int
    num_layers: int
    num_heads: int
    d_ff: int | None = None
    type_vocab_size: int = 2
    dropout: float = 0.0
    activation: str = "gelu"
    layer_norm_eps: float = 1e-12
    pad_token_id: int = 0
    backend: str = "auto"

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        "bert-base": dict(vocab_size=30522, context_length=512, d_model=768, num_layers=12, num_heads=12, d_ff=3072),
        # the encoder of the usual tutorials: BERT-base's dimensions with a 30,000-token vocabulary
        "tutorial-encoder": dict(vocab_size=30000, context_length=512, d_model=768, num_layers=12, num_heads=12,
                                 d_ff=3072),
        "minilm-l6": dict(vocab_size=30522, context_length=512, d_model=384, num_layers=6, num_heads=12, d_ff=1536),
    }

    def __post_init__(self) -> None:
        if self.d_ff is None:
            self.d_ff = 4 * self.d_model if isinstance(self.d_model, int) else self.d_model
        _common_checks(self, type(self).__name__)
        if isinstance(self.type_vocab_size, bool) or not isinstance(self.type_vocab_size, int) \
                or self.type_vocab_size < 0:
            raise ValueError(tr("EncoderConfig: type_vocab_size must be an int >= 0, got {type_vocab_size!r}",
                                type_vocab_size=self.type_vocab_size))
        if not isinstance(self.pad_token_id, int) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                tr("EncoderConfig: pad_token_id must be in [0, vocab_size={vocab_size}), got {pad_token_id!r}",
                   vocab_size=self.vocab_size, pad_token_id=self.pad_token_id)
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads


@dataclass
class ModernDecoderConfig(_Presets):
    """A decoder of today's open models: Llama, Qwen2, Mistral (see :class:`attnlab.models.ModernDecoder`).

    Args:
        vocab_size: number of token ids.
        context_length: the longest sequence (RoPE has no table; this is the length trained for).
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
        sliding_window: keys each query sees, its own included (Mistral 7B v0.1: 4096); None: all before it.
        norm_eps: RMSNorm epsilon.
        tie_weights: the output head shares the token embedding's matrix (Llama-3.2-1B and Qwen2.5-0.5B do).
        backend: attention backend for the blocks.
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
        "qwen2.5-0.5b": dict(vocab_size=151936, context_length=32768, d_model=896, num_layers=24, num_heads=14,
                             num_kv_heads=2, d_ff=4864, qkv_bias=True, rope_base=1000000.0, norm_eps=1e-6,
                             tie_weights=True),
        "mistral-7b": dict(vocab_size=32000, context_length=32768, d_model=4096, num_layers=32, num_heads=32,
                           num_kv_heads=8, d_ff=14336, rope_base=10000.0, sliding_window=4096, norm_eps=1e-5,
                           tie_weights=False),
    }

    def __post_init__(self) -> None:
        owner = type(self).__name__
        for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads"):
            _positive_int(owner, name, getattr(self, name))
        if self.num_kv_heads is None:
            self.num_kv_heads = self.num_heads
        _positive_int(owner, "num_kv_heads", self.num_kv_heads)
        if self.num_heads % self.num_kv_heads:
            raise ValueError(tr("{owner}: num_heads must be divisible by num_kv_heads, got num_heads={num_heads}, "
                                "num_kv_heads={num_kv_heads}", owner=owner, num_heads=self.num_heads,
                                num_kv_heads=self.num_kv_heads))
        if self.head_dim is None:
            if self.d_model % self.num_heads:
                raise ValueError(tr("{owner}: d_model={d_model} must be divisible by num_heads={num_heads} (or give "
                                    "head_dim)", owner=owner, d_model=self.d_model, num_heads=self.num_heads))
            self.head_dim = self.d_model // self.num_heads
        _positive_int(owner, "head_dim", self.head_dim)
        if self.head_dim % 2:
            raise ValueError(tr("{owner}: head_dim must be even (RoPE rotates pairs of features), got {head_dim}",
                                owner=owner, head_dim=self.head_dim))
        if self.d_ff is None:
            self.d_ff = math.ceil(8 * self.d_model / 3 / 8) * 8
        _positive_int(owner, "d_ff", self.d_ff)
        if self.sliding_window is not None:
            _positive_int(owner, "sliding_window (keys seen, own included)", self.sliding_window)
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
