"""The decoding loop: sample a token, feed it back, again; one loop for eager and compiled decoding.

What differs between the two is passed in: the cache (a :class:`~attnlab.models.KVCache`, a static one, or none)
and the two functions that run the model, ``prefill`` for the prompt and ``step`` for each new token (the
model's forward, or a compiled ``decode_step``).

Past ``context_length``: a model with rotary positions (``position_limit`` None) goes on, its cache growing (a
rolling one stays at its window), exactly as transformers' ``generate`` does. A model with a learned position
table cannot place a token beyond it, nor slide its window in the cache (every cached key was computed at its old
position): past the table both loops crop to its last ``position_limit`` tokens and recompute, with the model's
forward (:func:`~attnlab.generation.generate` warns when that will happen).

A model whose positions change their angles at some length (LongRoPE: at L₀ + 1 every position switches to the
long factors) says so by its ``cache_rebuild_length``: when the sequence first reaches it, the loop empties the
cache and runs the whole sequence again, once, as transformers' Phi-3 does; from there on it decodes as before.
"""

from __future__ import annotations

import contextlib
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from attnlab.generation.sampling import sample
from attnlab.models.language_model import LanguageModel

# (tokens (B, T), cache, attention_mask=... when there is padding) -> logits of the last position (B, vocab_size)
Step = Callable[..., Tensor]


def masked(mask: Tensor | None, length: int) -> dict[str, Tensor]:
    """The model's ``attention_mask`` keyword for its last ``length`` keys: none at all without padding, so a
    model without the argument still works."""
    return {} if mask is None else {"attention_mask": mask[:, -length:]}


class PositionTableWarning(UserWarning):
    """Decoding will pass a learned position table: from there on it crops and recomputes."""


@contextlib.contextmanager
def cropping_expected() -> Iterator[None]:
    """Decode without the :class:`PositionTableWarning`: for a caller that knows its model crops and says so in its
    own words (the demo's sample of a GPT)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", PositionTableWarning)
        yield


def position_limit(model: Any) -> int | None:
    """The most positions ``model`` can place (its ``position_limit``; a model without one: its
    ``config.context_length``); None: no limit."""
    return getattr(model, "position_limit", model.config.context_length)


def cache_rebuild_length(model: Any) -> int | None:
    """The sequence length at which ``model``'s cache must be dropped and the sequence recomputed (its
    ``cache_rebuild_length``); None: never."""
    return getattr(model, "cache_rebuild_length", None)


def crop(seq: Tensor, limit: int | None) -> Tensor:
    """``seq (B, T)``'s last ``limit`` tokens (all of them without a limit)."""
    return seq if limit is None else seq[:, -limit:]


def last_logits(model: Any, tokens: Tensor, cache: Any = None, **mask: Tensor) -> Tensor:
    """The model's forward over ``tokens (B, T)`` (after what ``cache`` holds): logits of the last position (an
    attnlab language model computes no others)."""
    keep = {"logits_to_keep": 1} if isinstance(model, LanguageModel) else {}
    return model(tokens, kv_cache=cache, **mask, **keep).logits[:, -1]


@torch.no_grad()
def decode_loop(model: Any, idx: Tensor, max_new_tokens: int, temperature: float, top_k: int | None,
                top_p: float | None, generator: torch.Generator | None, eos_token_id: int | None,
                mask: Tensor | None, cache: Any, prefill: Step, step: Step) -> Iterator[Tensor]:
    """The new tokens ``(B,)`` one by one, for the prompt ``idx (B, T)`` (its padding ``mask (B, T)`` or None).

    ``prefill(prompt, cache, **mask)`` runs the prompt (its last ``position_limit`` tokens), filling ``cache``;
    ``step(token (B, 1), cache, **mask)`` runs one new token after the cached ones. Both return the last
    position's logits ``(B, vocab_size)``. Without a cache (None) every token recomputes the window. The model
    runs in eval mode and is put back afterwards. Arguments are those of :func:`~attnlab.generation.generate`,
    checked there.
    """
    limit, rebuild = position_limit(model), cache_rebuild_length(model)
    was_training = model.training
    model.eval()
    try:
        seq = window = crop(idx, limit)
        logits = prefill(window, cache, **masked(mask, window.shape[1]))
        filled = window.shape[1]  # positions the cache holds
        done = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
        for i in range(max_new_tokens):
            nxt = sample(logits, temperature, top_k, top_p, generator)
            if eos_token_id is not None:  # a finished row keeps repeating its end-of-sequence token
                nxt = nxt.masked_fill(done, eos_token_id)
                done |= nxt == eos_token_id
            yield nxt
            seq = torch.cat([seq, nxt[:, None].to(seq.dtype)], dim=1)
            if mask is not None:  # the new token is real
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
            if i == max_new_tokens - 1 or (eos_token_id is not None and bool(done.all())):
                break
            if cache is not None and rebuild is not None and filled < rebuild <= seq.shape[1]:
                cache.reset()  # the cached keys' angles are no longer those of their positions: run all again
                window = crop(seq, limit)
                logits = prefill(window, cache, **masked(mask, window.shape[1]))
                filled = window.shape[1]
            elif cache is not None and (limit is None or filled < limit):
                logits = step(nxt[:, None].to(seq.dtype), cache, **masked(mask, filled + 1))
                filled += 1
            else:  # no cache, or the position table is full: recompute (cropped to the table)
                window = crop(seq, limit)
                logits = last_logits(model, window, **masked(mask, window.shape[1]))
    finally:
        model.train(was_training)
