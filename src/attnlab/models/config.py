"""Model configurations: dataclasses checked in ``__post_init__``, with named presets.

``GPTConfig.from_preset("gpt2-small")`` or ``EncoderConfig.from_preset("bert-base", vocab_size=...)``:
any field may be overridden by keyword. Parameter counts of the presets are in docs/transformer.md
and checked by the tests (on the meta device: nothing allocated).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any, ClassVar, Self

from attnlab.functional import BACKENDS
from attnlab.layers.feedforward import ACTIVATIONS


def _positive_int(owner: str, name: str, value: Any) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{owner}: {name} must be a positive int, got {value!r}")


def _common_checks(cfg: Any, owner: str) -> None:
    for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"):
        _positive_int(owner, name, getattr(cfg, name))
    if cfg.d_model % cfg.num_heads:
        raise ValueError(f"{owner}: d_model={cfg.d_model} must be divisible by num_heads={cfg.num_heads}")
    if isinstance(cfg.dropout, bool) or not isinstance(cfg.dropout, int | float) or not 0.0 <= cfg.dropout < 1.0:
        raise ValueError(f"{owner}: dropout must be a float in [0, 1), got {cfg.dropout!r}")
    if cfg.activation not in ACTIVATIONS:
        raise ValueError(f"{owner}: activation must be one of {ACTIVATIONS}, got {cfg.activation!r}")
    if not isinstance(cfg.layer_norm_eps, int | float) or not cfg.layer_norm_eps > 0:
        raise ValueError(f"{owner}: layer_norm_eps must be a float > 0, got {cfg.layer_norm_eps!r}")
    if cfg.backend not in BACKENDS:
        raise ValueError(f"{owner}: backend must be one of {BACKENDS}, got {cfg.backend!r}")


class _Presets:
    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {}

    @classmethod
    def from_preset(cls, name: str, **overrides: Any) -> Self:
        """The named configuration, with any field overridden by keyword."""
        if name not in cls.PRESETS:
            raise ValueError(f"{cls.__name__}: unknown preset {name!r}; choose from {sorted(cls.PRESETS)}")
        fields = {f.name for f in dataclasses.fields(cls)}
        unknown = sorted(set(overrides) - fields)
        if unknown:
            raise TypeError(f"{cls.__name__}.from_preset: unknown field(s) {unknown}; fields are {sorted(fields)}")
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
            raise ValueError(f"EncoderConfig: type_vocab_size must be an int >= 0, got {self.type_vocab_size!r}")
        if not isinstance(self.pad_token_id, int) or not 0 <= self.pad_token_id < self.vocab_size:
            raise ValueError(
                f"EncoderConfig: pad_token_id must be in [0, vocab_size={self.vocab_size}), got {self.pad_token_id!r}"
            )

    @property
    def head_dim(self) -> int:
        return self.d_model // self.num_heads
