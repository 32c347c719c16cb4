"""Decoding with a compiled step: a static KV cache, one graph per token, replayed by CUDA graphs on a GPU.

On a GPU, decoding one token of a small model is a few hundred tiny kernels; launching them costs more than
running them, which is why an eager loop, even with a KV cache, is no faster than recomputing. Here the prompt
is prefilled eagerly into a :class:`~attnlab.models.StaticKVCache` (its length varies), and every further token
is one call of the model's ``decode_step`` compiled by ``torch.compile(fullgraph=True)``: on CUDA with
``mode="reduce-overhead"``, which captures the step in a CUDA graph and then replays the whole step as one
launch. Sampling stays outside the graph (it owns the random generator), so the tokens are the eager loop's.
"""

from __future__ import annotations

import types
import weakref
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import Tensor

from attnlab.generation.loop import Steps, decode_loop, position_limit
from attnlab.models.caches import StaticKVCache, compute_dtype
from attnlab.models.checks import check_token_ids

_STEPS: dict[tuple, Callable] = {}  # one compiled step per model class, shapes, device type and options
_CACHES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # model -> (key, an idle static cache)


def compile_options(device: torch.device) -> dict[str, Any]:
    """How the step is compiled: on CUDA, inductor with CUDA graphs; elsewhere inductor alone."""
    if device.type == "cuda":
        return {"fullgraph": True, "mode": "reduce-overhead"}
    return {"fullgraph": True}


def compiled_step(model: Any, device: torch.device) -> Callable[[Any, Tensor, Any], Tensor]:
    """``step(model, idx, cache)``: the model class's ``decode_step``, compiled once per class, parameter shapes,
    device type and options.

    Compiling the function, not the bound method, keeps no model alive; another model of the same shapes is a new
    guard, not a new compilation. Each shape gets a copy of the function's code: dynamo keeps its compiled graphs,
    and its limit of recompilations (8), per code object, so a ninth model shape in a process would otherwise fail
    under ``fullgraph=True`` rather than compile.
    """
    options = compile_options(device)
    shapes = tuple((tuple(p.shape), p.dtype) for p in model.parameters())
    key = (type(model), shapes, device.type, repr(sorted(options.items())))
    if key not in _STEPS:
        _STEPS[key] = torch.compile(_fresh_copy(type(model).decode_step), **options)
    return _STEPS[key]


def _fresh_copy(fn: Callable) -> Callable:
    """``fn`` with a code object of its own (equal, not the same), so dynamo counts its compilations apart."""
    copy = types.FunctionType(fn.__code__.replace(), fn.__globals__, fn.__name__, fn.__defaults__, fn.__closure__)
    copy.__kwdefaults__, copy.__qualname__, copy.__doc__ = fn.__kwdefaults__, fn.__qualname__, fn.__doc__
    return copy


def static_length(model: Any, needed: int) -> int:
    """The positions a static cache is allocated for: the sequence's ``needed`` positions rounded up to a power of
    two, at most a learned position table's size (rotary positions decode past ``context_length``: no cap).

    Every step attends over every slot, the ones not yet filled masked, so the cache is sized to the sequence, not
    to the model's context: gpt2-small's 1,024 slots for a 128-token sequence read 66 MB of keys and values more
    per token, 4-5 ms of a 40 ms step on a 2-core CPU. Powers of two, so that a cache is reused across calls of
    about the same length; the length is dynamic in the compiled step (:func:`_any_length`), so a longer call does
    not compile again (but at the splits, 8 and 32 slots, where the single-query path changes its method).
    """
    limit = position_limit(model)
    size = 1 << (needed - 1).bit_length()
    return size if limit is None else min(size, limit)


def _take_cache(model: Any, batch: int, length: int) -> tuple[tuple, Any]:
    """The model's idle static cache if it fits (the same buffers: CUDA graphs need no new capture), else a new one.

    Taken, not shared: two streams decoding with one model at once each get their own.
    """
    weight = next(model.parameters())
    key = (batch, length, compute_dtype(weight), weight.device)
    held = _CACHES.pop(model, None)
    if held is not None and held[0] == key:
        held[1].reset()
        return held
    return key, _any_length(StaticKVCache.for_model(model, batch, length))


def _any_length(cache: Any) -> Any:
    """``cache`` ready for the compiled step: its tensors marked as keeping their addresses (CUDA graphs may then
    write them in place, step after step), and its number of slots dynamic, so that one graph serves the sizes
    :func:`static_length` gives (otherwise the second size would compile again, tens of seconds on a CPU, before
    torch made it dynamic)."""
    for t in (cache.position, cache.slots, *(b for layer in cache.layers for b in (layer.keys, layer.values))):
        torch._dynamo.mark_static_address(t)
    torch._dynamo.maybe_mark_dynamic(cache.slots, 0)
    for layer in cache.layers:
        torch._dynamo.maybe_mark_dynamic(layer.keys, 2)
        torch._dynamo.maybe_mark_dynamic(layer.values, 2)
    return cache


class CompiledSteps(Steps):
    """The prompt through the model's ``decode_step`` (eagerly: its length is its own), each new token through the
    step compiled once per model class (:func:`compiled_step`)."""

    def __init__(self, model: Any, cache: Any) -> None:
        super().__init__(model, cache, None)
        self.compiled = compiled_step(model, next(model.parameters()).device)

    def prefill(self, prompt: Tensor) -> Tensor:
        check_token_ids(prompt, self.model.config.vocab_size, type(self.model).__name__)  # decode_step checks nothing
        return self.model.decode_step(prompt, self.cache)

    def step(self, token: Tensor, mask: Tensor | None = None) -> Tensor:
        torch.compiler.cudagraph_mark_step_begin()  # the last step's outputs are used up: reuse their memory
        return self.compiled(self.model, token, self.cache)


def decode_compiled(model: Any, idx: Tensor, max_new_tokens: int, config: Any, generator: torch.Generator | None,
                    cache: Any = None) -> Iterator[Tensor]:
    """The new tokens ``(B,)`` one by one, as :func:`~attnlab.generation.generate_stream` with ``compile=True``:
    the eager loop (:func:`~attnlab.generation.loop.decode_loop`) with a static cache and the compiled step.

    The model needs ``cache_layout()`` and ``decode_step(idx, cache)`` (as :class:`~attnlab.models.GPT` has). The
    cache is the caller's :class:`~attnlab.models.StaticKVCache`, or the model's idle one if it fits the sequence,
    or a new one sized to it. Past ``context_length``, like the eager loop: a rotary model's static cache is
    allocated for the whole sequence; a learned position table crops and recomputes.
    """
    own = cache is None
    if own:
        key, cache = _take_cache(model, idx.shape[0], static_length(model, idx.shape[1] + max_new_tokens))
    else:
        _any_length(cache)
    try:
        yield from decode_loop(model, idx, max_new_tokens, config, generator, None, cache,
                               CompiledSteps(model, cache))
    finally:
        if own:
            _CACHES[model] = (key, cache)
