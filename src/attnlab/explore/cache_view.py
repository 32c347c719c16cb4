"""Generating, and what the cache keeps: each new token's attention over the positions its cache still holds.

The tokens are ``generate``'s (:func:`~attnlab.explore.next_token.continue_ids`). Then the model reads them again
one by one into a cache of the same kind, each step its forward with ``kv_cache=`` and ``return_weights=True``,
and the page shows, per layer, the positions whose keys the cache kept and the weight the new token gave each:

* ``full``: the model's own cache, every position (a sliding-window layer's rolling cache keeps its last
  ``sliding_window``); a learned position table that is full makes ``generate`` crop and recompute, and the view
  shows the window read then;
* ``sink``: StreamingLLM's: the first ``sink_tokens`` positions for ever, and the last ``sliding_window``.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import torch

from attnlab.explore.entry import Entry, Tokens
from attnlab.explore.next_token import Sampling, continue_ids
from attnlab.explore.reading import token_text
from attnlab.generation.loop import Steps
from attnlab.i18n import tr
from attnlab.models import LanguageModel, SinkKVCache

CACHES = ("full", "sink")


@dataclass(frozen=True)
class CacheChoice:
    """Which cache decodes: ``kind`` ``"full"`` or ``"sink"``, the latter with ``sink_tokens`` (≥ 0) and
    ``sliding_window`` (≥ 1)."""

    kind: str = "full"
    sink_tokens: int | None = None
    sliding_window: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in CACHES:
            raise ValueError(tr("cache: expected one of {choices}, got {kind!r}", choices=", ".join(CACHES),
                                kind=self.kind))
        if self.kind == "full" and (self.sink_tokens is not None or self.sliding_window is not None):
            raise ValueError(tr("cache: sink_tokens and sliding_window belong to the sink cache; give them with "
                                "kind \"sink\""))
        if self.kind == "sink" and (self.sink_tokens is None or self.sliding_window is None):
            raise ValueError(tr("cache: the sink cache needs sink_tokens and sliding_window, got {sink_tokens!r} "
                                "and {sliding_window!r}", sink_tokens=self.sink_tokens,
                                sliding_window=self.sliding_window))

    def new(self, model: Any) -> Any:
        if self.kind == "sink":
            assert self.sink_tokens is not None  # __post_init__ checked it is given
            return SinkKVCache.for_model(model, 1, sink_tokens=self.sink_tokens, sliding_window=self.sliding_window)
        return model.new_cache(1)


def kept_positions(layer: Any) -> list[int]:
    """The position of each key a layer's cache handed the last token, in the cache's order."""
    if hasattr(layer, "returned_positions"):  # a rolling cache: a ring of the last sliding_window
        return [int(p) for p in layer.returned_positions()]
    if hasattr(layer, "sink_tokens"):  # the sinks first, then the window oldest first (models/caches/sink.py)
        n, capacity, sinks = layer.length, layer.capacity, layer.sink_tokens
        return list(range(n)) if n <= capacity else [*range(sinks), *range(n - capacity + sinks, n)]
    return list(range(layer.length))


@torch.no_grad()
def generate_view(entry: Entry, prompt: Tokens, max_new_tokens: int, sampling: Sampling,
                  cache: CacheChoice) -> dict[str, Any]:
    """``POST /api/generate``'s answer: the tokens ``generate`` appends to ``prompt``, and for each one its
    attention over what ``cache`` holds (see the module)."""
    if entry.kind != "decoder":
        raise ValueError(tr("generate: {name} is not a decoder (it does not continue a text)", name=entry.name))
    if cache.kind not in entry.caches():
        raise ValueError(tr("cache: {name} cannot decode with a {kind} cache (its caches: {choices})",
                            name=entry.name, kind=cache.kind, choices=", ".join(entry.caches())))
    model, idx = entry.model, torch.tensor([prompt.ids])
    out = continue_ids(model, idx, max_new_tokens, sampling, cache.new(model) if cache.kind == "sink" else None)
    new = [int(i) for i in out[0, idx.shape[1]:]]
    return {"ids": new, "tokens": [token_text(entry.tokenizer, i) for i in new],
            "appended": appended_text(entry.tokenizer, list(prompt.ids), new),
            "sampling": {**sampling.as_dict(), "seed": sampling.seed},
            "cache": {"kind": cache.kind, "sink_tokens": cache.sink_tokens, "sliding_window": cache.sliding_window},
            "prompt": list(prompt.tokens), "steps": replay(entry, list(prompt.ids), new, cache)}


def appended_text(tokenizer: Any, prompt: list[int], new: list[int]) -> str:
    """What the new tokens add to the text: the decoded whole after the decoded prompt (a byte-level token may
    complete a character the prompt ended inside)."""
    before, whole = tokenizer.decode(prompt), tokenizer.decode(prompt + new)
    return whole[len(before):] if whole.startswith(before) else tokenizer.decode(new)


def replay(entry: Entry, prompt: list[int], new: list[int], choice: CacheChoice) -> list[dict[str, Any]]:
    """Each new token fed after the prompt into a fresh cache of ``choice``'s kind, as ``generate`` fed it:
    ``{"id", "token", "position", "layers": [{"kept": positions, "weights": (H, kept)}]}``."""
    model = entry.model
    assert isinstance(model, LanguageModel)  # generate_view serves decoders only
    limit = model.position_limit
    cache = choice.new(model)
    Steps(model, cache, None).prefill(torch.tensor([prompt]))  # generate's prefill (a sink cache's past its places)
    seq, steps = list(prompt), []
    for token in new:
        seq.append(token)
        if cache is not None and (limit is None or cache.length < limit):
            out = model(torch.tensor([[token]]), kv_cache=cache, return_weights=True)
            kept = [kept_positions(layer) for layer in cache.layers]
        else:  # the position table is full: generate crops to its last `limit` tokens and recomputes
            assert limit is not None  # only a position table runs out
            cache, window = None, seq[-limit:]
            out = model(torch.tensor([window]), return_weights=True)
            kept = [list(range(len(seq) - len(window), len(seq)))] * entry.num_layers
        steps.append({"id": token, "token": token_text(entry.tokenizer, token), "position": len(seq) - 1,
                      "layers": [{"kept": k, "weights": a[0, :, -1].float().tolist()}
                                 for k, a in zip(kept, out.attentions, strict=True)]})
    return steps
