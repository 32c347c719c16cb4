"""StreamingLLM's cache (Xiao et al., 2023, "Efficient Streaming Language Models with Attention Sinks",
arXiv:2309.17453): the first ``sink_tokens`` positions kept for ever, plus a sliding window of the latest.

A model trained with full attention puts much of every softmax's weight on the first few tokens, whatever they
say: they are seen by every query, so they become where attention rests (the *attention sinks*). A plain window
cache evicts them, and the model's perplexity explodes as soon as the window starts to slide; keeping the first
four tokens beside the window keeps it fluent over an endless stream, with memory bounded by ``sink_tokens +
sliding_window`` positions.

Positions are those *within the cache*, as the paper does (§3.2): the kept keys are turned by RoPE as if they were
consecutive, ``0 … sink_tokens − 1`` for the sinks, then the window in order, and a new token sits at the next
place. A key written at one place moves down one place each time the window slides; the cache keeps each key as
it was rotated when written, with the place it was rotated for, and turns it on by the difference when it hands
it out: RoPE's rotations compose, so this equals rotating the unrotated key at its place now (and never accumulates
rounding, unlike turning the stored key a little at every step).

The slots are in place order: sinks first, then the window, oldest first; one new token past the capacity drops the
window's oldest. A prompt must fit the capacity (:func:`~attnlab.generation.generate` feeds a longer one token by
token); rows cannot be padded (every row is at the same place).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnlab.attention.cache import cached_causal_mask
from attnlab.i18n import tr
from attnlab.layers.rotary import apply_rotary
from attnlab.models.caches.dynamic import KVCache
from attnlab.models.caches.shape import CacheShape, layout_of


class SinkLayerKVCache:
    """One layer's keys and values: the first ``sink_tokens`` and the last ``sliding_window`` positions (a
    :class:`~attnlab.attention.cache.LayerCache`), rotated by ``rotary`` to their places in the cache.
    ``length`` counts every position seen, not the ones kept."""

    def __init__(self, batch: int, num_heads: int, sink_tokens: int, sliding_window: int, head_dim: int,
                 rotary: Any, dtype: torch.dtype, device: torch.device | str | None) -> None:
        self.sink_tokens, self.capacity, self.rotary = sink_tokens, sink_tokens + sliding_window, rotary
        self.keys = torch.empty(batch, num_heads, self.capacity, head_dim, dtype=dtype, device=device)
        self.values = torch.empty_like(self.keys)
        self.rotated_at = torch.zeros(self.capacity, dtype=torch.long, device=device)  # each slot's key's place
        self.length = 0
        self.memory_kv: tuple[Tensor, Tensor] | None = None
        self.spare: tuple[Tensor, Tensor] | None = None

    @property
    def context_length(self) -> None:
        """No limit: positions past the capacity evict the window's oldest, they are not refused."""
        return None

    @property
    def filled(self) -> int:
        """The slots in use: ``min(length, capacity)``."""
        return min(self.length, self.capacity)

    def positions(self, t_new: int) -> Tensor:
        """``(t_new,)`` the places of the next tokens in the cache (RoPE turns them by these): their positions
        while the cache has room, the last place once it is full."""
        if self.length + t_new > self.capacity and t_new > 1:
            raise ValueError(tr("SinkLayerKVCache: {t} new tokens after {length} do not fit its {capacity} places; "
                                "feed them one by one", t=t_new, length=self.length, capacity=self.capacity))
        start = min(self.length, self.capacity - t_new)
        return torch.arange(start, start + t_new, device=self.keys.device)

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Keep ``key, value (B, H, T, head_dim)``, rotated at :meth:`positions`; return every kept key turned to
        its place now, and the values, ``(B, H, filled, head_dim)``."""
        t, places = key.shape[2], self.positions(key.shape[2])
        if key.dtype != self.keys.dtype and not self.length:  # an empty cache takes the compute dtype
            self.keys = torch.empty_like(self.keys, dtype=key.dtype)
            self.values = torch.empty_like(self.keys)
        if self.length + t > self.capacity:  # one token, full: drop the window's oldest, everything after moves up
            kept = torch.cat([torch.arange(self.sink_tokens), torch.arange(self.sink_tokens + 1, self.capacity)])
            kept = kept.to(self.keys.device)
            self.keys[:, :, :-1] = self.keys[:, :, kept]
            self.values[:, :, :-1] = self.values[:, :, kept]
            self.rotated_at[:-1] = self.rotated_at[kept].clone()
        self.keys[:, :, places] = key
        self.values[:, :, places] = value
        self.rotated_at[places] = places
        self.length += t
        n = self.filled
        return self._turned(self.keys[:, :, :n], torch.arange(n, device=self.keys.device) - self.rotated_at[:n]), \
            self.values[:, :, :n]

    def _turned(self, keys: Tensor, by: Tensor) -> Tensor:
        """``keys (B, H, n, D)`` each turned on by ``by (n,)`` places (in float32; RoPE's angles without its
        attention factor, which the stored keys already carry)."""
        if not bool((by != 0).any()):
            return keys
        angles = by.float()[:, None] * self.rotary.inv_freq(None, keys.device)
        angles = torch.cat((angles, angles), dim=-1)
        return apply_rotary(keys.float(), angles.cos(), angles.sin()).to(keys.dtype)

    def attn_mask(self, t_new: int, is_causal: bool, window: int | None = None) -> Tensor | None:
        """Causal among the new tokens (which fit the cache's room); one new token sees every kept key."""
        return cached_causal_mask(t_new, self.filled, self.keys.device) if is_causal else None

    def select_keys(self, key_mask: Tensor | None) -> Tensor | None:
        """No padding: every row is at the same place."""
        if key_mask is not None:
            raise ValueError(tr("SinkLayerKVCache: rows cannot be padded (attention_mask); decode prompts of one "
                                "length"))
        return None

    def follow(self, rows: Tensor) -> None:
        """Row ``i`` takes over the keys and values of row ``rows[i]`` (``(B,)``)."""
        self.keys, self.values = self.keys.index_select(0, rows), self.values.index_select(0, rows)


class SinkKVCache(KVCache):
    """A cache whose every layer is a :class:`SinkLayerKVCache`: the first ``sink_tokens`` positions and the last
    ``sliding_window``, at their places in the cache (``rotaries[i]`` turns layer i's keys).

    Example:
        >>> from attnlab.models import ModernDecoder, ModernDecoderConfig
        >>> model = ModernDecoder(ModernDecoderConfig.from_preset("tiny"))
        >>> SinkKVCache.for_model(model, batch=1, sink_tokens=4, sliding_window=12).capacity
        16
    """

    def __init__(self, batch: int, num_heads: int, sink_tokens: int, sliding_window: int, head_dim: int,
                 rotaries: list[Any], dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None) -> None:
        # the layers only: the parent's constructor would allocate a full cache first
        self.layers = [SinkLayerKVCache(batch, num_heads, sink_tokens, sliding_window, head_dim, r, dtype, device)
                       for r in rotaries]
        self.memory_mask, self.storage = None, "float"
        self.shape, self.rows = CacheShape(len(rotaries), num_heads, head_dim), batch

    @property
    def capacity(self) -> int:
        """The positions kept: ``sink_tokens + sliding_window``."""
        layer = self.layers[0]
        assert isinstance(layer, SinkLayerKVCache)  # the constructor makes every layer a sink layer
        return layer.capacity

    @classmethod
    def for_model(cls, model: Any, batch: int, *, sink_tokens: int = 4,
                  sliding_window: int | None = None, context_length: int | None = None,
                  storage: str = "float") -> SinkKVCache:
        """``model``'s sink cache for ``batch`` sequences, after checking that it can have one: rotary positions (a
        learned table has no places to move keys to), no sliding-window layer of its own, and a RoPE whose
        frequencies do not depend on the length."""
        layout = layout_of(model, batch)
        owner = layout.model
        if isinstance(sink_tokens, bool) or not isinstance(sink_tokens, int) or sink_tokens < 0:
            raise ValueError(tr("{owner}: sink_tokens must be an int >= 0 (the first positions kept), got {value!r}",
                                owner=owner, value=sink_tokens))
        if isinstance(sliding_window, bool) or not isinstance(sliding_window, int) or sliding_window < 1:
            raise ValueError(tr("{owner}: a sink cache needs sliding_window, an int >= 1 (the latest positions kept, "
                                "the new one included), got {value!r}", owner=owner, value=sliding_window))
        if storage != "float":
            raise ValueError(tr("{owner}: a sink cache keeps {capacity} positions in the model's dtype; int8 storage "
                                "is the dynamic cache's", owner=owner, capacity=sink_tokens + sliding_window))
        if any(r is None for r in layout.rotaries):
            raise ValueError(tr("{owner}: a sink cache moves keys to their places in the cache, which needs rotary "
                                "positions; this model has a learned position table", owner=owner))
        if any(w is not None for w in layout.windows):
            raise ValueError(tr("{owner}: its layers have a sliding window of their own; a sink cache replaces it, "
                                "decode it without sink_tokens", owner=owner))
        scaling = getattr(layout.rotaries[0], "scaling", None)
        if scaling is not None and scaling.type in ("dynamic", "longrope"):
            raise ValueError(tr("{owner}: {kind} scaling picks its frequencies from the length, which a sink cache "
                                "does not have; decode it without sink_tokens", owner=owner, kind=scaling.type))
        return cls(batch, layout.num_heads, sink_tokens, sliding_window, layout.head_dim, list(layout.rotaries),
                   layout.dtype, layout.device)
