"""What a cache needs to know of the model it serves, and the check that a cache fits the model it is given to.

A model says how its cache is laid out in one :class:`CacheLayout` (``model.cache_layout()``): layers, key/value
heads, head size, each layer's window, dtype and device. A cache made for one model and given to another (another
layer count, head count or head size; another batch) is refused, naming both, before a step runs: without the
check the first step would fail deep inside a matmul, or worse, decode from another model's keys.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from attnlab.i18n import tr


class CacheShape(NamedTuple):
    """The shape every layer of a cache has: how many layers, key/value heads per layer, and the head size."""

    num_layers: int
    num_heads: int
    head_dim: int


@dataclass(frozen=True)
class CacheLayout:
    """A model's cache, as the model lays it out.

    Attributes:
        shape: layers, key/value heads per layer, head size.
        windows: per layer, its sliding window (None: every position).
        dtype, device: what the model computes in here (autocast's dtype under autocast).
        position_limit: the most positions the model places (a learned table's size; None: rotary, no limit).
        rotaries: per layer, the rotary embedding that turns its keys (None without RoPE): a sink cache turns keys on.
        model: the model's class name, for messages.
        own_cache: the model's layers keep keys of different shapes (or some keep none): only its own
            ``new_cache`` makes its cache, and the caches of one shape for every layer refuse it (Gemma 4).
    """

    shape: CacheShape
    windows: tuple[int | None, ...]
    dtype: torch.dtype
    device: torch.device
    position_limit: int | None
    rotaries: tuple[Any, ...]
    model: str
    own_cache: bool = False

    @property
    def num_layers(self) -> int:
        return self.shape.num_layers

    @property
    def num_heads(self) -> int:
        return self.shape.num_heads

    @property
    def head_dim(self) -> int:
        return self.shape.head_dim


def layout_of(model: Any, batch: int, *, own: bool = False) -> CacheLayout:
    """``model.cache_layout()``, after checking ``batch``: a positive int; a model whose cache is its own
    (``own_cache``) is refused unless its ``new_cache`` asks (``own``)."""
    if isinstance(batch, bool) or not isinstance(batch, int) or batch < 1:
        raise ValueError(tr("cache: batch must be an int >= 1 (the rows decoded together), got {batch!r}",
                            batch=batch))
    if not hasattr(model, "cache_layout"):
        raise TypeError(tr("cache: {model} has no cache_layout(); a KV cache serves an attnlab decoder (GPT, "
                           "ModernDecoder)", model=type(model).__name__))
    layout = model.cache_layout()
    if layout.own_cache and not own:
        raise ValueError(tr("cache: {model}'s layers keep keys of different shapes, and its shared-KV layers none: "
                            "its cache is its own, model.new_cache(batch)", model=layout.model))
    return layout


class CacheOf:
    """What every cache of a decoder-only model can say about itself: the :class:`CacheShape` it was made for and
    its number of rows."""

    shape: CacheShape
    rows: int

    def check_fits(self, layout: CacheLayout, rows: int) -> None:
        """A ValueError naming both where this cache was made for another shape or another number of rows."""
        if tuple(self.shape) != tuple(layout.shape):
            mine = ", ".join(f"{name}={value}" for name, value in self.shape._asdict().items())
            theirs = ", ".join(f"{name}={value}" for name, value in layout.shape._asdict().items())
            raise ValueError(tr("cache: this {kind} was made for {mine}; {model} has {theirs}: make the cache for "
                                "the model it decodes with", kind=type(self).__name__, mine=mine, model=layout.model,
                                theirs=theirs))
        if self.rows != rows:
            raise ValueError(tr("cache: this {kind} holds {cache_rows} rows; the prompt has {rows}: make the cache "
                                "for the batch it decodes", kind=type(self).__name__, cache_rows=self.rows,
                                rows=rows))

