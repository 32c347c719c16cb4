"""Raw attention, attention rollout and attention flow side by side, as in Abnar & Zuidema's figures (2020)."""

from __future__ import annotations

from matplotlib.figure import Figure
from torch import Tensor

from attnlab.i18n import tr
from attnlab.viz.fonts import drawn_in_every_script, require_glyphs
from attnlab.viz.heatmap import draw_weights


@drawn_in_every_script
def rollout_figure(tokens: list[str], raw: Tensor, rolled: Tensor, flow: Tensor | None, *, layer: int,
                   title: str = "") -> Figure:
    """Three ``(T, T)`` maps over ``tokens``: ``raw`` (one layer's weights, the heads' mean), ``rolled`` (rollout)
    and ``flow`` (None: too long an input, the panel says so). Rows: the queries; columns: the input tokens."""
    families = require_glyphs("".join(tokens) + title)
    t = len(tokens)
    size = min(max(3.2, 0.32 * t + 1.6), 9.0)
    fig = Figure(figsize=(3 * size + 1.2, size + 0.8), layout="constrained")
    axes = fig.subplots(1, 3)
    panels = [(raw, tr("raw attention (layer {layer}, mean of heads)", layer=layer)), (rolled, tr("attention rollout")),
              (flow, tr("attention flow"))]
    image = None
    for ax, (weights, name) in zip(axes, panels, strict=True):
        if weights is None:
            ax.set_axis_off()
            ax.text(0.5, 0.5, tr("attention flow: not computed\nfor {t} tokens (too long)", t=t), ha="center",
                    va="center")
            continue
        image = draw_weights(ax, weights, tokens, families, annotate=False, labels=t <= 40)
        ax.set_title(name, fontsize=10)
        if weights is not raw and t <= 40:  # rollout and flow compose every layer: top-layer rows, input columns
            ax.set_xlabel(tr("input token"))
            ax.set_ylabel(tr("token at the top layer"))
    if title:
        fig.suptitle(title, fontfamily=families)
    assert image is not None  # one panel at least
    fig.colorbar(image, ax=axes, label=tr("weight"), shrink=0.8)
    return fig
