"""Autoregressive decoding with a KV cache.

The prompt is run once (prefill), filling the cache; then each new token is a forward pass of
length 1 that attends to the cached keys and values: O(T) work per token instead of O(T²).

With ``compile=True`` the steps run as one compiled graph each (:mod:`attnlab.generation.compiled_decode`);
eager or compiled, the tokens come from one loop (:mod:`attnlab.generation.loop`).

Beyond the context (:mod:`attnlab.generation.loop`): a model with rotary positions decodes on, its cache growing
(a sliding-window layer's rolling cache stays at its window), as transformers' ``generate`` does. A model with a
learned position table cannot place a token past it, nor slide its window in the cache (every cached key was
computed at its old position): once the table is full, each further token is computed exactly like the no-cache
loop, by a full forward pass over the last ``position_limit`` tokens (crop and recompute), and ``generate`` warns
before it starts.
"""

from __future__ import annotations

import functools
import warnings
from collections.abc import Iterator, Sequence
from typing import Any

import torch
from torch import Tensor

from attnlab.functional.kernels import ensure_cpu_kernels
from attnlab.functional.linear import KERNEL_ROWS
from attnlab.generation.compiled_decode import decode_compiled
from attnlab.generation.loop import PositionTableWarning, decode_loop, last_logits, position_limit
from attnlab.generation.ragged import encode_prompts, left_pad, unpad
from attnlab.generation.sampling import check_sampling
from attnlab.i18n import tr


def _check(idx: Tensor, max_new_tokens: int, temperature: float, top_k, top_p, eos_token_id,
           attention_mask: Tensor | None = None) -> None:
    if isinstance(max_new_tokens, bool) or not isinstance(max_new_tokens, int) or max_new_tokens < 0:
        raise ValueError(tr("max_new_tokens must be an int >= 0, got {max_new_tokens!r}",
                            max_new_tokens=max_new_tokens))
    check_sampling(temperature, top_k, top_p)
    if not isinstance(idx, Tensor) or idx.dim() != 2 or idx.shape[1] == 0:
        got = tuple(idx.shape) if isinstance(idx, Tensor) else type(idx).__name__
        raise ValueError(tr("idx must be a (B, T) tensor of token ids with T >= 1 (the prompt), got {got}", got=got))
    if eos_token_id is not None and (isinstance(eos_token_id, bool) or not isinstance(eos_token_id, int)
                                     or eos_token_id < 0):
        raise ValueError(tr("eos_token_id must be None or a token id >= 0, got {eos_token_id!r}",
                            eos_token_id=eos_token_id))
    if attention_mask is not None and (not isinstance(attention_mask, Tensor)
                                       or tuple(attention_mask.shape) != tuple(idx.shape)):
        got = tuple(attention_mask.shape) if isinstance(attention_mask, Tensor) else type(attention_mask).__name__
        raise ValueError(tr("attention_mask must have the prompt's shape (B, T) = {shape}, got {got}",
                            shape=tuple(idx.shape), got=got))


