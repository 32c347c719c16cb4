"""What a multi-head attention module is, but its weights: one frozen spec, checked once, read by the module.

The book's module has five numbers (``d_in``, ``d_out``, ``context_length``, ``dropout``, ``num_heads``); today's
decoders add a dozen options (grouped key/value heads, a window, QK-norm, soft-capping, sinks, a scale of their
own). Rather than a constructor with twenty keywords passed on from block to module, a model writes them down once
in an :class:`AttentionSpec` and hands it over: ``MultiHeadAttention.from_spec(spec)``, or
``GroupedQueryAttention(spec, rotary)``.

Example:
    >>> spec = AttentionSpec(d_in=64, d_out=64, num_heads=8, num_kv_heads=2, sliding_window=16)
    >>> spec.head_dim, spec.group_size
    (8, 4)
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from torch import nn

from attnlab.arguments import check_choice, check_positive_int
from attnlab.functional.backends import BACKENDS, KERNELS

#: where ``qk_norm`` normalises: each head's vector, or the whole projection
QK_NORMS = ("head", "projection")


@dataclass(frozen=True)
class AttentionSpec:
    """Widths, heads, masks and options of one attention module.

    Attributes:
        d_in: input width.
        d_out: output width (of ``out_proj``).
        num_heads: query heads.
        num_kv_heads: key/value heads; must divide ``num_heads`` (None: ``num_heads``, plain multi-head attention;
            1: multi-query attention).
        head_dim: width of one head (None: ``d_out // num_heads``). Queries are ``num_heads · head_dim`` wide, keys
            and values ``num_kv_heads · head_dim``.
        context_length: the longest sequence accepted, cache included (None: no limit).
        dropout: dropout on the attention weights, training mode only.
        qkv_bias: biases on the query/key/value projections (BERT, GPT-2 and Qwen2 have them).
        out_bias: a bias on ``out_proj`` (the book and GPT-2 have one; Llama does not).
        is_causal: mask future keys (a decoder); False for an encoder or a cross-attention.
        scale: the scores' factor (None: ``1/√head_dim``; Gemma: ``query_pre_attn_scalar ** -0.5``).
        sliding_window: each query sees the last ``sliding_window`` positions, its own included (None: all).
        qk_norm: None, ``"head"`` (a norm of width head_dim on every head: Qwen3, Gemma 3) or ``"projection"`` (of
            the whole query and key projections: OLMo 2), before RoPE; built by ``make_norm``.
        make_norm: ``width -> module`` building the q and k norms (an RMSNorm, from the model); not compared.
        softcap: scores ``softcap · tanh(s / softcap)`` (Gemma 2: 50); None: as they are.
        sinks: a learned logit per query head joins every softmax (gpt-oss).
        output_gate: each head's context times ``σ(W_gate x)`` before ``out_proj``, a gate per feature computed from
            the query's own input (the gated attention of Qwen3-Next and Qwen3.5).
        backend: the attention kernel, see :func:`attnlab.functional.scaled_dot_product_attention`.
        owner: the name errors begin with (the module being built); not compared.
    """

    d_in: int
    d_out: int
    num_heads: int = 1
    num_kv_heads: int | None = None
    head_dim: int | None = None
    context_length: int | None = None
    dropout: float = 0.0
    qkv_bias: bool = False
    out_bias: bool = True
    is_causal: bool = True
    scale: float | None = None
    sliding_window: int | None = None
    qk_norm: str | None = None
    make_norm: Callable[[int], nn.Module] | None = field(default=None, compare=False, repr=False)
    softcap: float | None = None
    sinks: bool = False
    output_gate: bool = False
    backend: str = "auto"
    owner: str = field(default="AttentionSpec", compare=False, repr=False)

    def __post_init__(self) -> None:
        owner = self.owner
        for name in ("d_in", "d_out", "num_heads"):
            check_positive_int(owner, name, getattr(self, name))
        if self.num_kv_heads is None:
            object.__setattr__(self, "num_kv_heads", self.num_heads)
        check_positive_int(owner, "num_kv_heads", self.num_kv_heads)
        assert self.num_kv_heads is not None  # set just above when not given
        if self.num_heads % self.num_kv_heads:
            raise ValueError(f"{owner}: num_heads must be divisible by num_kv_heads (each key/value head serves a "
                             f"whole group of query heads), got num_heads={self.num_heads}, "
                             f"num_kv_heads={self.num_kv_heads}")
        if self.head_dim is None:
            if self.d_out % self.num_heads:
                raise ValueError(f"{owner}: d_out must be divisible by num_heads (or give head_dim), got "
                                 f"d_out={self.d_out}, num_heads={self.num_heads}")
            object.__setattr__(self, "head_dim", self.d_out // self.num_heads)
        check_positive_int(owner, "head_dim", self.head_dim)
        self._check_options()

    def _check_options(self) -> None:
        owner = self.owner
        if isinstance(self.dropout, bool) or not isinstance(self.dropout, int | float) or not 0.0 <= self.dropout < 1:
            raise ValueError(f"{owner}: dropout must be in [0, 1), got {self.dropout!r}")
        if self.context_length is not None:
            check_positive_int(owner, "context_length", self.context_length)
        if self.sliding_window is not None and (isinstance(self.sliding_window, bool)
                                                or not isinstance(self.sliding_window, int) or self.sliding_window < 1):
            raise ValueError(f"{owner}: sliding_window must be None or an int >= 1 (keys seen, own included), got "
                             f"{self.sliding_window!r}")
        if self.scale is not None and (isinstance(self.scale, bool) or not isinstance(self.scale, int | float)
                                       or not math.isfinite(self.scale) or not self.scale > 0):
            raise ValueError(f"{owner}: scale must be None (1/√head_dim) or a number > 0, got {self.scale!r}")
        if self.qk_norm is not None and self.qk_norm not in QK_NORMS:
            raise ValueError(f"{owner}: qk_norm must be None, 'head' or 'projection', got {self.qk_norm!r}")
        if self.qk_norm is not None and self.make_norm is None:
            raise ValueError(f"{owner}: qk_norm={self.qk_norm!r} needs make_norm, the norm's builder (width -> module)")
        if self.softcap is not None and (isinstance(self.softcap, bool) or not isinstance(self.softcap, int | float)
                                         or not math.isfinite(self.softcap) or self.softcap <= 0):
            raise ValueError(f"{owner}: softcap must be None or a finite number > 0 (scores become cap · tanh(s / "
                             f"cap)), got {self.softcap!r}")
        check_choice("backend", self.backend, BACKENDS)
        if self.softcap is not None and self.backend != "auto" and not KERNELS[self.backend].softcap:
            raise ValueError(f"{owner}: backend={self.backend!r} cannot soft-cap the scores (softcap={self.softcap}); "
                             f"use one of {[name for name, k in KERNELS.items() if k.softcap]} or 'auto'")

    @property
    def group_size(self) -> int:
        """Query heads per key/value head."""
        assert self.num_kv_heads is not None  # __post_init__ fills it
        return self.num_heads // self.num_kv_heads

    def replace(self, **changes: Any) -> AttentionSpec:  # Any: each field its own type, checked again
        """This spec with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)
