"""The latent cache of multi-head latent attention (MLA): per token and layer, the latent ``c_kv`` and the rotated rope
key, ``kv_lora_rank + qk_rope_head_dim`` numbers (DeepSeek-V3: 512 + 64 = 576), whatever the number of heads.

A layer of multi-head attention over DeepSeek-V3's 128 heads of 128 would keep ``2 · 128 · 128 = 32,768`` numbers per
token; MLA keeps 576, 57 times fewer (the heads' keys and values are recomputed from the latent, or, in the absorbed
form, never formed: :mod:`attnlab.attention.latent`). DeepSeek-V3.2's sparse layers keep the lightning indexer's key
beside them (``index_head_dim`` more: 128), so that the indexer scores every earlier token without recomputing it
(:mod:`attnlab.attention.sparse`).

The buffer is one ``(B, capacity, width)`` tensor per layer, the parts side by side; it grows as the dynamic cache's
does (doubling, a power of two), so the attention reads the filled part ``(B, length, ·)`` without a copy.
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from attnlab.attention.cache import cached_causal_mask
from attnlab.i18n import tr
from attnlab.models.caches.shape import CacheOf, CacheShape, layout_of


class LatentLayerCache:
    """One layer's latents (a :class:`~attnlab.attention.latent.LatentLayerCache`): ``widths`` numbers per token, the
    latent's, the rope key's and (a sparse layer) the indexer key's, in one buffer ``(B, capacity, Σ widths)``."""

    #: the capacity of a new cache (it doubles as needed)
    FIRST_CAPACITY = 16

    def __init__(self, batch: int, widths: tuple[int, ...], context_length: int | None, dtype: torch.dtype,
                 device: torch.device | str | None) -> None:
        self.widths, self.max_length = tuple(widths), context_length
        capacity = min(context_length or self.FIRST_CAPACITY, self.FIRST_CAPACITY)
        self.buffer = torch.empty(batch, capacity, sum(self.widths), dtype=dtype, device=device)
        self.length = 0
        self.memory_kv: tuple[Tensor, Tensor] | None = None  # the protocol's; a decoder-only model has none

    @property
    def context_length(self) -> int | None:
        return self.max_length

    def reserve(self, length: int) -> None:
        """Room for ``length`` positions: at least double what there was (a power of two), the filled part kept."""
        capacity = self.buffer.shape[1]
        if length <= capacity:
            return
        capacity = 1 << (max(length, 2 * capacity) - 1).bit_length()
        capacity = capacity if self.max_length is None else min(capacity, self.max_length)
        new = self.buffer.new_empty(self.buffer.shape[0], capacity, self.buffer.shape[2])
        new[:, : self.length] = self.buffer[:, : self.length]
        self.buffer = new

    def update(self, latent: Tensor, rope_key: Tensor,
               index_key: Tensor | None = None) -> tuple[Tensor, Tensor, Tensor | None]:
        """Append this step's parts, ``(B, T, width)`` each; return every position's, ``(B, length, width)`` each (the
        views of the buffer), and None for an indexer key this layer does not keep."""
        parts = [latent, rope_key] if index_key is None else [latent, rope_key, index_key]
        widths = tuple(p.shape[-1] for p in parts)
        t = latent.shape[1]
        if widths != self.widths or any(p.shape[:2] != (self.buffer.shape[0], t) for p in parts):
            raise ValueError(tr("LatentLayerCache: expected parts of widths {widths} and {rows} rows, got shapes "
                                "{shapes}", widths=self.widths, rows=self.buffer.shape[0],
                                shapes=[tuple(p.shape) for p in parts]))
        if self.max_length is not None and self.length + t > self.max_length:
            raise ValueError(tr("LatentLayerCache: {length} + {t} positions exceed context_length={context_length}",
                                length=self.length, t=t, context_length=self.max_length))
        if latent.dtype != self.buffer.dtype:
            if self.length:
                raise ValueError(tr("LatentLayerCache: holds {dtype} latents, got {dtype_2}; a cache keeps the dtype "
                                    "it was filled in: start a new one (model.new_cache) to switch",
                                    dtype=self.buffer.dtype, dtype_2=latent.dtype))
            self.buffer = torch.empty_like(self.buffer, dtype=latent.dtype)  # empty: take the compute dtype
        self.reserve(self.length + t)
        self.buffer[:, self.length : self.length + t] = torch.cat(parts, dim=-1)
        self.length += t
        filled = self.buffer[:, : self.length].split(self.widths, dim=-1)
        return filled[0], filled[1], filled[2] if index_key is not None else None

    def attn_mask(self, t_new: int, is_causal: bool, window: int | None = None) -> Tensor | None:
        """The ``t_new`` newest queries see the cached positions up to their own: bool ``(t_new, length)``, None for
        one new token (it sees them all). MLA layers have no window."""
        if not is_causal:
            return None
        return cached_causal_mask(t_new, self.length, self.buffer.device)

    def positions(self, t_new: int) -> Tensor:
        """``(t_new,)`` the positions of the next tokens (ask before ``update``)."""
        return torch.arange(self.length, self.length + t_new, device=self.buffer.device)

    def select_keys(self, key_mask: Tensor | None) -> Tensor | None:
        """Every position is kept: the padding mask as it is."""
        return key_mask

    def filled_nbytes(self) -> int:
        """Bytes of the filled positions: ``B · length · Σ widths · bytes per number``."""
        return self.buffer.shape[0] * self.length * self.buffer.shape[2] * self.buffer.element_size()


