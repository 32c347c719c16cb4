"""What every model configuration shares: named presets, the common checks, and the dtype names.

Each family's config is a dataclass beside its model (:class:`~attnlab.models.GPTConfig` in ``gpt.py``, ...),
checked in ``__post_init__``, with named presets: ``GPTConfig.from_preset("gpt2-small")``,
``EncoderConfig.from_preset("bert-base", vocab_size=...)``, ``ModernDecoderConfig.from_preset("llama-3.2-1b")``,
``TransformerConfig.from_preset("transformer-base")``: any field may be overridden by keyword. Parameter counts of
the presets are in docs/transformer.md and checked by the tests (on the meta device: nothing allocated).
"""

from __future__ import annotations

import dataclasses
from typing import Any, ClassVar, Self

import torch

from attnlab.arguments import check_positive_int
from attnlab.functional import BACKENDS
from attnlab.i18n import N_, tr
from attnlab.layers.block import BlockSpec
from attnlab.layers.feedforward import ACTIVATIONS

#: the messages of the building blocks' checks (attnlab.arguments, attnlab.layers) that a config runs with ``tr``,
#: marked for the catalog: the blocks themselves speak plain English (docs/translations.md)
TRANSLATED_CHECKS = (N_("{owner}: {name} must be a positive int, got {value!r}"),
                     N_("{name}: expected {choices}, got {value!r}"),
                     N_("{owner}: norm must be 'post' or 'pre', got {norm!r}"))


def common_checks(cfg: Any, owner: str) -> None:
    for name in ("vocab_size", "context_length", "d_model", "num_layers", "num_heads", "d_ff"):
        check_positive_int(owner, name, getattr(cfg, name), tr)
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


def block_spec(cfg: Any, **layout: Any) -> BlockSpec:
    """The :class:`~attnlab.layers.BlockSpec` of a config of GPT's, BERT's or the original Transformer's family:
    its widths, heads, dropout and attention backend, with ``layout`` (norm, causal, biases, eps, scale) the
    family's own."""
    return BlockSpec(cfg.d_model, cfg.num_heads, cfg.d_ff, cfg.dropout, activation=cfg.activation,
                     backend=cfg.backend, **layout)


@dataclasses.dataclass  # no fields of its own: what a config's dataclass is, so dataclasses.fields reads any
class Presets:
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


#: the short names of the dtypes a model computes in (``--dtype``, the ``dtype`` key of a training config)
DTYPES: dict[str, torch.dtype] = {"fp32": torch.float32, "bf16": torch.bfloat16, "fp16": torch.float16}


def check_dtype_name(dtype: str, name: str = "dtype") -> torch.dtype:
    """A name of :data:`DTYPES` -> the torch dtype; anything else is a ValueError naming the choices."""
    if not isinstance(dtype, str) or dtype not in DTYPES:
        raise ValueError(tr("{name}: expected one of {dtypes}, got {dtype!r}", name=name,
                            dtypes=', '.join(map(repr, DTYPES)), dtype=dtype))
    return DTYPES[dtype]
