"""How big is the cache, as a picture: each real model's cache for one sequence against its length.

Both axes are logarithmic, so a cache that grows with the length is a straight line (of slope 1) and the lines'
heights are the bytes a token costs; a window bends its layers' line flat once it is full, a linear-attention
layer's state is flat from the first token.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from matplotlib.figure import Figure

from attnlab.i18n import _, tr
from attnlab.inspect.cache_size import RealModel, real_models
from attnlab.models.caches.size import cache_bytes
from attnlab.viz.fonts import drawn_in_every_script

GB = 10**9  # decimal, as the book counts (17.18 GB)


@drawn_in_every_script
def cache_size_figure(max_tokens: int = 131072, dtype: torch.dtype = torch.bfloat16,
                      models: Sequence[RealModel] | None = None) -> Figure:
    """GB of cache (one sequence, keys and values in ``dtype``) at 1 to ``max_tokens`` tokens, a line a model."""
    lengths = sorted({round(max_tokens ** (i / 48)) for i in range(49)} | {max_tokens})
    fig = Figure(figsize=(9, 5.5), layout="constrained")
    ax = fig.subplots()
    for model in models if models is not None else real_models():
        sizes = model.config().cache_sizes()
        ax.plot(lengths, [cache_bytes(sizes, t, dtype) / GB for t in lengths],
                label=f"{model.label}: {_(model.mechanism)}")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(tr("tokens in the sequence"))
    ax.set_ylabel(tr("cache (GB, {dtype})", dtype=str(dtype).removeprefix("torch.")))
    ax.set_title(tr("How big is the cache: one sequence, every layer"))
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    return fig
