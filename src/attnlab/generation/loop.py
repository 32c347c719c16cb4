"""The decoding loop: sample a token, feed it back, again; one loop for eager and compiled decoding.

What differs between the two is passed in: the cache (a :class:`~attnlab.models.KVCache`, a static one, or none)
and how the model runs, :class:`Steps`: the prompt through the model's checked forward, each new token through its
unchecked ``decode_step`` (or a compiled one). The inputs were checked once, by ``generate``; a step checks nothing.

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
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from attnlab.generation.sampling import sample
from attnlab.models.language_model import LanguageModel


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


class Steps:
    """How a loop runs the model: the prompt through its checked forward, each new token through its unchecked
    ``decode_step`` (with the padding and positions the loop keeps), or, for a model without one, its forward.

    ``mask (B, T)``: the prompt's padding (1 = real), or None. After the prompt, the loop keeps the key padding
    ``(B, 1, 1, L)`` over every position so far and each row's next position, so a step reads nothing back.
    """

    def __init__(self, model: Any, cache: Any, mask: Tensor | None) -> None:
        self.model, self.cache, self.mask = model, cache, mask
        self.unchecked = cache is not None and isinstance(model, LanguageModel)
        self.keys: Tensor | None = None  # (B, 1, 1, L) bool, with padding only
        self.next_position: Tensor | None = None  # (B, 1), with padding only

    def prefill(self, prompt: Tensor) -> Tensor:
        """The prompt's last logits ``(B, vocab)``, the cache filled (a sink cache's past its places, token by
        token, each evicting the window's oldest)."""
        capacity = getattr(self.cache, "capacity", None)
        if capacity is not None and prompt.shape[1] > capacity:
            logits = last_logits(self.model, prompt[:, :capacity], self.cache)
            for t in range(capacity, prompt.shape[1]):
                logits = last_logits(self.model, prompt[:, t : t + 1], self.cache)
            return logits
        logits = last_logits(self.model, prompt, self.cache, **masked(self.mask, prompt.shape[1]))
        if self.mask is not None and self.unchecked:
            real = self.mask[:, -prompt.shape[1]:]
            self.keys = real.bool()[:, None, None, :]
            self.next_position = real.long().sum(-1, keepdim=True)
        return logits

    def step(self, token: Tensor, mask: Tensor | None) -> Tensor:
        """The logits ``(B, vocab)`` after ``token (B, 1)``, placed after what the cache holds (``mask``: the padding
        of every position so far, the new one's included, for a model stepped through its forward)."""
        if not self.unchecked:
            return last_logits(self.model, token, self.cache, **masked(mask, self.cache.length + 1))
        if self.keys is None:
            return self.model.decode_step(token, self.cache)
        assert self.next_position is not None  # made with the keys
        self.keys = torch.cat([self.keys, self.keys.new_ones(len(token), 1, 1, 1)], dim=-1)
        logits = self.model.decode_step(token, self.cache, self.keys, self.next_position)
        self.next_position = self.next_position + 1
        return logits


@torch.no_grad()
def decode_loop(model: Any, idx: Tensor, max_new_tokens: int, config: Any, generator: torch.Generator | None,
                mask: Tensor | None, cache: Any, steps: Steps | None = None) -> Iterator[Tensor]:
    """The new tokens ``(B,)`` one by one, for the prompt ``idx (B, T)`` (its padding ``mask (B, T)`` or None).

    ``steps`` runs the model (:class:`Steps` by default; the compiled loop gives its own); without a cache (None)
    every token recomputes the window. The model runs in eval mode and is put back afterwards. ``config`` is the
    :class:`~attnlab.generation.GenerationConfig`, checked by :func:`~attnlab.generation.generate`.
    """
    limit, rebuild = position_limit(model), cache_rebuild_length(model)
    steps = Steps(model, cache, mask) if steps is None else steps
    stops = torch.tensor(config.stop_tokens, dtype=torch.long, device=idx.device) if config.stop_tokens else None
    was_training = model.training
    model.eval()
    try:
        seq = window = crop(idx, limit)
        logits = steps.prefill(window) if cache is not None else \
            last_logits(model, window, **masked(mask, window.shape[1]))
        filled = window.shape[1]  # positions the cache holds
        done = torch.zeros(idx.shape[0], dtype=torch.bool, device=idx.device)
        last = torch.zeros(idx.shape[0], dtype=torch.long, device=idx.device)  # a finished row's stop token
        for i in range(max_new_tokens):
            nxt = sample(logits, config.temperature, config.top_k, config.top_p, generator)
            if stops is not None:  # a finished row keeps repeating the stop token it produced
                nxt = torch.where(done, last, nxt)
                stopped = torch.isin(nxt, stops) & ~done
                last, done = torch.where(stopped, nxt, last), done | stopped
            yield nxt
            seq = torch.cat([seq, nxt[:, None].to(seq.dtype)], dim=1)
            if mask is not None:  # the new token is real
                mask = torch.cat([mask, mask.new_ones(mask.shape[0], 1)], dim=1)
            if i == max_new_tokens - 1 or (stops is not None and bool(done.all())):
                break
            if cache is not None and rebuild is not None and filled < rebuild <= seq.shape[1]:
                cache.reset()  # the cached keys' angles are no longer those of their positions: run all again
                window = crop(seq, limit)
                steps.mask = None if mask is None else mask[:, -window.shape[1]:]
                logits = steps.prefill(window)
                filled = window.shape[1]
            elif cache is not None and (limit is None or filled < limit):
                logits = steps.step(nxt[:, None].to(seq.dtype), mask)
                filled += 1
            else:  # no cache, or the position table is full: recompute (cropped to the table)
                window = crop(seq, limit)
                logits = last_logits(model, window, **masked(mask, window.shape[1]))
    finally:
        model.train(was_training)
