"""The static cache: decoding steps that ``torch.compile(fullgraph=True)`` traces once and CUDA graphs replay.

:class:`~attnlab.models.KVCache`, the dynamic cache, returns the filled part of its buffers,
``(B, H, length, head_dim)``, and counts ``length`` in Python: every step has new shapes and a new number, so every
step is a new graph. Here
the position of the next token is a tensor on the device, and every step returns the *whole* buffers
``(B, H, context_length, head_dim)`` with a mask that hides the slots not yet filled. A step's shapes depend
only on how many tokens it adds, it changes nothing on the host and reads nothing back from the device:
one graph, captured once, replayed for every token.

The price is attending over all ``context_length`` slots at every step instead of the filled ones, so the
compiled decoding loop allocates the cache for the sequence it decodes (rounded up to a power of two), not for the
model's whole context (:func:`attnlab.generation.compiled_decode.static_length`). The buffers start at zero, so a
masked slot adds exactly ``0 · 0``, never NaN.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import tr
from attnlab.models.caches.shape import CacheOf, CacheShape, layout_of


class StaticLayerKVCache:
    """One layer's buffers ``(B, H, context_length, head_dim)``, written at the cache's position tensor (a
    :class:`~attnlab.attention.cache.LayerCache`)."""

    def __init__(self, keys: Tensor, values: Tensor, position: Tensor, slots: Tensor) -> None:
        self.keys, self.values = keys, values
        self.position, self.slots = position, slots  # shared by every layer of the cache
        self.memory_kv: tuple[Tensor, Tensor] | None = None

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Write ``key, value (B, H, T, head_dim)`` at the next T positions; return the whole buffers.

        Unchecked against the end of the buffers (that would read the position back): the caller stops at
        ``context_length``.
        """
        if key.shape != value.shape or key.shape[:2] != self.keys.shape[:2] or key.shape[3] != self.keys.shape[3]:
            raise ValueError(
                tr("StaticLayerKVCache: key/value must have shape (B, H, T, head_dim) = ({shape}, {shape_2}, T, "
                   "{shape_3}), got {shape_4} and {shape_5}", shape=self.keys.shape[0], shape_2=self.keys.shape[1],
                   shape_3=self.keys.shape[3], shape_4=tuple(key.shape), shape_5=tuple(value.shape))
            )
        if key.dtype != self.keys.dtype:
            raise ValueError(tr("StaticLayerKVCache: holds {dtype}, got keys of {dtype_2}; make the cache where the "
                                "model computes (under the same autocast, or after casting the model)",
                                dtype=self.keys.dtype, dtype_2=key.dtype))
        where = self.positions(key.shape[2])  # (T,) slots to write
        self.keys.index_copy_(2, where, key)
        self.values.index_copy_(2, where, value)
        return self.keys, self.values

    def attn_mask(self, t_new: int, is_causal: bool, window: int | None = None) -> Tensor:
        """Bool ``(t_new, context_length)`` (``(context_length,)`` if not causal): the filled slots each new query
        may attend, up to its own position when causal, and with ``window`` only the last ``window`` of those."""
        queries = self.positions(t_new)[:, None]  # (t_new, 1): the new queries' positions
        if not is_causal:
            return self.slots <= queries[-1, 0]
        mask = self.slots <= queries
        return mask if window is None else mask & (self.slots > queries - window)

    def positions(self, t_new: int) -> Tensor:
        """``(t_new,)`` the positions of the next tokens, on the device."""
        return self.position + self.slots[:t_new]

    def select_keys(self, key_mask: Tensor | None) -> Tensor | None:
        """The key padding mask, unchanged: ``update`` returned every slot."""
        return key_mask


class StaticKVCache(CacheOf):
    """One :class:`StaticLayerKVCache` per layer (``cache[i]`` goes to block ``i``) and the position they share.

    ``position`` is a ``(1,)`` int64 tensor: the position of the next token. The model's step reads it through
    :meth:`positions` and moves it on with :meth:`advance`, both on the device.
    """

    def __init__(self, num_layers: int, batch: int, num_heads: int, context_length: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        self.shape, self.rows = CacheShape(num_layers, num_heads, head_dim), batch
        self.position = torch.zeros(1, dtype=torch.long, device=device)
        self.slots = torch.arange(context_length, device=device)
        shape = (batch, num_heads, context_length, head_dim)
        self.layers = [StaticLayerKVCache(torch.zeros(shape, dtype=dtype, device=device),
                                          torch.zeros(shape, dtype=dtype, device=device), self.position, self.slots)
                       for _ in range(num_layers)]

    @classmethod
    def for_model(cls, model: Any, batch: int, length: int | None = None) -> StaticKVCache:
        """An empty static cache for ``batch`` sequences of ``model``, of ``length`` slots (default: the model's
        ``context_length``). Every layer keeps every slot, a sliding-window layer too: its window is a mask over
        them (:meth:`StaticLayerKVCache.attn_mask`), so the shapes stay those of every other layer."""
        layout = layout_of(model, batch)
        length = length or getattr(getattr(model, "config", None), "context_length", None)
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise ValueError(tr("StaticKVCache: length must be an int >= 1 (the slots kept), got {length!r}",
                                length=length))
        return cls(layout.num_layers, batch, layout.num_heads, length, layout.head_dim, layout.dtype, layout.device)

    def __getitem__(self, i: int) -> StaticLayerKVCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def context_length(self) -> int:
        return self.slots.shape[0]

    @property
    def dtype(self) -> torch.dtype:
        return self.layers[0].keys.dtype

    def positions(self, t: int) -> Tensor:
        """``(t,)`` the positions of the next ``t`` tokens."""
        return self.position + self.slots[:t]

    def advance(self, t: int) -> None:
        """``t`` more positions are filled (in place, on the device)."""
        self.position.add_(t)

    def reset(self) -> None:
        """Start a new sequence in the same buffers (old slots are masked until overwritten)."""
        self.position.zero_()