def generate_stream(model: Any, idx: Tensor, max_new_tokens: int, temperature: float = 1.0,
                    top_k: int | None = None, top_p: float | None = None,
                    generator: torch.Generator | None = None, use_cache: bool = True,
                    eos_token_id: int | None = None, attention_mask: Tensor | None = None,
                    compile: bool = False, int8_cache: bool = False, sink_tokens: int | None = None,
                    sliding_window: int | None = None) -> Iterator[Tensor]:
    """The new token ids, each ``(B,)``, yielded as soon as each is chosen (arguments: :func:`generate`).

    Everything is checked when this is called, not when the first token is asked for.
    """
    _check(idx, max_new_tokens, temperature, top_k, top_p, eos_token_id, attention_mask)
    if not isinstance(compile, bool):
        raise ValueError(tr("compile must be True or False, got {compile!r}", compile=compile))
    if not isinstance(int8_cache, bool):
        raise ValueError(tr("int8_cache must be True or False, got {int8_cache!r}", int8_cache=int8_cache))
    if int8_cache and (compile or not use_cache):
        raise ValueError(tr("int8_cache=True keeps the dynamic KV cache in int8: it needs use_cache=True and "
                            "compile=False"))
    if compile and not use_cache:
        raise ValueError(tr("compile=True decodes with a static KV cache; it cannot be combined with use_cache=False"))
    if compile and attention_mask is not None:
        raise ValueError(tr("compile=True decodes prompts of one length; left-padded prompts (attention_mask) need "
                            "compile=False"))
    if compile and not all(hasattr(model, name) for name in ("decode_step", "new_cache")):
        raise ValueError(tr("compile=True needs a model with a static KV cache and a decode_step (GPT has them), got "
                            "{model_type}; decode it with compile=False", model_type=type(model).__name__))
    scaling = getattr(getattr(model, "rotary", None), "scaling", None)
    if compile and scaling is not None and scaling.type in ("dynamic", "longrope"):
        raise ValueError(tr("compile=True: {scaling} scaling picks its frequencies from the length, read back from "
                            "the device at every step, which one compiled graph cannot do; decode it with "
                            "compile=False", scaling={"dynamic": "dynamic NTK", "longrope": "LongRoPE"}[scaling.type]))
    if sink_tokens is not None and (compile or int8_cache or not use_cache or attention_mask is not None):
        raise ValueError(tr("sink_tokens: a sink cache decodes eagerly, in its own cache, rows of one length; it "
                            "cannot be combined with compile, int8_cache, use_cache=False or an attention_mask"))
    if sink_tokens is None and sliding_window is not None:
        raise ValueError(tr("sliding_window={sliding_window} is the window of a sink cache; give sink_tokens with "
                            "it (0: the window alone)", sliding_window=sliding_window))
    warn_if_cropped(model, idx.shape[1], max_new_tokens)
    if decodes_on_cpu_kernels(model, idx.shape[0]):
        ensure_cpu_kernels()  # built once, about a minute
    if compile:
        return decode_compiled(model, idx, max_new_tokens, temperature, top_k, top_p, generator, eos_token_id)
    step = functools.partial(last_logits, model)
    kind = {"int8": True} if int8_cache else {}
    if sink_tokens is not None:
        kind = {"sink_tokens": sink_tokens, "sliding_window": sliding_window}
    cache = model.new_cache(idx.shape[0], **kind) if use_cache else None
    prefill = functools.partial(prefill_in_places, model) if sink_tokens is not None else step
    return decode_loop(model, idx, max_new_tokens, temperature, top_k, top_p, generator, eos_token_id, attention_mask,
                       cache, prefill=prefill, step=step)


def decodes_on_cpu_kernels(model: Any, rows: int) -> bool:
    """Whether decoding ``rows`` sequences runs attnlab's fp32 CPU kernel (:mod:`attnlab.functional.linear`): a model
    in fp32 on the CPU, at most ``KERNEL_ROWS`` rows a step."""
    weight = next(model.parameters())
    return weight.is_cpu and weight.dtype == torch.float32 and rows <= KERNEL_ROWS


def prefill_in_places(model: Any, prompt: Tensor, cache: Any) -> Tensor:
    """A sink cache's prefill: as much of ``prompt (B, T)`` as its places hold in one pass, the rest token by
    token (each evicting the window's oldest); the last position's logits."""
    logits = last_logits(model, prompt[:, : cache.capacity], cache)
    for t in range(cache.capacity, prompt.shape[1]):
        logits = last_logits(model, prompt[:, t : t + 1], cache)
    return logits


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


