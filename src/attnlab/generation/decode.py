"""Autoregressive decoding with a KV cache: ``generate(model, idx, max_new_tokens, config=None, cache=None)``.

The prompt is run once (prefill), filling the cache; then each new token is a step of length 1 that attends to the
cached keys and values: O(T) work per token instead of O(T²). How each token is chosen is a
:class:`~attnlab.generation.GenerationConfig`; which cache keeps the keys is an object of its own (the model's
dynamic one by default; a static, sink or int8-stored one by its class's ``for_model``). Everything is checked
once, when ``generate`` is called: the steps themselves run unchecked (``model.decode_step``).

With ``compile=True`` the steps run as one compiled graph each (:mod:`attnlab.generation.compiled_decode`);
eager or compiled, the tokens come from one loop (:mod:`attnlab.generation.loop`). By default the model's fast twin
runs (:func:`attnlab.fast.accelerated`: the same numbers, faster); ``accelerate=False`` runs the book's modules.

Beyond the context (:mod:`attnlab.generation.loop`): a model with rotary positions decodes on, its cache growing
(a sliding-window layer's rolling cache stays at its window), as transformers' ``generate`` does. A model with a
learned position table cannot place a token past it, nor slide its window in the cache (every cached key was
computed at its old position): once the table is full, each further token is computed exactly like the no-cache
loop, by a full forward pass over the last ``position_limit`` tokens (crop and recompute), and ``generate`` warns
before it starts.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator, Sequence
from typing import Any, overload

import torch
from torch import Tensor

from attnlab.fast import accelerated
from attnlab.fast.kernels import load as load_kernels
from attnlab.generation.compiled_decode import decode_compiled
from attnlab.generation.config import GenerationConfig
from attnlab.generation.loop import PositionTableWarning, decode_loop, position_limit
from attnlab.generation.ragged import encode_prompts, left_pad, unpad
from attnlab.i18n import tr
from attnlab.models.caches import SinkKVCache, StaticKVCache


@overload
def generate(model: Any, idx: Tensor, max_new_tokens: int, config: GenerationConfig | None = None,
             cache: Any = None, attention_mask: Tensor | None = None) -> Tensor: ...
@overload
def generate(model: Any, idx: Sequence[Any], max_new_tokens: int, config: GenerationConfig | None = None,
             cache: Any = None, attention_mask: Tensor | None = None) -> list[list[int]]: ...
def generate(model: Any, idx: Tensor | Sequence[Any], max_new_tokens: int, config: GenerationConfig | None = None,
             cache: Any = None, attention_mask: Tensor | None = None) -> Tensor | list[list[int]]:
    """``idx (B, T)`` followed by up to ``max_new_tokens`` new tokens: ``(B, T + n)``; or, for a list of prompts
    (token id lists) of any lengths, each prompt followed by its new tokens.

    Args:
        model: a :class:`attnlab.models.GPT` or :class:`~attnlab.models.ModernDecoder` (anything with its
            ``config.context_length``, ``new_cache`` and ``forward(idx, kv_cache=...)`` returning ``.logits``).
            It runs in eval mode (no dropout) and is put back afterwards; it is not changed (the fast path runs its
            accelerated twin). A model with rotary positions decodes past ``context_length``; one with a learned
            position table crops to it and says so (a :class:`~attnlab.generation.PositionTableWarning`).
        idx: the prompt, ``(B, T)`` token ids; or a ragged batch, a list of prompts (token id lists): left-padded
            into one batch with its ``attention_mask`` (:mod:`attnlab.generation.ragged`), each row computed as it
            would be alone, and returned as a list of id lists without the padding (strings:
            :func:`~attnlab.generation.generate_texts`).
        max_new_tokens: how many tokens to add at most.
        config: how to choose and when to stop (:class:`~attnlab.generation.GenerationConfig`); None: its
            defaults (temperature 1, no top-k or top-p, torch's global generator).
        cache: the cache to decode with, made for this model and batch (``model.new_cache(B)``,
            ``KVCache.for_model(model, B, storage="int8")``, ``SinkKVCache.for_model(...)``,
            ``StaticKVCache.for_model(...)`` for ``compile=True``); None: a new one of the kind the config asks for.
        attention_mask: ``(B, T)`` 1 = real token, 0 = padding: prompts of different lengths, left-padded. The
            model masks the padding and counts positions over real tokens; each new token extends the mask with a 1.

    Example:
        >>> from attnlab.models import GPT, GPTConfig
        >>> model = GPT(GPTConfig.from_preset("tiny"))
        >>> generate(model, torch.zeros(1, 3, dtype=torch.long), 5, GenerationConfig(temperature=0)).shape
        torch.Size([1, 8])
        >>> [len(row) for row in generate(model, [[1, 2, 3], [4]], 5, GenerationConfig(temperature=0))]
        [8, 6]
    """
    config = GenerationConfig() if config is None else config
    if not isinstance(idx, Tensor):
        if attention_mask is not None:
            raise ValueError(tr("attention_mask: a list of prompts is padded here; give no attention_mask with it"))
        rows = encode_prompts(idx, None)
        padded, pad_mask = left_pad(rows, next(model.parameters()).device)
        mask = None if bool(pad_mask.all()) else pad_mask  # prompts of one length: nothing to mask
        out = generate(model, padded, max_new_tokens, config, cache, mask)
        return unpad(out, rows, config.stop_tokens)
    new = list(generate_stream(model, idx, max_new_tokens, config, cache, attention_mask))
    return torch.cat([idx, *(t[:, None].to(idx.dtype) for t in new)], dim=1)


def generate_stream(model: Any, idx: Tensor, max_new_tokens: int, config: GenerationConfig | None = None,
                    cache: Any = None, attention_mask: Tensor | None = None) -> Iterator[Tensor]:
    """The new token ids, each ``(B,)``, yielded as soon as each is chosen (arguments: :func:`generate`).

    Everything is checked when this is called, not when the first token is asked for.
    """
    config = GenerationConfig() if config is None else config
    _check(model, idx, max_new_tokens, config, attention_mask)
    cache = _cache(model, idx, max_new_tokens, config, cache, attention_mask)
    warn_if_cropped(model, idx.shape[1], max_new_tokens)
    run = accelerated(model) if config.accelerate else model
    if config.accelerate and next(model.parameters()).is_cpu:
        load_kernels()  # the few-row kernels where they are built; torch's otherwise (never a build here)
    generator = config.sampler(idx.device)
    if config.compile:
        return decode_compiled(run, idx, max_new_tokens, config, generator, cache)
    return decode_loop(run, idx, max_new_tokens, config, generator, attention_mask, cache)


def _check(model: Any, idx: Tensor, max_new_tokens: int, config: GenerationConfig,
           attention_mask: Tensor | None) -> None:
    if not isinstance(config, GenerationConfig):
        raise TypeError(tr("config must be a GenerationConfig or None, got {got}", got=type(config).__name__))
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(tr("max_new_tokens must be an int >= 0, got {max_new_tokens!r}",
                            max_new_tokens=max_new_tokens))
    if not isinstance(idx, Tensor) or idx.dim() != 2 or idx.shape[1] == 0:
        got = tuple(idx.shape) if isinstance(idx, Tensor) else type(idx).__name__
        raise ValueError(tr("idx must be a (B, T) tensor of token ids with T >= 1 (the prompt), got {got}", got=got))
    if attention_mask is not None and (not isinstance(attention_mask, Tensor)
                                       or tuple(attention_mask.shape) != tuple(idx.shape)):
        got = tuple(attention_mask.shape) if isinstance(attention_mask, Tensor) else type(attention_mask).__name__
        raise ValueError(tr("attention_mask must have the prompt's shape (B, T) = {shape}, got {got}",
                            shape=tuple(idx.shape), got=got))
    if config.compile:
        _check_compilable(model, attention_mask)


def _check_compilable(model: Any, attention_mask: Tensor | None) -> None:
    if attention_mask is not None:
        raise ValueError(tr("compile=True decodes prompts of one length; left-padded prompts (attention_mask) need "
                            "compile=False"))
    if not all(hasattr(model, name) for name in ("decode_step", "cache_layout")):
        raise ValueError(tr("compile=True needs a model with a static KV cache and a decode_step (GPT has them), got "
                            "{model_type}; decode it with compile=False", model_type=type(model).__name__))
    scaling = getattr(getattr(model, "rotary", None), "scaling", None)
    if scaling is not None and scaling.type in ("dynamic", "longrope"):
        raise ValueError(tr("compile=True: {scaling} scaling picks its frequencies from the length, read back from "
                            "the device at every step, which one compiled graph cannot do; decode it with "
                            "compile=False", scaling={"dynamic": "dynamic NTK", "longrope": "LongRoPE"}[scaling.type]))


def _cache(model: Any, idx: Tensor, max_new_tokens: int, config: GenerationConfig, cache: Any,
           attention_mask: Tensor | None) -> Any:
    """The cache to decode ``idx (B, T)`` with: the caller's, checked against the model, the batch and (a static
    one) the sequence, or a new one (None without a cache; the compiled loop makes its static one itself)."""
    rows = idx.shape[0]
    if cache is None:
        return None if config.compile or not config.use_cache else model.new_cache(rows)
    if not config.use_cache:
        raise ValueError(tr("cache: use_cache=False recomputes every step without a cache; give no cache with it"))
    if hasattr(cache, "check_fits") and hasattr(model, "cache_layout"):
        cache.check_fits(model.cache_layout(), rows)
    if config.compile and not isinstance(cache, StaticKVCache):
        raise ValueError(tr("cache: compile=True decodes with a StaticKVCache (StaticKVCache.for_model), got a "
                            "{kind}", kind=type(cache).__name__))
    if not config.compile and isinstance(cache, StaticKVCache):
        raise ValueError(tr("cache: a StaticKVCache is the compiled loop's; decode with compile=True, or give a "
                            "dynamic cache (model.new_cache)"))
    if isinstance(cache, SinkKVCache) and attention_mask is not None:
        raise ValueError(tr("cache: a SinkKVCache keeps every row at the same places, so its rows cannot be "
                            "padded; decode left-padded prompts (attention_mask) with model.new_cache"))
    # a static cache keeps its position on the device: read once here, before any step
    held = int(cache.position) if isinstance(cache, StaticKVCache) else getattr(cache, "length", 0)
    if held:
        raise ValueError(tr("cache: it holds {length} positions already; give an empty cache (cache.reset() empties "
                            "one)", length=held))
    if isinstance(cache, StaticKVCache):
        needed = static_positions(model, idx.shape[1], max_new_tokens)
        if cache.context_length < needed:
            raise ValueError(tr("cache: this StaticKVCache has {slots} slots; {t} prompt + {n} new tokens fill "
                                "{needed}: make it with StaticKVCache.for_model(model, {rows}, length={needed})",
                                slots=cache.context_length, t=idx.shape[1], n=max_new_tokens, needed=needed,
                                rows=rows))
    return cache


def static_positions(model: Any, t: int, max_new_tokens: int) -> int:
    """The positions decoding fills in a cache: the prompt of ``t`` tokens and each new token fed back (the last is
    not), at most a learned position table's size (past it the loop crops and recomputes)."""
    limit = position_limit(model)
    filled = t + max(max_new_tokens - 1, 0)
    return filled if limit is None else min(filled, limit)


def warn_if_cropped(model: Any, t: int, max_new_tokens: int) -> None:
    """A :class:`~attnlab.generation.loop.PositionTableWarning` when a model with a learned position table will
    have to crop: its prompt of ``t`` tokens and the ``max_new_tokens - 1`` it feeds back pass the table."""
    limit = position_limit(model)
    fed = t + max_new_tokens - 1
    if limit is not None and max_new_tokens and max(t, fed) > limit:
        warnings.warn(tr("{model}: {t} prompt + {n} new tokens pass its learned position table of {limit} "
                         "positions; from there on each token is computed from the last {limit} tokens alone (crop "
                         "and recompute)", model=type(model).__name__, t=t, n=max_new_tokens, limit=limit),
                      PositionTableWarning, stacklevel=3)
