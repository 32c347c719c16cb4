"""The caches of a model whose layers keep different things: linear-attention layers a fixed-size memory, softmax
layers their keys and values.

* :class:`RecurrentLayerCache`: one linear-attention layer's share (Gated DeltaNet, KDA): the last ``K − 1`` inputs
  of its short convolution ``(B, channels, K − 1)`` and its memory ``(B, H, d_k, d_v)``, kept in float32 whatever
  the model computes in (transformers keeps it so: a bfloat16 memory summed over thousands of tokens drifts). Its
  bytes do not grow with the length.
* :class:`HybridCache`: one layer cache per block, of whatever kind the block needs (a
  :class:`~attnlab.models.caches.dynamic.LayerKVCache` for a full-attention layer, a :class:`RecurrentLayerCache`
  for a linear one), behind the interface of :class:`~attnlab.models.KVCache` that decoding reads (``layers``,
  ``length``, ``positions``, ``advance``, ``reset``, ``shape``, ``rows``, ``check_fits``). A hybrid model's
  ``new_cache(batch)`` makes it.

A memory cannot be cut back to fewer tokens nor moved to other places, so these models decode with this cache only:
not a static, sink or int8 one (their layers would be handed a cache of keys and values, and refuse it).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
from torch import Tensor

from attnlab.i18n import tr
from attnlab.models.caches.latent import LatentLayerCache
from attnlab.models.caches.shape import CacheOf, CacheShape


class RecurrentLayerCache:
    """A linear-attention layer's decoding state: the protocol :class:`~attnlab.attention.delta_net.RecurrentCache`.

    ``conv`` and ``state`` start as None (zeros: the sequence's start) and are replaced, not grown, by every call:
    ``(B, channels, K − 1)`` in the dtype the model computes in, and ``(B, H, d_k, d_v)`` in float32. ``length``
    counts the tokens seen (the next token's position).
    """

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.conv: Tensor | None = None
        self.state: Tensor | None = None
        self.length = 0
        self.memory_kv = None  # the LayerCache protocol's field: no cross-attention here

    def keep(self, conv: Tensor, state: Tensor, t: int) -> None:
        """Hold the convolution's last inputs and the memory after ``t`` more tokens (the memory in float32)."""
        if conv.shape[0] != self.batch or state.shape[0] != self.batch:
            raise ValueError(tr("RecurrentLayerCache: it holds {batch} rows, got a state of {rows}", batch=self.batch,
                                rows=state.shape[0]))
        self.conv, self.state, self.length = conv, state.float(), self.length + t

    def positions(self, t_new: int) -> Tensor:
        """``(t_new,)`` the positions of the next tokens (on the state's device once there is one)."""
        device = None if self.state is None else self.state.device
        return torch.arange(self.length, self.length + t_new, device=device)

    @property
    def nbytes(self) -> int:
        """The bytes held (0 before the first token; then the same at any length)."""
        return sum(0 if x is None else x.nbytes for x in (self.conv, self.state))

    def reset(self) -> None:
        self.conv = self.state = None
        self.length = 0


class HybridCache(CacheOf):
    """A decoding cache of heterogeneous layers: ``layers[i]`` is block ``i``'s (a ``LayerKVCache``, a
    ``LatentLayerCache`` (Kimi Linear's MLA layers) or a :class:`RecurrentLayerCache`), all counting the same tokens.

    ``shape``: the :class:`CacheShape` of the model's full-attention layers (the layer count, their key/value heads
    and head size), checked against the model as every cache is; ``rows``: the batch.
    """

    def __init__(self, layers: Sequence[Any], shape: CacheShape, batch: int) -> None:
        self.layers = list(layers)
        self.shape, self.rows = shape, batch
        self.memory_mask = None

    @property
    def length(self) -> int:
        """Positions seen so far: the next token's position."""
        return self.layers[0].length

    @property
    def context_length(self) -> None:
        """No limit: a memory has no end, and the key/value layers grow."""
        return None

    def positions(self, t: int) -> Tensor:
        """``(t,)`` the positions of the next ``t`` tokens."""
        return self.layers[0].positions(t)

    def advance(self, t: int) -> None:
        """Nothing to do: each layer counted its tokens as it kept them."""

    def reset(self) -> None:
        """Start a new sequence: every memory back to zeros, every key/value layer empty."""
        for layer in self.layers:
            if isinstance(layer, RecurrentLayerCache):
                layer.reset()
            else:
                layer.length = 0

    @property
    def nbytes(self) -> int:
        """The bytes held: the key/value buffers (filled or not) and the recurrent states."""
        return sum(layer.nbytes if isinstance(layer, RecurrentLayerCache) else layer.buffer.nbytes
                   if isinstance(layer, LatentLayerCache) else layer.keys.nbytes + layer.values.nbytes
                   for layer in self.layers)

    def filled_nbytes(self) -> int:
        """The bytes of what the layers hold now: the filled key/value positions and the recurrent states."""
        total = 0
        for layer in self.layers:
            if isinstance(layer, RecurrentLayerCache):
                total += layer.nbytes
            elif isinstance(layer, LatentLayerCache):  # Kimi Linear's MLA layers: latents, not keys and values
                total += layer.filled_nbytes()
            else:
                total += 2 * layer.length * layer.keys[:, :, :1].nbytes
        return total
