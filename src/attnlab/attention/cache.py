"""What an attention module asks of a decoding cache: one protocol, whatever keeps the keys and values.

Decoding feeds a few new tokens at a time; their keys and values join those of the tokens before, which do not
change, so a cache keeps them. ``attnlab.models.caches`` has two kinds, both :class:`LayerCache`:

* dynamic (:class:`~attnlab.models.KVCache`): the position is counted on the host; ``update`` returns the filled
  part of the buffers;
* static (:class:`~attnlab.models.StaticKVCache`): the position is a tensor on the device; ``update`` returns the
  whole buffers and ``attn_mask`` hides the slots not yet filled, so a compiled step has one shape for every token;
* rolling (a sliding-window layer's, in a :class:`~attnlab.models.KVCache`): the last ``window`` positions in a
  ring buffer; ``update`` returns the kept keys and ``select_keys`` picks their entries of the padding mask.

A module never needs to know which: it calls ``update``, attends with ``attn_mask``, and rotates by
``positions``. The same block modules run a whole sequence (no cache) and one token (a cache).
"""

from __future__ import annotations

from typing import Protocol

import torch
from torch import Tensor


class LayerCache(Protocol):
    """One layer's share of a decoding cache.

    ``memory_kv``: an encoder-decoder's cross-attention keys and values of the memory, ``(B, H, S, head_dim)``
    each, projected at the first step and reused at every later one (None until then, and in a decoder-only model).
    """

    memory_kv: tuple[Tensor, Tensor] | None

    def update(self, key: Tensor, value: Tensor) -> tuple[Tensor, Tensor]:
        """Keep this step's ``key, value (B, H, T, head_dim)``; return every key and value the new queries attend
        to, ``(B, H, L, head_dim)``."""
        ...

    def attn_mask(self, t_new: int, is_causal: bool, window: int | None = None) -> Tensor | None:
        """Which of the ``L`` keys ``update`` returned each of the ``t_new`` newest queries may attend, bool,
        broadcastable to ``(t_new, L)`` (None: every one). Causal: up to its own position (and, with ``window``,
        only the last ``window`` of those, its own included)."""
        ...

    def positions(self, t_new: int) -> Tensor:
        """``(t_new,)`` the positions of the tokens about to be added (RoPE rotates by them)."""
        ...

    def select_keys(self, key_mask: Tensor | None) -> Tensor | None:
        """A model's key padding mask over every position so far, broadcastable to ``(B, 1, 1, positions)``, ->
        over the ``L`` keys ``update`` returned (a rolling cache returns only the ones it kept)."""
        ...


def cached_causal_mask(t_new: int, t_total: int, device: torch.device) -> Tensor | None:
    """Bool ``(t_new, t_total)``: the new queries (the last ``t_new`` positions) see keys up to their own.

    None for a single new token: it may attend every key in the cache, so no mask is needed.
    """
    if t_new == 1:
        return None
    return torch.ones(t_new, t_total, dtype=torch.bool, device=device).tril(diagonal=t_total - t_new)
