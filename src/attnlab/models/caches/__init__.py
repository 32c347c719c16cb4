"""The caches a model decodes with: what each layer keeps between steps, so a new token attends to the keys and
values of the earlier ones instead of recomputing them.

* :class:`KVCache` (``dynamic.py``): counts positions on the host and hands the attention the filled part of its
  buffers; an encoder-decoder's also keeps each layer's keys and values of the memory, and follows beams.
* :class:`RollingLayerKVCache` (``rolling.py``): a sliding-window layer's share of a :class:`KVCache`, the last
  ``window`` positions in a ring buffer (Mistral's rolling cache): bounded memory at any length.
* :class:`SinkKVCache` (``sink.py``): StreamingLLM's, the first ``sink_tokens`` positions and a sliding window
  of the latest, rotated to their places in the cache: bounded memory for an endless stream, on any model.
* :class:`StaticKVCache` (``static.py``): keeps the position on the device and hands over whole buffers with a
  mask, so that a compiled step is one graph for every token.
* :class:`HybridCache` (``recurrent.py``): a model of softmax and linear-attention layers, each layer's own kind,
  a :class:`RecurrentLayerCache` (a short convolution's last inputs and a fixed memory, float32) for a linear one.
* :class:`LatentCache` (``latent.py``): multi-head latent attention's (DeepSeek), per token and layer only the
  latent and the rope key, ``kv_lora_rank + qk_rope_head_dim`` numbers, whatever the number of heads.
* int8 storage (``quantized.py``): an option of the dynamic cache, ``KVCache.for_model(model, batch,
  storage="int8")``: keys and values in int8, about half the memory of bf16, for long contexts.

Each is made for a model by its class's ``for_model(model, batch, ...)``, which checks what the model allows
(``model.new_cache(batch)`` is the dynamic one), and each is, layer by layer, the one protocol the attention
modules call: :class:`attnlab.attention.cache.LayerCache`. A cache given to a model it was not made for is refused
(``layout.py``).

Under ``torch.autocast`` a model keeps float32 weights but its matmuls run in bfloat16 or float16, so the keys and
values it produces, and the cache that keeps them, are in that dtype (:func:`compute_dtype`), not the weights'.
"""

from __future__ import annotations

import torch
from torch import Tensor

from attnlab.models.caches.dynamic import KVCache, LayerKVCache
from attnlab.models.caches.latent import LatentCache, LatentLayerCache
from attnlab.models.caches.quantized import STORAGES
from attnlab.models.caches.recurrent import HybridCache, RecurrentLayerCache
from attnlab.models.caches.rolling import RollingLayerKVCache
from attnlab.models.caches.shape import CacheLayout, CacheShape
from attnlab.models.caches.sink import SinkKVCache, SinkLayerKVCache
from attnlab.models.caches.static import StaticKVCache, StaticLayerKVCache

__all__ = ["STORAGES", "CacheLayout", "CacheShape", "HybridCache", "KVCache", "LatentCache", "LatentLayerCache",
           "LayerKVCache", "RecurrentLayerCache",
           "RollingLayerKVCache", "SinkKVCache", "SinkLayerKVCache", "StaticKVCache", "StaticLayerKVCache",
           "compute_dtype"]


def compute_dtype(weight: Tensor) -> torch.dtype:
    """The dtype a layer with this weight computes in here: autocast's where it is on for the weight's device,
    else the weight's own (e.g. bfloat16 for a model cast with ``.to(torch.bfloat16)``)."""
    device = weight.device.type
    if torch.is_autocast_enabled(device) and weight.is_floating_point():
        return torch.get_autocast_dtype(device)
    return weight.dtype
