"""The dynamic cache: the position counted on the host, the filled part of the buffers handed to the attention.

The buffers ``(B, H, capacity, head_dim)`` per layer are filled in place: no ``torch.cat`` per step. Their capacity
doubles when a step needs more (up to ``context_length``; each position is copied about once more in all), so it
stays within twice the filled length: the attention reads the filled part ``(B, H, length, head_dim)``, and a row's
keys then lie close together, which the small matrix products of decoding need (keys spread over a buffer of the
whole context are read two to three times slower). They hold the dtype the model computes in (under autocast,
autocast's): an empty cache takes the dtype of the first keys it is given.

An encoder-decoder's cache keeps two things per decoder layer: the keys and values of the target tokens so far
(growing by one per step, as in a GPT), and the cross-attention's keys and values of the memory (the encoder's
output), which depend only on the source: projected once, at the first step, and reused at every later one. Beam
search keeps ``beam_size`` hypotheses per source as rows of one batch; :meth:`KVCache.reorder` expands the rows
(each source's once-computed keys copied to its beams) and follows the beams as they are re-ranked. Its cache keeps
the positions first (``positions_first``, :class:`LayerKVCache`): following the beams then copies the filled
positions alone.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

import torch
from torch import Tensor

from attnlab.attention.cache import LayerCache, cached_causal_mask
from attnlab.functional import sliding_window_mask
from attnlab.i18n import tr
from attnlab.models.caches.quantized import SCALE_DTYPE, STORAGES, Int8Storage
from attnlab.models.caches.rolling import RollingLayerKVCache
from attnlab.models.caches.shape import CacheOf, CacheShape, layout_of


class LayerKVCache:
    """One layer's keys and values (a :class:`~attnlab.attention.cache.LayerCache`); ``length`` positions filled.

    ``positions_first=True`` stores them position by position, ``(capacity, 2, B, H, head_dim)``, instead of row by
    row, ``(2, B, H, capacity, head_dim)``; ``keys`` and ``values`` are ``(B, H, capacity, head_dim)`` views either
    way. A search over many rows wants it: following its beams then copies the filled positions alone, in one
    gather of runs of ``H · head_dim`` numbers, where the default layout copies a row's whole buffer once it is a
    quarter full. One sequence's matrix products want its keys together: the default.
    """

    #: the capacity of a new cache (it doubles as needed)
    FIRST_CAPACITY = 16

    def __init__(self, batch: int, num_heads: int, context_length: int | None, head_dim: int,
                 dtype: torch.dtype, device: torch.device | str | None, *, positions_first: bool = False,
                 storage: str = "float") -> None:
        self.max_length = context_length  # None: no limit (RoPE has no table to run out of)
        self.positions_first = positions_first
        if storage not in STORAGES:
            raise ValueError(tr("LayerKVCache: storage must be one of {storages}, got {storage!r}", storages=STORAGES,
                                storage=storage))
        if storage == "int8" and positions_first:
            raise ValueError(tr("LayerKVCache: int8 storage keeps rows as they are; a search's positions-first "
                                "layout needs the floating-point storage"))
        capacity = min(context_length or self.FIRST_CAPACITY, self.FIRST_CAPACITY)
        self.hold(self._storage(batch, num_heads, capacity, head_dim, torch.int8 if storage == "int8" else dtype,
                                device))
        self.int8 = Int8Storage(self.keys) if storage == "int8" else None  # the scales beside the codes
        self.length = 0
        self.memory_kv: tuple[Tensor, Tensor] | None = None  # an encoder-decoder's: (B, H, S, head_dim) each
        self.spare: Tensor | None = None  # where a beam search's reorder writes; then the two swap

    def _storage(self, batch: int, num_heads: int, capacity: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device | str | None) -> Tensor:
        shape = (capacity, 2, batch, num_heads, head_dim) if self.positions_first else \
            (2, batch, num_heads, capacity, head_dim)
        return torch.empty(shape, dtype=dtype, device=device)

    def hold(self, storage: Tensor) -> None:
        """Keep keys and values in one ``storage``: ``buffer (2, B, H, capacity, head_dim)`` views it, ``keys`` and
        ``values`` are its two halves, so that following the beams swaps one tensor."""
        self.storage = storage
        self.buffer = storage.permute(1, 2, 3, 0, 4) if self.positions_first else storage
        self.keys, self.values = self.buffer[0], self.buffer[1]

    @property
    def context_length(self) -> int | None:
        """The most positions the cache holds (None: no limit)."""
        return self.max_length

    def reserve(self, length: int) -> None:
        """Make room for ``length`` positions (at least double the room there was, at most ``context_length``),
        keeping the filled part."""
        capacity = self.keys.shape[2]
        if length <= capacity:
            return
        capacity = 1 << (max(length, 2 * capacity) - 1).bit_length()  # a power of two
        capacity = capacity if self.max_length is None else min(capacity, self.max_length)
        _, b, h, _, head_dim = self.buffer.shape
        old = self.buffer[..., : self.length, :]
        self.hold(self._storage(b, h, capacity, head_dim, self.storage.dtype, self.storage.device))
        self.buffer[..., : self.length, :] = old
        if self.int8 is not None:
            self.int8.grow(capacity, self.length)
        self.spare = None

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Append ``key, value (B, H, T, head_dim)``; return all so far ``(B, H, length, head_dim)``."""
        t = key.shape[2]
        if key.shape != value.shape or key.shape[:2] != self.keys.shape[:2] or key.shape[3] != self.keys.shape[3]:
            raise ValueError(
                tr("LayerKVCache: key/value must have shape (B, H, T, head_dim) = ({shape}, {shape_2}, T, {shape_3}), "
                   "got {shape_4} and {shape_5}", shape=self.keys.shape[0], shape_2=self.keys.shape[1],
                   shape_3=self.keys.shape[3], shape_4=tuple(key.shape), shape_5=tuple(value.shape))
            )
        if self.max_length is not None and self.length + t > self.max_length:
            raise ValueError(tr("LayerKVCache: {length} + {t} positions exceed context_length={context_length}",
                                length=self.length, t=t, context_length=self.max_length))
        dtype = key.dtype
        if self.int8 is None and key.dtype != self.keys.dtype:
            if self.length:
                raise ValueError(tr("LayerKVCache: holds {dtype} keys, got {dtype_2}; a cache keeps the dtype it was "
                                    "filled in: start a new one (model.new_cache) to switch", dtype=self.keys.dtype,
                                    dtype_2=key.dtype))
            self.hold(torch.empty_like(self.storage, dtype=key.dtype))  # empty: take the compute dtype
        if self.length + t > self.keys.shape[2]:  # room first: int8 storage writes its scales beside the codes
            self.reserve(self.length + t)
        if self.int8 is not None:  # codes in the buffers, their scales beside them; read back in key's dtype
            key, value = self.int8.write(self.length, key, value)
        self.keys[:, :, self.length : self.length + t] = key
        self.values[:, :, self.length : self.length + t] = value
        self.length += t
        keys, values = self.keys[:, :, : self.length], self.values[:, :, : self.length]
        return (keys, values) if self.int8 is None else self.int8.read(keys, values, dtype)

    def follow(self, rows: Tensor) -> None:
        """Row ``i`` takes over the keys and values of row ``rows[i]`` (``(B',)``): a beam search's parents, gathered
        (the filled positions) into a second buffer, allocated once, which then swaps in; or, for another number of
        rows (each source's beams, at the start), a new buffer of those rows."""
        _, b, h, capacity, head_dim = self.buffer.shape
        if rows.shape[0] != b:  # each source's beams, at the start
            new = self._storage(rows.shape[0], h, capacity, head_dim, self.storage.dtype, self.storage.device)
        else:
            if self.spare is None or self.spare.dtype != self.storage.dtype:
                self.spare = torch.empty_like(self.storage)
            new = self.spare
        self._gather(rows, new)
        self.spare = self.storage if new is self.spare else None
        self.hold(new)

    def _gather(self, rows: Tensor, new: Tensor) -> None:
        """Row ``i`` of storage ``new`` := row ``rows[i]`` of this one, over the filled positions (or all)."""
        if self.positions_first:  # the filled positions are one block: (2 · length, B, H · head_dim), gathered in 3-d
            block = self.storage[: self.length].flatten(0, 1).flatten(2)  # (a 5-d gather is 1.5-3x slower)
            torch.index_select(block, 1, rows, out=new[: self.length].flatten(0, 1).flatten(2))
            return
        # a row's whole buffer is one contiguous block, copied at memcpy speed; the filled part alone is strided,
        # copied element-wise at about a quarter of it: so the whole, unless three quarters are still empty
        capacity = self.storage.shape[3]
        n = capacity if 4 * self.length > capacity else self.length
        torch.index_select(self.storage[..., :n, :], 1, rows, out=new[..., :n, :])

    def attn_mask(self, t_new: int, is_causal: bool, window: int | None = None) -> Tensor | None:
        """The ``t_new`` newest queries see the cached keys up to their own position (every key if not causal),
        with ``window`` only the last ``window`` of them: bool ``(t_new, length)``, or None for all."""
        if not is_causal or (t_new == 1 and (window is None or window >= self.length)):  # one token sees them all
            return None
        if window is not None and window < self.length:  # a window as wide as the cache cuts nothing
            return sliding_window_mask(t_new, self.length, window, self.keys.device)
        return cached_causal_mask(t_new, self.length, self.keys.device)

    def positions(self, t_new: int) -> Tensor:
        """``(t_new,)`` the positions of the next tokens: ``length, length + 1, ...`` (ask before ``update``)."""
        return torch.arange(self.length, self.length + t_new, device=self.keys.device)

    def select_keys(self, key_mask: Tensor | None) -> Tensor | None:
        """The key padding mask over every position: ``update`` returned them all."""
        return key_mask


