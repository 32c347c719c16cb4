"""Choosing the next token from the model's logits.

* temperature T: divide the logits by T before the softmax (T < 1 sharper, T > 1 flatter);
  T = 0 means greedy (argmax), deterministic.
* top-k: keep the k highest logits (ties with the k-th are kept too), drop the rest.
* top-p (nucleus): keep the smallest set of most likely tokens whose probability adds up to at
  least p, drop the rest (after temperature and top-k).
"""

from __future__ import annotations

import math

import torch
from torch import Tensor

from attnlab.i18n import tr


def check_sampling(temperature: float, top_k: int | None, top_p: float | None) -> None:
    """Clear errors for bad sampling options."""
    if isinstance(temperature, bool) or not isinstance(temperature, int | float) \
            or not math.isfinite(temperature) or temperature < 0:
        raise ValueError(tr("temperature must be a finite float >= 0 (0 = greedy), got {temperature!r}",
                            temperature=temperature))
    if top_k is not None and (isinstance(top_k, bool) or not isinstance(top_k, int) or top_k < 1):
        raise ValueError(tr("top_k must be None or an int >= 1, got {top_k!r}", top_k=top_k))
    if top_p is not None and (isinstance(top_p, bool) or not isinstance(top_p, int | float)
                              or not 0.0 < top_p <= 1.0):
        raise ValueError(tr("top_p must be None or a float in (0, 1], got {top_p!r}", top_p=top_p))


def _check_logits(logits: Tensor) -> None:
    if not isinstance(logits, Tensor) or not torch.is_floating_point(logits) or logits.dim() != 2:
        got = f"shape {tuple(logits.shape)}, dtype {logits.dtype}" if isinstance(logits, Tensor) else type(logits)
        raise ValueError(tr("logits must be a floating-point tensor of shape (B, vocab_size), got {got}", got=got))
    if bool(torch.isnan(logits).any()):
        raise ValueError(tr("logits contain NaN"))


def filter_logits(logits: Tensor, top_k: int | None = None, top_p: float | None = None) -> Tensor:
    """``logits (B, V)`` with ``-inf`` at every token that top-k / top-p rule out."""
    _check_logits(logits)
    check_sampling(1.0, top_k, top_p)
    return _filter(logits, top_k, top_p)


def _filter(logits: Tensor, top_k: int | None, top_p: float | None) -> Tensor:
    if top_k is not None and top_k < logits.shape[-1]:
        kth = torch.topk(logits, top_k, dim=-1).values[:, -1:]
        logits = logits.masked_fill(logits < kth, float("-inf"))
    if top_p is not None and top_p < 1.0:
        probs, order = torch.sort(torch.softmax(logits, dim=-1), dim=-1, descending=True)
        before = probs.cumsum(dim=-1) - probs  # mass of the more likely tokens
        drop_sorted = before >= top_p  # already enough mass before this one; the top token always stays
        drop = drop_sorted.scatter(-1, order, drop_sorted)
        logits = logits.masked_fill(drop, float("-inf"))
    return logits


def sample_next_token(logits: Tensor, temperature: float = 1.0, top_k: int | None = None,
                      top_p: float | None = None, generator: torch.Generator | None = None) -> Tensor:
    """Pick one token per row of ``logits (B, V)``: returns ids ``(B,)`` (int64).

    Example:
        >>> sample_next_token(torch.tensor([[0.1, 2.0, -1.0]]), temperature=0)
        tensor([1])
    """
    _check_logits(logits)
    check_sampling(temperature, top_k, top_p)
    return sample(logits, temperature, top_k, top_p, generator)


def sample(logits: Tensor, temperature: float, top_k: int | None, top_p: float | None,
           generator: torch.Generator | None) -> Tensor:
    """:func:`sample_next_token` without the checks, for a decoding loop that checked its options once."""
    if temperature == 0:
        return logits.argmax(dim=-1)
    logits = _filter(logits.float() / temperature, top_k, top_p)
    probs = torch.softmax(logits, dim=-1)
    return torch.multinomial(probs, num_samples=1, generator=generator).squeeze(-1)
