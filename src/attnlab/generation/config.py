"""How to choose each next token, in one object: :class:`GenerationConfig`, checked when it is made.

``generate(model, idx, max_new_tokens, config=GenerationConfig(temperature=0.8, top_k=20, seed=0))``: the
sampling knobs (:mod:`attnlab.generation.sampling`), when to stop, and how to run the model (with a cache, compiled,
on the fast path or the book's). The cache itself is an object of its own, passed beside it
(``generate(..., cache=...)``).

Example:
    >>> GenerationConfig(temperature=0).greedy
    True
    >>> GenerationConfig(top_p=1.5)
    Traceback (most recent call last):
    ...
    ValueError: GenerationConfig: top_p must be None or a float in (0, 1], got 1.5
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import torch

from attnlab.generation.sampling import check_sampling
from attnlab.i18n import tr

#: a seed's range: what ``torch.Generator.manual_seed`` takes (64 bits)
SEED_RANGE = (0, 2**64 - 1)


@dataclass(frozen=True)
class GenerationConfig:
    """The options of :func:`~attnlab.generation.generate`.

    Attributes:
        temperature: divides the logits before the softmax; 0 is greedy decoding (argmax), deterministic.
        top_k: keep the ``top_k`` most likely tokens (ties with the k-th kept); None: all.
        top_p: keep the smallest set of most likely tokens holding probability ``top_p`` (after ``top_k``); None: all.
        seed: sample from a fresh ``torch.Generator`` seeded with it (on the model's device); reproducible.
        generator: instead, a generator of the caller's, which sampling advances (not with ``seed``).
        stop_tokens: token ids that end a row; once every row has produced one, decoding stops, and a row that
            finished earlier repeats the stop token it produced. An int is one stop token.
        use_cache: False recomputes the whole window at every step (the reference the cache is tested against).
        compile: decode with a static cache and a step compiled by ``torch.compile(fullgraph=True)`` (on CUDA
            replayed as a CUDA graph): the same tokens as the eager loop; the first call compiles (seconds).
        accelerate: run the model's fast twin (:func:`attnlab.fast.accelerated`: the same numbers, faster); False
            runs the book's plain modules, to step through exactly what the book writes.
    """

    temperature: float = 1.0
    top_k: int | None = None
    top_p: float | None = None
    seed: int | None = None
    generator: torch.Generator | None = None
    stop_tokens: tuple[int, ...] = ()
    use_cache: bool = True
    compile: bool = False
    accelerate: bool = True

    def __post_init__(self) -> None:
        owner = type(self).__name__
        try:
            check_sampling(self.temperature, self.top_k, self.top_p)
        except ValueError as error:
            raise ValueError(f"{owner}: {error}") from None
        if self.seed is not None and (isinstance(self.seed, bool) or not isinstance(self.seed, int)
                                      or not SEED_RANGE[0] <= self.seed <= SEED_RANGE[1]):
            raise ValueError(tr("{owner}: seed must be None or an int in [0, 2**64 - 1], got {seed!r}", owner=owner,
                                seed=self.seed))
        if self.generator is not None and not isinstance(self.generator, torch.Generator):
            raise TypeError(tr("{owner}: generator must be None or a torch.Generator, got {got}", owner=owner,
                               got=type(self.generator).__name__))
        if self.seed is not None and self.generator is not None:
            raise ValueError(tr("{owner}: give seed or generator, not both (a seed makes a generator of its own)",
                                owner=owner))
        object.__setattr__(self, "stop_tokens", _stop_tokens(owner, self.stop_tokens))
        for name in ("use_cache", "compile", "accelerate"):
            if not isinstance(getattr(self, name), bool):
                raise ValueError(tr("{owner}: {name} must be True or False, got {value!r}", owner=owner, name=name,
                                    value=getattr(self, name)))
        if self.compile and not self.use_cache:
            raise ValueError(tr("{owner}: compile=True decodes with a static KV cache; it cannot be combined with "
                                "use_cache=False", owner=owner))

    @property
    def greedy(self) -> bool:
        """Whether every token is the argmax (temperature 0)."""
        return self.temperature == 0

    def sampler(self, device: torch.device | str) -> torch.Generator | None:
        """The generator sampling draws from: the caller's, a fresh one from ``seed`` on ``device``, or None (torch's
        global one)."""
        if self.seed is None:
            return self.generator
        return torch.Generator(device=device).manual_seed(self.seed)

    def replace(self, **changes: Any) -> GenerationConfig:  # Any: each field its own type, checked again
        """This config with some fields changed (checked again)."""
        return dataclasses.replace(self, **changes)


def _stop_tokens(owner: str, value: object) -> tuple[int, ...]:
    """``stop_tokens`` as a tuple of ids >= 0 (an int is one)."""
    given: tuple[object, ...] | None = None
    if isinstance(value, int) and not isinstance(value, bool):
        given = (value,)
    elif isinstance(value, Iterable) and not isinstance(value, str | bytes):
        given = tuple(value)
    tokens = tuple(t for t in given or () if isinstance(t, int) and not isinstance(t, bool) and t >= 0)
    if given is None or len(tokens) != len(given):  # the value as given
        raise ValueError(tr("{owner}: stop_tokens must be token ids >= 0 (an int, or a tuple of them), got {value!r}",
                            owner=owner, value=value))
    return tokens
