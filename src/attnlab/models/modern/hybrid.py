"""A decoder whose layers attend in different ways, some with softmax attention (a cache of keys and values that
grows by a row per token), some with linear attention (a fixed memory): Qwen3-Next and Qwen3.5 (three Gated
DeltaNet layers to one gated softmax layer), Kimi Linear (three KDA layers to one MLA layer).

It is a :class:`~attnlab.models.ModernDecoder` (the same embedding, norms, head and block loop; each block from its
config's ``layer_spec(i)``) whose decoding cache is one layer cache per block, of the kind that block keeps: a
:class:`~attnlab.models.caches.HybridCache`.
"""

from __future__ import annotations

from typing import Any

from attnlab.attention.multihead import MultiHeadAttention
from attnlab.models.caches import CacheLayout, CacheShape, HybridCache, LayerKVCache, RecurrentLayerCache, compute_dtype
from attnlab.models.caches.shape import layout_of
from attnlab.models.modern.decoder import ModernDecoder


class HybridDecoder(ModernDecoder):
    """A :class:`~attnlab.models.ModernDecoder` of softmax and linear-attention layers (its config's
    ``layer_types``), called the same way; ``new_cache(batch)`` gives each layer the cache it needs.

    ``return_weights``: a softmax layer's weights ``(B, H, T, L)``; a linear layer's implicit attention ``(B, H, T,
    T)`` (``o = W v``, no softmax: :mod:`attnlab.attention.delta_net`), None with a cache.
    """

    def cache_layout(self) -> CacheLayout:
        """The layout of the softmax layers' keys and values (what a cache is checked against): the layer count,
        their key/value heads and head size (0 and 0 in a model without one); no windows."""
        c, w = self.config, self.tok_emb.weight
        softmax = [block.attn for block in self.blocks if isinstance(block.attn, MultiHeadAttention)]
        heads, head_dim = _kv_shape(softmax[0]) if softmax else (0, 0)
        return CacheLayout(CacheShape(c.num_layers, heads, head_dim), (None,) * c.num_layers, compute_dtype(w),
                           w.device, self.position_limit, tuple(getattr(b.attn, "rotary", None) for b in self.blocks),
                           type(self).__name__)

    # a hybrid model's cache is not a KVCache (not every layer keeps keys and values): it has KVCache's interface
    def new_cache(self, batch: int, context_length: int | None = None) -> HybridCache:  # type: ignore[override]
        """An empty cache for ``batch`` sequences: keys and values for each softmax layer (``num_kv_heads`` heads,
        the compute dtype, up to ``context_length`` positions; None: no limit), a recurrent state for each linear
        one (float32, the same bytes at any length)."""
        layout = layout_of(self, batch)
        layers: list[Any] = [
            LayerKVCache(batch, _kv_shape(block.attn)[0], context_length, _kv_shape(block.attn)[1], layout.dtype,
                         layout.device) if isinstance(block.attn, MultiHeadAttention) else RecurrentLayerCache(batch)
            for block in self.blocks]
        return HybridCache(layers, layout.shape, batch)


def _kv_shape(attn: MultiHeadAttention) -> tuple[int, int]:
    """``(key/value heads, head size)`` of a softmax layer (its spec's, filled in when it was built)."""
    s = attn.spec
    return s.num_kv_heads or s.num_heads, s.head_dim or s.d_out // s.num_heads