class DynamicLayer(LayerCache, Protocol):
    """What :class:`KVCache` reads of each of its layers (a full, rolling or sink layer): the buffers
    ``(B, H, capacity, hd)``, the positions seen, and how to follow a search's rows."""

    keys: Tensor
    values: Tensor
    length: int

    @property
    def context_length(self) -> int | None: ...

    def follow(self, rows: Tensor) -> None: ...


def _int8(layer: DynamicLayer) -> Int8Storage | None:
    """A full layer's int8 scales; None with float storage and for a rolling or sink layer (they have none)."""
    return getattr(layer, "int8", None)


class KVCache(CacheOf):
    """The dynamic cache: one :class:`LayerKVCache` per layer, or a
    :class:`~attnlab.models.caches.rolling.RollingLayerKVCache` for a layer with a sliding window (``windows[i]``);
    ``cache[i]`` goes to block ``i``. ``storage="int8"`` keeps the full layers' keys and values in int8
    (:mod:`attnlab.models.caches.quantized`; a window's ring stays in the model's dtype, bounded as it is).

    ``length`` is the number of positions already cached, i.e. the position of the next token. An
    encoder-decoder's cache also holds the memory's key mask ``memory_mask (B, 1, 1, S)``, bool or a float term added
    to the scores (0 where real, -inf at padding; None: no padding).

    Example:
        >>> from attnlab.models import GPT, GPTConfig
        >>> model = GPT(GPTConfig.from_preset("tiny"))
        >>> cache = KVCache.for_model(model, batch=2, storage="int8")       # what generate(..., cache=) takes
        >>> cache.shape, cache.rows
        (CacheShape(num_layers=2, num_heads=2, head_dim=16), 2)
    """

    layers: list[DynamicLayer]

    def __init__(self, num_layers: int, batch: int, num_heads: int, context_length: int | None, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None,
                 memory_mask: Tensor | None = None, windows: Sequence[int | None] | None = None, *,
                 positions_first: bool = False, storage: str = "float") -> None:
        windows = windows or [None] * num_layers  # a layer with a window keeps only that many positions
        self.layers = [LayerKVCache(batch, num_heads, context_length, head_dim, dtype, device,
                                    positions_first=positions_first, storage=storage) if w is None
                       else RollingLayerKVCache(batch, num_heads, w, head_dim, dtype, device) for w in windows]
        self.memory_mask = memory_mask
        self.storage = storage
        self.shape, self.rows = CacheShape(num_layers, num_heads, head_dim), batch

    @classmethod
    def for_model(cls, model: Any, batch: int, *, context_length: int | None = None,
                  storage: str = "float") -> KVCache:
        """An empty cache for ``batch`` sequences of ``model`` (its ``cache_layout()``): up to ``context_length``
        positions (default: the model's position limit; None grows without limit), the windowed layers rolling."""
        layout = layout_of(model, batch)
        return cls(layout.num_layers, batch, layout.num_heads, context_length or layout.position_limit,
                   layout.head_dim, layout.dtype, layout.device, windows=layout.windows, storage=storage)

    def __getitem__(self, i: int) -> DynamicLayer:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def length(self) -> int:
        return self.layers[0].length

    @property
    def context_length(self) -> int | None:
        """The most positions the cache holds (None: no limit)."""
        return self.layers[0].context_length

    @property
    def nbytes(self) -> int:
        """The bytes its key and value buffers take, filled or not (with int8 storage: codes and scales)."""
        return sum(layer.keys.nbytes + layer.values.nbytes + (0 if (int8 := _int8(layer)) is None else int8.nbytes)
                   for layer in self.layers)

    def filled_nbytes(self) -> int:
        """The bytes the filled positions of every layer take (with int8 storage: codes and scales)."""
        total = 0
        for layer in self.layers:
            b, h, _, head_dim = layer.keys.shape
            kept = min(layer.length, layer.keys.shape[2])
            per_position = b * h * (head_dim * layer.keys.element_size() + (0 if _int8(layer) is None
                                                                           else SCALE_DTYPE.itemsize))
            total += 2 * kept * per_position
        return total

    def positions(self, t: int) -> Tensor:
        """``(t,)`` the positions of the next ``t`` tokens (RoPE turns them by these)."""
        return self.layers[0].positions(t)

    def advance(self, t: int) -> None:
        """Nothing to do: each layer counted its positions as it kept them (a static cache moves its position
        here)."""

    def reset(self) -> None:
        """Start a new sequence in the same buffers (an encoder-decoder's memory keys and values stay)."""
        for layer in self.layers:
            layer.length = 0

    def reorder(self, index: Tensor, memory: bool = True) -> None:
        """Keep rows ``index (B',)`` of everything, in that order: ``arange(B).repeat_interleave(k)`` gives each
        source ``k`` beams; a beam search step's parent indices follow the surviving hypotheses.

        ``memory=False`` leaves the memory's keys, values and mask as they are: right when every row is replaced by
        a row of the same source (a beam search step), whose memory rows are equal, and it saves copying them.
        """
        for layer in self.layers:
            layer.follow(index)
            if memory and layer.memory_kv is not None:
                keys, values = layer.memory_kv
                layer.memory_kv = keys.index_select(0, index), values.index_select(0, index)
        if memory and self.memory_mask is not None:
            self.memory_mask = self.memory_mask.index_select(0, index)
