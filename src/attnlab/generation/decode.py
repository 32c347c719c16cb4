"""Autoregressive decoding with a KV cache.

The prompt is run once (prefill), filling the cache; then each new token is a forward pass of
length 1 that attends to the cached keys and values: O(T) work per token instead of O(T²).

Beyond the context: a model with learned absolute positions cannot slide its window, because
every cached key was computed at its old position. Once ``context_length`` positions are used,
each further token is computed exactly like the no-cache loop: a full forward pass over the last
``context_length`` tokens (crop and recompute). Results equal recomputation throughout.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from attnlab.generation.sampling import check_sampling, sample_next_token


def _check(model: Any, idx: Tensor, max_new_tokens: int, temperature: float, top_k, top_p) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(f"max_new_tokens must be an int >= 0, got {max_new_tokens!r}")
    check_sampling(temperature, top_k, top_p)
    if not isinstance(idx, Tensor) or idx.dim() != 2 or idx.shape[1] == 0:
        got = tuple(idx.shape) if isinstance(idx, Tensor) else type(idx).__name__
        raise ValueError(f"idx must be a (B, T) tensor of token ids with T >= 1 (the prompt), got {got}")


@torch.no_grad()
def generate_stream(model: Any, idx: Tensor, max_new_tokens: int, temperature: float = 1.0,
                    top_k: int | None = None, top_p: float | None = None,
                    generator: torch.Generator | None = None, use_cache: bool = True) -> Iterator[Tensor]:
    """Yield ``max_new_tokens`` new token ids, each ``(B,)``, as soon as each is chosen.

    ``model`` is a :class:`attnlab.models.GPT` (anything with its ``config``, ``new_kv_cache`` and
    ``forward(idx, kv_cache=...)``). It runs in eval mode (no dropout) and is put back afterwards.
    ``use_cache=False`` recomputes the whole window at every step (the reference).
    """
    _check(model, idx, max_new_tokens, temperature, top_k, top_p)
    ctx = model.config.context_length
    was_training = model.training
    model.eval()
    try:
        seq = idx
        cache = model.new_kv_cache(idx.shape[0]) if use_cache else None
        logits = model(seq[:, -ctx:], kv_cache=cache)[:, -1]
        for step in range(max_new_tokens):
            nxt = sample_next_token(logits, temperature, top_k, top_p, generator)
            yield nxt
            seq = torch.cat([seq, nxt[:, None].to(seq.dtype)], dim=1)
            if step == max_new_tokens - 1:
                break
            if cache is not None and cache.length < ctx:
                logits = model(nxt[:, None].to(seq.dtype), kv_cache=cache)[:, -1]
            else:  # no cache, or the window is full: crop and recompute
                logits = model(seq[:, -ctx:])[:, -1]
    finally:
        model.train(was_training)


def generate(model: Any, idx: Tensor, max_new_tokens: int, temperature: float = 1.0, top_k: int | None = None,
             top_p: float | None = None, generator: torch.Generator | None = None,
             use_cache: bool = True) -> Tensor:
    """``idx (B, T)`` followed by ``max_new_tokens`` new tokens: ``(B, T + max_new_tokens)``.

    Temperature 0 is greedy decoding. ``generator`` makes sampling reproducible.
    """
    new = list(generate_stream(model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache))
    return torch.cat([idx, *(t[:, None].to(idx.dtype) for t in new)], dim=1)
