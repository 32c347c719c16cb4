"""The next token: the probabilities ``generate`` samples from, and the tokens it appends.

:func:`probabilities` is :func:`attnlab.generation.sampling.sample`'s arithmetic, step for step: the logits in
float32 divided by the temperature, :func:`~attnlab.generation.sampling.filter_logits` (top-k, then top-p), softmax;
temperature 0 is greedy, all the mass on the argmax. :func:`continue_ids` is the one place the explorer calls
:func:`~attnlab.generation.generate`, so the tokens a page appends are ``generate``'s own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch
from torch import Tensor

from attnlab.generation import GenerationConfig, check_sampling, cropping_expected, filter_logits, generate
from attnlab.i18n import tr

#: the most next tokens one answer lists (a request's ``top``)
MAX_TOP = 100
#: the most tokens one request appends
MAX_NEW_TOKENS = 64


@dataclass(frozen=True)
class Sampling:
    """How the next token is chosen: ``generate``'s ``temperature`` (0: greedy), ``top_k``, ``top_p`` (None: off)
    and the ``seed`` of its generator (None: no generator; only sampling uses one). Checked as ``generate``
    checks them."""

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None

    def __post_init__(self) -> None:
        check_sampling(self.temperature, self.top_k, self.top_p)
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not 0 <= self.seed < 2**64):
            raise ValueError(tr("seed: expected an integer from 0 to 2**64 - 1, got {seed!r}", seed=self.seed))

    def as_dict(self) -> dict[str, Any]:
        return {"temperature": self.temperature, "top_k": self.top_k, "top_p": self.top_p}

    def config(self) -> GenerationConfig:
        """What ``generate`` is told: these settings, and a fresh generator seeded with ``seed``."""
        return GenerationConfig(temperature=self.temperature, top_k=self.top_k, top_p=self.top_p, seed=self.seed)


def probabilities(logits: Tensor, sampling: Sampling) -> Tensor:
    """``(vocab_size,)``: the distribution ``sample`` draws the next token from, for one row of ``logits``."""
    row = logits.reshape(1, -1)
    if sampling.temperature == 0:  # greedy: sample() takes argmax, the first of equal maxima
        probs = torch.zeros(row.shape[-1])
        probs[int(row.argmax(dim=-1))] = 1.0
        return probs
    filtered = filter_logits(row.float() / sampling.temperature, sampling.top_k, sampling.top_p)
    return torch.softmax(filtered, dim=-1)[0]


def top_tokens(probs: Tensor, names: Any, top: int) -> list[dict[str, Any]]:
    """The ``top`` most likely tokens with a probability above 0, most likely first (equal ones by id):
    ``{"token", "id", "prob"}``; ``names(i)`` spells token ``i``."""
    order = torch.sort(probs, descending=True, stable=True).indices[:top]
    return [{"token": names(int(i)), "id": int(i), "prob": float(probs[i])} for i in order if probs[i] > 0]


def continue_ids(model: Any, idx: Tensor, max_new_tokens: int, sampling: Sampling, cache: Any = None) -> Tensor:
    """``idx (1, T)`` and the ``max_new_tokens`` tokens :func:`~attnlab.generation.generate` appends with
    ``sampling`` (its generator seeded with ``sampling.seed``) into ``cache`` (None: ``generate``'s own; a
    ``SinkKVCache``: StreamingLLM's): ``(1, T + n)``. A learned position table crops as ``generate`` does; the page
    says so itself."""
    with cropping_expected():
        return generate(model, idx, max_new_tokens, sampling.config(), cache=cache)