def generate(model: Any, idx: Tensor | Sequence[Any], max_new_tokens: int, temperature: float = 1.0,
             top_k: int | None = None, top_p: float | None = None, generator: torch.Generator | None = None,
             use_cache: bool = True, eos_token_id: int | None = None, attention_mask: Tensor | None = None,
             compile: bool = False, tokenizer: Any = None, int8_cache: bool = False, sink_tokens: int | None = None,
             sliding_window: int | None = None) -> Tensor | list[list[int]] | list[str]:
    """``idx (B, T)`` followed by up to ``max_new_tokens`` new tokens: ``(B, T + n)``; or, for a list of prompts
    of any lengths, each prompt followed by its new tokens.

    Args:
        model: a :class:`attnlab.models.GPT` or :class:`~attnlab.models.ModernDecoder` (anything with its
            ``config.context_length``, ``new_cache`` and ``forward(idx, kv_cache=...)`` returning ``.logits``).
            It runs in eval mode (no dropout) and is put back afterwards. A model with rotary positions decodes
            past ``context_length``; one with a learned position table crops to it and says so (a
            :class:`~attnlab.generation.PositionTableWarning`).
        idx: the prompt, ``(B, T)`` token ids; or a ragged batch, a list of prompts (token id lists, or strings
            with ``tokenizer``): left-padded into one batch with its ``attention_mask``
            (:mod:`attnlab.generation.ragged`), each row computed as it would be alone, and returned as a list
            (of id lists, or of strings) without the padding.
        max_new_tokens: how many tokens to add at most.
        temperature: 0 is greedy decoding (argmax); see :mod:`attnlab.generation.sampling`.
        top_k, top_p: keep only the k most likely tokens / the smallest set holding probability p.
        generator: makes sampling reproducible.
        use_cache: False recomputes the whole window at every step (the reference the cache is tested against).
        eos_token_id: stop once every row has produced this token; rows that finished earlier are filled with it.
        attention_mask: ``(B, T)`` 1 = real token, 0 = padding: prompts of different lengths, left-padded. The
            model masks the padding and counts positions over real tokens (its forward must take
            ``attention_mask``, as GPT's and ModernDecoder's do); each new token extends the mask with a 1.
        compile: decode with a static KV cache and a step compiled by ``torch.compile(fullgraph=True)``, on CUDA
            captured in a CUDA graph (see :mod:`attnlab.generation.compiled_decode`); the same tokens as the eager
            loop. The first call compiles (seconds); later calls reuse the step. Needs the model's
            ``new_cache(batch, static=True)`` and ``decode_step``.
        tokenizer: encodes string prompts and decodes the results (anything with ``encode`` and ``decode``).
        int8_cache: keep the KV cache's keys and values in int8 (:class:`~attnlab.models.Int8KVCache`): about half
            the memory of a bf16 cache, for long contexts; the logits move a little (docs/decoding.md).
        sink_tokens, sliding_window: decode with StreamingLLM's cache (:class:`~attnlab.models.SinkKVCache`): the
            first ``sink_tokens`` positions and the last ``sliding_window`` kept, at their places in the cache;
            memory bounded for an endless stream (rotary models, prompts of one length; docs/modern.md).

    Example:
        >>> from attnlab.models import GPT, GPTConfig
        >>> model = GPT(GPTConfig.from_preset("tiny"))
        >>> generate(model, torch.zeros(1, 3, dtype=torch.long), 5, temperature=0).shape
        torch.Size([1, 8])
        >>> [len(row) for row in generate(model, [[1, 2, 3], [4]], 5, temperature=0)]
        [8, 6]
    """
    if not isinstance(idx, Tensor):
        if attention_mask is not None:
            raise ValueError(tr("attention_mask: a list of prompts is padded here; give no attention_mask with it"))
        rows = encode_prompts(idx, tokenizer)
        padded, mask = left_pad(rows, next(model.parameters()).device)
        mask = None if bool(mask.all()) else mask  # prompts of one length: nothing to mask
        out = generate(model, padded, max_new_tokens, temperature, top_k, top_p, generator, use_cache, eos_token_id,
                       mask, compile, int8_cache=int8_cache, sink_tokens=sink_tokens, sliding_window=sliding_window)
        result = unpad(out, rows, eos_token_id)
        texts = tokenizer is not None and all(isinstance(p, str) for p in idx)
        return [tokenizer.decode(r) for r in result] if texts else result
    new = list(generate_stream(model, idx, max_new_tokens, temperature, top_k, top_p, generator, use_cache,
                               eos_token_id, attention_mask, compile, int8_cache, sink_tokens, sliding_window))
    return torch.cat([idx, *(t[:, None].to(idx.dtype) for t in new)], dim=1)
