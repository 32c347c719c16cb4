"""The decoding cache of an encoder-decoder: what each decoder layer keeps between steps.

* Masked self-attention: the keys and values of the target tokens so far, growing by one per step
  (a :class:`~attnlab.models.LayerKVCache` per layer, as in a GPT).
* Cross-attention: the keys and values of the memory (the encoder's output). They depend only on the source,
  so each layer projects them once, at the first step, and reuses them at every later one.

Beam search keeps ``beam_size`` hypotheses per source as rows of one batch; :meth:`Seq2SeqCache.reorder` expands the
rows (each source's once-computed keys copied to its beams) and follows the beams as they are re-ranked.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch import Tensor

from attnlab.models.kv_cache import KVCache, LayerKVCache


@dataclass
class DecoderLayerCache:
    """One decoder layer's cache (what :class:`attnlab.layers.DecoderBlock` reads and fills)."""

    self_attn: LayerKVCache
    memory_kv: tuple[Tensor, Tensor] | None = None  # (B, H, S, head_dim) each, once the first step ran


class Seq2SeqCache:
    """Every decoder layer's cache, plus the memory's key mask ``(B, 1, 1, S)`` (None: no padding).

    ``cache[i]`` goes to decoder block ``i``; ``length`` is the number of target positions already cached.
    """

    def __init__(self, num_layers: int, batch: int, num_heads: int, context_length: int, head_dim: int,
                 dtype: torch.dtype = torch.float32, device: torch.device | str | None = None,
                 memory_mask: Tensor | None = None) -> None:
        self.self_attn = KVCache(num_layers, batch, num_heads, context_length, head_dim, dtype, device)
        self.layers = [DecoderLayerCache(layer) for layer in self.self_attn.layers]
        self.memory_mask = memory_mask

    def __getitem__(self, i: int) -> DecoderLayerCache:
        return self.layers[i]

    def __len__(self) -> int:
        return len(self.layers)

    @property
    def length(self) -> int:
        return self.self_attn.length

    @property
    def context_length(self) -> int:
        return self.self_attn.context_length

    def reorder(self, index: Tensor, memory: bool = True) -> None:
        """Keep rows ``index (B',)`` of everything, in that order: ``arange(B).repeat_interleave(k)`` gives each
        source ``k`` beams; a beam search step's parent indices follow the surviving hypotheses.

        ``memory=False`` leaves the memory's keys, values and mask as they are: right when every row is replaced by
        a row of the same source (a beam search step), whose memory rows are equal, and it saves copying them.
        """
        for layer in self.layers:
            kv = layer.self_attn
            kv.keys, kv.values = kv.keys.index_select(0, index), kv.values.index_select(0, index)
            if memory and layer.memory_kv is not None:
                layer.memory_kv = tuple(t.index_select(0, index) for t in layer.memory_kv)
        if memory and self.memory_mask is not None:
            self.memory_mask = self.memory_mask.index_select(0, index)