class LatentCache(CacheOf):
    """A decoding cache of latents, one :class:`LatentLayerCache` per layer (``cache[i]`` goes to block ``i``); the
    dynamic cache of a model whose layers are MLA (DeepSeek-V2, V3, V3.2).

    ``shape`` is ``CacheShape(num_layers, 1, width)``: one "head" of ``width`` numbers per token and layer, what the
    layers keep (``kv_lora_rank + qk_rope_head_dim``, plus ``index_head_dim`` in V3.2's sparse layers).

    Example:
        >>> cache = LatentCache([(512, 64)] * 61, batch=1)         # DeepSeek-V3: 576 numbers a token a layer
        >>> cache.per_token_numbers(), cache.shape
        (35136, CacheShape(num_layers=61, num_heads=1, head_dim=576))
    """

    def __init__(self, widths: list[tuple[int, ...]], batch: int, context_length: int | None = None,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None) -> None:
        self.layers = [LatentLayerCache(batch, w, context_length, dtype, device) for w in widths]
        self.shape, self.rows = CacheShape(len(widths), 1, max(sum(w) for w in widths)), batch

    @classmethod
    def for_model(cls, model: Any, batch: int, *, context_length: int | None = None) -> LatentCache:
        """An empty cache for ``batch`` sequences of ``model``: each layer as wide as its attention keeps
        (``model.blocks[i].attn.spec.cache_widths``)."""
        layout = layout_of(model, batch)
        widths = [block.attn.spec.cache_widths for block in model.blocks]
        return cls(widths, batch, context_length or layout.position_limit, layout.dtype, layout.device)

    def __getitem__(self, i: int) -> LatentLayerCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def length(self) -> int:
        return self.layers[0].length

    @property
    def context_length(self) -> int | None:
        return self.layers[0].context_length

    def per_token_numbers(self) -> int:
        """Numbers kept per token, all layers together (per sequence)."""
        return sum(sum(layer.widths) for layer in self.layers)

    @property
    def nbytes(self) -> int:
        """The bytes its buffers take, filled or not."""
        return sum(layer.buffer.nbytes for layer in self.layers)

    def filled_nbytes(self) -> int:
        """The bytes the filled positions take: ``B · length · per_token_numbers() · bytes per number``."""
        return sum(layer.filled_nbytes() for layer in self.layers)

    def positions(self, t: int) -> Tensor:
        return self.layers[0].positions(t)

    def advance(self, t: int) -> None:
        """Nothing to do: each layer counted its positions as it kept them."""

    def reset(self) -> None:
        """Start a new sequence in the same buffers."""
        for layer in self.layers:
            layer.length = 0
