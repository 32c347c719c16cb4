"""DiffLlama: Llama's decoder with differential attention in every layer (transformers' ``DiffLlamaForCausalLM``).

Everything but the attention is Llama's (RoPE, RMSNorm, SwiGLU, grouped key/value heads). Each layer's attention
takes two softmax maps per pair of heads and subtracts them, with a learned λ whose starting point λ_init grows with
the layer's depth (:mod:`attnlab.attention.differential`): so a config here is a
:class:`~attnlab.models.ModernDecoderConfig` whose :meth:`DiffLlamaConfig.layer_spec` hands each block a
:class:`~attnlab.attention.differential.DifferentialAttentionSpec` of its depth. The model is
:class:`~attnlab.models.ModernDecoder` itself.

Example:
    >>> import torch
    >>> from attnlab.models import ModernDecoder
    >>> model = ModernDecoder(DiffLlamaConfig.from_preset("baby", vocab_size=82))
    >>> round(model.blocks[3].attn.lambda_init, 4)        # 0.8 − 0.6 · exp(−0.3 · 3)
    0.5561
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import Any, ClassVar

from attnlab.attention.differential import DifferentialAttentionSpec
from attnlab.attention.spec import AttentionSpec
from attnlab.i18n import tr
from attnlab.layers import ModernBlockSpec
from attnlab.models.modern.decoder import ModernDecoderConfig

#: the newest models' options that differential attention does not take, at the values that turn them off
_NOT_DIFFERENTIAL = (("qk_norm", None), ("attn_softcap", None), ("sinks", False), ("query_pre_attn_scalar", None))


@dataclass
class DiffLlamaConfig(ModernDecoderConfig):
    """A :class:`~attnlab.models.ModernDecoderConfig` whose every layer attends differentially.

    Args:
        lambda_std: the standard deviation the λ vectors start with when the model is made (transformers'
            ``lambda_std_dev``; a checkpoint's own λ replace them).
        (the rest): :class:`~attnlab.models.ModernDecoderConfig`'s. ``num_heads`` and ``num_kv_heads`` must be even
            (heads pair up); ``dropout`` must be 0 (the paper defines no dropout of a difference of two maps).
    """

    lambda_std: float = 0.1

    PRESETS: ClassVar[dict[str, dict[str, Any]]] = {
        # the modern baby with differential attention: 4 query heads (2 pairs) over 2 key/value heads
        "baby": dict(vocab_size=256, context_length=64, d_model=128, num_layers=4, num_heads=4, num_kv_heads=2,
                     d_ff=392, tie_weights=True),
        # transformers' own DiffLlamaConfig() (no DiffLlama checkpoint's config.json could be read here): 16 layers
        # of 2048, 32 heads (16 pairs), d_ff 8192, vocab 32,000, head untied
        "diffllama-default": dict(vocab_size=32000, context_length=2048, d_model=2048, num_layers=16, num_heads=32,
                                  num_kv_heads=32, d_ff=8192, norm_eps=1e-5, tie_weights=False),
    }

    def __post_init__(self) -> None:
        super().__post_init__()
        owner = type(self).__name__
        for name in ("num_heads", "num_kv_heads"):
            if getattr(self, name) % 2:
                raise ValueError(tr("{owner}: differential attention pairs its heads (h with h + H/2), so {name} "
                                    "must be even, got {name}={value}", owner=owner, name=name,
                                    value=getattr(self, name)))
        if self.dropout:
            raise ValueError(tr("{owner}: differential attention has no dropout (the paper defines none for a "
                                "difference of two maps), got dropout={dropout}", owner=owner, dropout=self.dropout))
        for name, off in _NOT_DIFFERENTIAL:
            if getattr(self, name) != off:
                raise ValueError(tr("{owner}: differential attention does not combine with {name}={value!r}",
                                    owner=owner, name=name, value=getattr(self, name)))
        value = self.lambda_std
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
            raise ValueError(tr("{owner}: lambda_std must be a finite number > 0, got {value!r}", owner=owner,
                                value=value))

    def layer_spec(self, layer: int) -> ModernBlockSpec:
        """Llama's block, its attention differential at depth ``layer``."""
        spec = super().layer_spec(layer)
        assert isinstance(spec.attention, AttentionSpec)  # Llama's, written by options.layer_spec
        attention = DifferentialAttentionSpec(spec.attention.replace(owner="DifferentialAttention"), depth=layer,
                                              eps=self.norm_eps, lambda_std=self.lambda_std)
        return dataclasses.replace(spec, attention=attention)

