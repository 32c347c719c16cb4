"""The rolling cache of a sliding-window layer: ``window`` positions kept, whatever the length (Mistral's).

A query at position p of a layer with ``sliding_window = w`` sees the keys of positions ``p − w + 1 … p`` and no
others. Keys older than that will never be seen again, so the cache keeps only the last ``w``: a ring buffer
``(B, H, w, head_dim)`` where position p lives in slot ``p mod w`` and overwrites position ``p − w``. Memory is
bounded by the window at any length (Mistral 7B's rolling buffer cache; Jiang et al., 2023, arXiv:2310.06825, §2).

Decoding one token, the ring holds exactly the keys that token sees (its own included), in ring order rather than
position order; attention does not care about the order of its keys, and every key was rotated by RoPE at its own
position when it was written, so no mask is needed. Several new tokens at once (a prompt) attend to the kept keys
(in position order) followed by their own, with the window mask; then the last ``w`` of them go into the ring.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.i18n import tr


class RollingLayerKVCache:
    """One sliding-window layer's keys and values: the last ``window`` positions, in a ring (a
    :class:`~attnlab.attention.cache.LayerCache`). ``length`` counts every position seen, not the ones kept."""

    def __init__(self, batch: int, num_heads: int, window: int, head_dim: int, dtype: torch.dtype,
                 device: torch.device | str | None) -> None:
        self.window = window
        self.keys = torch.empty(batch, num_heads, window, head_dim, dtype=dtype, device=device)
        self.values = torch.empty_like(self.keys)
        self.length = 0
        self.memory_kv: tuple[Tensor, Tensor] | None = None
        self.spare: tuple[Tensor, Tensor] | None = None
        self._returned: Tensor | None = None  # positions of the keys the last update returned, (L,); None: the ring

    @property
    def context_length(self) -> None:
        """No limit: positions beyond the window are dropped, not refused."""
        return None

    def _kept_positions(self) -> Tensor:
        """``(min(length, window),)`` the position each slot holds, in slot order."""
        slots = torch.arange(min(self.length, self.window), device=self.keys.device)
        return self.length - 1 - (self.length - 1 - slots) % self.window

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Keep ``key, value (B, H, T, head_dim)`` (the last ``window`` positions of all so far); return the keys
        and values the new queries may see: the ring ``(B, H, min(length, window), head_dim)`` for one token, the
        kept ones followed by the new ones for several (:meth:`attn_mask` says which each query sees)."""
        t, w = key.shape[2], self.window
        if key.shape != value.shape or key.shape[:2] != self.keys.shape[:2] or key.shape[3] != self.keys.shape[3]:
            raise ValueError(
                tr("RollingLayerKVCache: key/value must have shape (B, H, T, head_dim) = ({shape}, {shape_2}, T, "
                   "{shape_3}), got {shape_4} and {shape_5}", shape=self.keys.shape[0], shape_2=self.keys.shape[1],
                   shape_3=self.keys.shape[3], shape_4=tuple(key.shape), shape_5=tuple(value.shape)))
        if key.dtype != self.keys.dtype:  # an empty cache takes the compute dtype; a filled one cannot switch
            if self.length:
                raise ValueError(tr("RollingLayerKVCache: holds {dtype} keys, got {dtype_2}; start a new cache "
                                    "(model.new_cache) to switch", dtype=self.keys.dtype, dtype_2=key.dtype))
            self.keys = torch.empty_like(self.keys, dtype=key.dtype)
            self.values = torch.empty_like(self.keys)
        if t == 1:  # decoding: write one slot, attend to the whole ring
            slot = self.length % w
            self.keys[:, :, slot : slot + 1] = key
            self.values[:, :, slot : slot + 1] = value
            self.length += 1
            self._returned = None
            n = min(self.length, w)
            return self.keys[:, :, :n], self.values[:, :, :n]
        kept = min(self.length, w)
        order = self._kept_positions().argsort()  # slots, oldest position first
        keys = torch.cat([self.keys[:, :, order], key], dim=2)
        values = torch.cat([self.values[:, :, order], value], dim=2)
        self._returned = torch.arange(self.length - kept, self.length + t, device=self.keys.device)
        self.length += t
        last = self._returned[-w:]  # the newest window positions go into their slots
        self.keys[:, :, last % w] = keys[:, :, -w:]
        self.values[:, :, last % w] = values[:, :, -w:]
        return keys, values

    def returned_positions(self) -> Tensor:
        """``(L,)`` the position of each key the last :meth:`update` returned."""
        return self._kept_positions() if self._returned is None else self._returned

    def attn_mask(self, t_new: int, is_causal: bool, window: int | None = None) -> Tensor | None:
        """Which returned keys each of the ``t_new`` newest queries sees: bool ``(t_new, L)``; None for one token
        (the ring holds exactly its window)."""
        if self._returned is None:
            return None
        queries = torch.arange(self.length - t_new, self.length, device=self.keys.device)[:, None]
        keys = self._returned[None]
        mask = keys <= queries if is_causal else keys <= queries[-1:]
        return mask & (keys > queries - self.window)

    def select_keys(self, key_mask: Tensor | None) -> Tensor | None:
        """The model's key padding mask over every position so far, ``(B, 1, 1, length)`` -> over the keys the
        last :meth:`update` returned, ``(B, 1, 1, L)``."""
        if key_mask is None:
            return None
        return key_mask.index_select(-1, self.returned_positions())

    def positions(self, t_new: int) -> Tensor:
        """``(t_new,)`` the positions of the next tokens: ``length, length + 1, ...`` (ask before ``update``)."""
        return torch.arange(self.length, self.length + t_new, device=self.keys.device)

    def follow(self, rows: Tensor) -> None:
        """Row ``i`` takes over the keys and values of row ``rows[i]`` (``(B,)``)."""
        self.keys, self.values = self.keys.index_select(0, rows), self.values.index_select(0, rows)
