"""The decoding loop: sample a token, feed it back, again; one loop for eager and compiled decoding.

What differs between the two is passed in: the cache (a :class:`~attnlab.models.KVCache`, a static one, or none)
and the two functions that run the model, ``prefill`` for the prompt and ``step`` for each new token (the
model's forward, or a compiled ``decode_step``). Past ``context_length`` both crop and recompute, with the
model's forward: a model with learned absolute positions cannot slide its window, because every cached key was
computed at its old position.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from attnlab.generation.sampling import sample

# (tokens (B, T), cache, attention_mask=... when there is padding) -> logits of the last position (B, vocab_size)
Step = Callable[..., Tensor]


def masked(mask: Tensor | None, length: int) -> dict[str, Tensor]:
    """The model's ``attention_mask`` keyword for its last ``length`` keys: none at all without padding, so a
    model without the argument still works."""
    return {} if mask is None else {"attention_mask": mask[:, -length:]}


def last_logits(model: Any, tokens: Tensor, cache: Any = None, **mask: Tensor) -> Tensor:
    """The model's forward over ``tokens (B, T)`` (after what ``cache`` holds): logits of the last position."""
    return model(tokens, kv_cache=cache, **mask).logits[:, -1]


@torch.no_grad()
def decode_loop(model: Any, idx: Tensor, max_new_tokens: int, temperature: float, top_k: int | None,
                top_p: float | None, generator: torch.Generator | None, eos_token_id: int | None,
                mask: Tensor | None, cache: Any, prefill: Step, step: Step) -> Iterator[Tensor]:
    """The new tokens ``(B,)`` one by one, for the prompt ``idx (B, T)`` (its padding ``mask (B, T)`` or None).

    ``prefill(prompt, cache, **mask)`` runs the prompt's last ``context_length`` tokens, filling ``cache``;
    ``step(token (B, 1), cache, **mask)`` runs one new token after the cached ones. Both return the last
    position's logits ``(B, vocab_size)``. Without a cache (None) every token recomputes the window. The model
    runs in eval mode and is put back afterwards. Arguments are those of :func:`~attnlab.generation.generate`,
    checked there.
    """
    ctx = model.config.context_length
    was_training = model.training
    model.eval()
    try:
        seq = idx
        logits = prefill(seq[:, -ctx:], cache, **masked(mask, ctx))
        filled = min(seq.shape[1], ctx) if cache is not None else ctx  # positions the cache holds
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
            if filled < ctx:
                logits = step(nxt[:, None].to(seq.dtype), cache, **masked(mask, filled + 1))
                filled += 1
            else:  # no cache, or the window is full: crop and recompute
                logits = last_logits(model, seq[:, -ctx:], **masked(mask, ctx))
    finally:
        model.train(was_training)
