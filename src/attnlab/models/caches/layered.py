"""The dynamic cache of a model whose layers keep keys of different shapes, and only for the layers that own keys.

Gemma 4's global layers have heads twice as wide as its sliding ones (512 against 256), and may have fewer
key/value heads; its last ``num_kv_shared_layers`` layers compute no keys at all and attend to an earlier layer's.
So its cache is one :class:`~attnlab.models.LayerKVCache` per layer that computes keys, each of that layer's own
heads and head size, a sliding layer's a ring of its window (:class:`~attnlab.models.RollingLayerKVCache`), and
nothing for the layers that share:

    cache bytes = Σ over the owners l of 2 · B · num_kv_heads_l · kept_l · head_dim_l · bytes per value

with ``kept_l`` the positions so far, or the window for a sliding layer. Everything else is the dynamic cache's
(:class:`~attnlab.models.KVCache`): the positions, ``filled_nbytes``, ``reset``, ``reorder``. Its
:class:`CacheShape` is the model's summary (the owners' count, the first owner's heads and head size), checked
against the model as every cache is; the layers hold their own shapes.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from attnlab.models.caches.dynamic import KVCache, LayerKVCache
from attnlab.models.caches.rolling import RollingLayerKVCache
from attnlab.models.caches.shape import CacheShape


class LayeredKVCache(KVCache):
    """A :class:`~attnlab.models.KVCache` whose layer ``i`` keeps ``num_heads[i]`` heads of ``head_dim[i]``
    (``windows[i]``: a ring of that many positions), one per layer that owns keys.

    Example:
        >>> cache = LayeredKVCache(2, num_heads=(2, 1), head_dim=(8, 16), context_length=None, windows=(4, None))
        >>> [tuple(layer.keys.shape) for layer in cache.layers]     # a ring of 4, and a growing buffer
        [(2, 2, 4, 8), (2, 1, 16, 16)]
    """

    def __init__(self, batch: int, num_heads: Sequence[int], head_dim: Sequence[int], context_length: int | None,
                 windows: Sequence[int | None], dtype: torch.dtype = torch.float32,
                 device: torch.device | str | None = None, shape: CacheShape | None = None) -> None:
        self.layers = [LayerKVCache(batch, h, context_length, d, dtype, device) if w is None
                       else RollingLayerKVCache(batch, h, w, d, dtype, device)
                       for h, d, w in zip(num_heads, head_dim, windows, strict=True)]
        self.memory_mask, self.storage = None, "float"
        self.shape = shape or CacheShape(len(self.layers), num_heads[0], head_dim[0])
        self.rows = batch
