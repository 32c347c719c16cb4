"""What a layer's cache holds, in bytes, read from its config alone: the arithmetic of "how big is the cache".

Each layer keeps one of three things while a decoder writes:

* **keys and values** (multi-head, grouped-query and multi-query attention, windows): per token, each key/value
  head's key and value, ``kv_heads · (key_dim + value_dim)`` numbers; a sliding-window layer keeps at most
  ``window`` tokens (its rolling buffer), so past the window it costs nothing more;
* **a latent** (multi-head latent attention, DeepSeek-V2/V3, Kimi): per token one compressed ``c_kv`` of
  ``kv_lora_rank`` numbers and the rope key shared by every head, ``qk_rope_head_dim``; DeepSeek sparse attention
  (V3.2) adds its lightning indexer's key, ``index_head_dim`` more;
* **a state** (linear attention: Gated DeltaNet, Kimi delta attention): a ``key_dim × value_dim`` matrix per head,
  whatever the length, kept in float32 even in a bf16 model, and the short convolution's last inputs.

A config says what its layers keep with ``cache_sizes()`` (:class:`~attnlab.models.ModernDecoderConfig` has one
for its layers of keys and values; a family whose layers keep something else writes its own); :func:`cache_bytes`
adds them up. The tests hold each formula to the bytes a filled cache really holds.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch

from attnlab.i18n import tr


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

    def per_token(self, dtype: torch.dtype) -> int:
        """What one more token adds once the context is longer than any window: nothing to a windowed layer."""
        return 0 if self.window is not None else self.nbytes(1, dtype)


@dataclass(frozen=True)
class Latent:
    """Multi-head latent attention's cache: per token the latent ``c_kv`` (``kv_lora_rank``) and the shared rope key
    (``rope_dim``), and with DeepSeek sparse attention the indexer's key (``index_dim``), for every head at once."""

    kv_lora_rank: int
    rope_dim: int
    index_dim: int = 0

    def nbytes(self, tokens: int, dtype: torch.dtype) -> int:
        return tokens * (self.kv_lora_rank + self.rope_dim + self.index_dim) * dtype.itemsize

    def per_token(self, dtype: torch.dtype) -> int:
        return self.nbytes(1, dtype)


@dataclass(frozen=True)
class State:
    """A linear-attention layer's cache, the same at every length: ``heads`` states of ``key_dim × value_dim`` in
    float32, and the causal convolution's last ``conv_kernel - 1`` inputs of ``conv_channels`` in the model's
    dtype."""

    heads: int
    key_dim: int
    value_dim: int
    conv_channels: int = 0
    conv_kernel: int = 1

    def nbytes(self, tokens: int, dtype: torch.dtype) -> int:
        state = self.heads * self.key_dim * self.value_dim * torch.float32.itemsize
        return state + self.conv_channels * (self.conv_kernel - 1) * dtype.itemsize

    def per_token(self, dtype: torch.dtype) -> int:
        return 0


LayerCacheSize = KeysAndValues | Latent | State


def cache_bytes(layers: Sequence[LayerCacheSize], tokens: int, dtype: torch.dtype = torch.bfloat16,
                batch: int = 1) -> int:
    """The bytes of cache ``batch`` sequences of ``tokens`` tokens take in ``layers``, in ``dtype`` (a state in
    float32 whatever it is)."""
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 0:
        raise ValueError(tr("tokens must be an integer >= 0, got {tokens!r}", tokens=tokens))
    return batch * sum(layer.nbytes(tokens, dtype) for layer in layers)


def bytes_per_token(layers: Sequence[LayerCacheSize], dtype: torch.dtype = torch.bfloat16) -> int:
    """What each token adds to one sequence's cache once the context is longer than every window."""
    return sum(layer.per_token(dtype) for layer in layers)
