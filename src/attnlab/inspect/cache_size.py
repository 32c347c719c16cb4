"""How big is the cache: the bytes a decoder keeps for one sequence while it decodes, read from its config.

Each layer keeps one of three things, and its size follows from the config's fields alone:

* **keys and values** (multi-head, grouped-query and multi-query attention, windows): per token, each key/value
  head's key and value, ``kv_heads · (key_dim + value_dim)`` numbers; a sliding-window layer keeps at most
  ``window`` tokens (a rolling buffer), so past the window it costs nothing more;
* **a latent** (multi-head latent attention, DeepSeek-V2/V3, Kimi): per token one compressed ``c_kv`` of
  ``kv_lora_rank`` numbers and the rope key shared by every head, ``qk_rope_head_dim``; DeepSeek sparse attention
  (V3.2) adds its lightning indexer's key, ``index_head_dim`` more;
* **a state** (linear attention: Gated DeltaNet, Kimi delta attention): a ``key_dim × value_dim`` matrix per head,
  whatever the length, kept in float32 even in a bf16 model, and the short convolution's last inputs.

:func:`cache_bytes` adds the layers up at a length; :data:`REAL_MODELS` names the configs the docs' table and plot
show, built from attnlab's own presets (:func:`real_models`), so the page is the code's arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.i18n import N_, _, tr


@dataclass(frozen=True)
class KeysAndValues:
    """A softmax attention layer's cache: ``kv_heads`` keys of ``key_dim`` and values of ``value_dim`` per token,
    the last ``window`` tokens only where the layer has a window (None: every token)."""

    kv_heads: int
    key_dim: int
    value_dim: int
    window: int | None = None

    def nbytes(self, tokens: int, dtype: torch.dtype) -> int:
        kept = tokens if self.window is None else min(tokens, self.window)
        return kept * self.kv_heads * (self.key_dim + self.value_dim) * dtype.itemsize


@dataclass(frozen=True)
class Latent:
    """Multi-head latent attention's cache: per token the latent ``c_kv`` (``kv_lora_rank``) and the shared rope key
    (``rope_dim``), and with DeepSeek sparse attention the indexer's key (``index_dim``), for every head at once."""

    kv_lora_rank: int
    rope_dim: int
    index_dim: int = 0

    def nbytes(self, tokens: int, dtype: torch.dtype) -> int:
        return tokens * (self.kv_lora_rank + self.rope_dim + self.index_dim) * dtype.itemsize


@dataclass(frozen=True)
class State:
    """A linear-attention layer's cache, the same at every length: ``heads`` states of ``key_dim × value_dim`` in
    float32, and the causal convolution's last ``conv_kernel`` inputs of ``conv_channels`` in the model's dtype."""

    heads: int
    key_dim: int
    value_dim: int
    conv_channels: int
    conv_kernel: int

    def nbytes(self, tokens: int, dtype: torch.dtype) -> int:
        state = self.heads * self.key_dim * self.value_dim * torch.float32.itemsize
        return state + self.conv_channels * self.conv_kernel * dtype.itemsize


LayerCacheSize = KeysAndValues | Latent | State


def layer_sizes(config: Any) -> tuple[LayerCacheSize, ...]:
    """What each layer of a decoder built from ``config`` keeps: the config's own ``cache_sizes()`` (a family whose
    layers keep something else defines it), else one :class:`KeysAndValues` a layer from the usual fields."""
    own = getattr(config, "cache_sizes", None)
    if own is not None:
        return tuple(own())
    kv_heads = getattr(config, "num_kv_heads", None) or config.num_heads
    head_dim = getattr(config, "head_dim", None) or config.d_model // config.num_heads
    types = getattr(config, "layer_types", None)
    window = getattr(config, "sliding_window", None)

    def windowed(layer: int) -> int | None:
        return window if types is None or types[layer] == "sliding_attention" else None
    return tuple(KeysAndValues(kv_heads, head_dim, head_dim, windowed(i)) for i in range(config.num_layers))


def cache_bytes(config: Any, tokens: int, dtype: torch.dtype = torch.bfloat16, batch: int = 1) -> int:
    """The bytes of cache ``batch`` sequences of ``tokens`` tokens take in a decoder of ``config``, its keys and
    values (or latents) in ``dtype``."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(tr("tokens must be an integer >= 0, got {tokens!r}", tokens=tokens))
    return batch * sum(layer.nbytes(tokens, dtype) for layer in layer_sizes(config))


@dataclass(frozen=True)
class RealModel:
    """A published model's shape, as an attnlab preset: ``label`` in the table, what kind of cache it shows."""

    label: str
    mechanism: str  # English, shown through attnlab.i18n._
    config: Callable[[], Any]


def _preset(architecture: str, preset: str, **overrides: Any) -> Callable[[], Any]:
    def build() -> Any:
        from attnlab.models.config import Presets
        from attnlab.models.registry import architecture as row

        config: type[Presets] = row(architecture).config
        return config.from_preset(preset, **overrides)
    return build


#: the rows of the docs' table and plot: each the preset of a published checkpoint (its config.json's numbers)
REAL_MODELS: list[RealModel] = [
    RealModel("Llama-3-8B (MHA)", N_("MHA, 32 KV heads"), _preset("modern", "llama-3-8b", num_kv_heads=32)),
    RealModel("Llama-3-8B", N_("GQA, 8 KV heads"), _preset("modern", "llama-3-8b")),
    RealModel("Gemma-3-1B", N_("window 512, 5:1"), _preset("modern", "gemma-3-1b")),
]


def real_models() -> list[RealModel]:
    """:data:`REAL_MODELS`, each a config on no device (nothing is allocated)."""
    return list(REAL_MODELS)


def table_rows(tokens: int, dtype: torch.dtype = torch.bfloat16,
               models: Sequence[RealModel] | None = None) -> list[tuple[str, str, int, int, int]]:
    """``(label, mechanism, bytes a new token adds at the start, bytes kept whatever the length, bytes at
    tokens)`` for each real model, one sequence."""
    rows = []
    for model in models if models is not None else real_models():
        config = model.config()
        fixed = cache_bytes(config, 0, dtype)
        rows.append((model.label, model.mechanism, cache_bytes(config, 1, dtype) - fixed, fixed,
                     cache_bytes(config, tokens, dtype)))
    return rows


#: the table's columns (English; translated where shown), ``{tokens}`` filled in
HEADERS = (N_("model"), N_("attention"), N_("per token"), N_("fixed"), N_("at {tokens:,}"))


def shown_bytes(n: int) -> str:
    """Bytes as the table shows them, in decimal units as the book counts them (17.18 GB): exact below a kB."""
    for unit, scale in (("GB", 10**9), ("MB", 10**6), ("kB", 10**3)):
        if n >= scale:
            return f"{n / scale:,.2f} {unit}"
    return f"{n:,} B"


def markdown_table(tokens: int = 32768, dtype: torch.dtype = torch.bfloat16) -> str:
    """The table as docs/modern.md shows it (in the reader's language), one sequence of ``tokens`` in ``dtype``."""
    lines = ["| " + " | ".join(_(h).format(tokens=tokens) for h in HEADERS) + " |", "|---|---|---:|---:|---:|"]
    for label, mechanism, per_token, fixed, total in table_rows(tokens, dtype):
        cells = (label, _(mechanism), shown_bytes(per_token), shown_bytes(fixed), shown_bytes(total))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)
