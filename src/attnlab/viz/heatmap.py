"""Attention weights as heatmaps: one head (query rows, key columns, values written in the cells) or
every head of a layer in a grid. Token labels in any script are drawn with :mod:`attnlab.viz.fonts`.

The figures are built with ``matplotlib.figure.Figure`` directly (no pyplot), so no window or global
state is involved and they can be saved from any thread.
"""

from __future__ import annotations

import math

from matplotlib.figure import Figure

from attnlab.inspect import Capture
from attnlab.viz.fonts import require_glyphs

CMAP = "viridis"


def draw_weights(ax, weights, tokens: list[str], families: list[str], annotate: bool, labels: bool = True,
                 row_tokens: list[str] | None = None):
    """One head's ``(T, T)`` weights on the axes ``ax``; returns the image for a colour bar.

    ``row_tokens``: the queries' tokens when they are not the keys' (cross-attention, ``(T, S)`` weights).
    """
    w = weights.detach().cpu().numpy()
    image = ax.imshow(w, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="equal")
    rows = tokens if row_tokens is None else row_tokens
    if labels:
        ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontfamily=families)
        ax.set_yticks(range(len(rows)), rows, fontfamily=families)
        ax.set_xlabel("key (attended to)")
        ax.set_ylabel("query (attending)")
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if annotate:
        for i in range(len(rows)):
            for j in range(len(tokens)):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=7,
                        color="white" if w[i, j] < 0.6 else "black")
    return image


def head_figure(cap: Capture, layer: int = 0, head: int = 0, annotate: bool | None = None) -> Figure:
    """One head: tokens on both axes, query rows, key columns, colour bar (values written when T ≤ 16)."""
    cap.check_layer_head(layer, head)
    families = require_glyphs("".join(cap.tokens) + cap.model_name)
    t = cap.seq_len
    annotate = t <= 16 if annotate is None else annotate
    size = min(max(4.0, 0.45 * t + 2.0), 24.0)
    fig = Figure(figsize=(size + 1.2, size))
    ax = fig.add_subplot()
    image = draw_weights(ax, cap.weights(layer, head), cap.tokens, families, annotate)
    ax.set_title(f"{cap.model_name}: layer {layer}, head {head}", fontfamily=families)
    fig.colorbar(image, ax=ax, label="attention weight", fraction=0.046, pad=0.04)
    return fig


def heads_figure(cap: Capture, layer: int = 0, labels: bool | None = None) -> Figure:
    """Every head of ``layer`` in a grid, one shared colour bar (token labels when T ≤ 24)."""
    cap.check_layer_head(layer)
    families = require_glyphs("".join(cap.tokens) + cap.model_name)
    h, t = cap.num_heads, cap.seq_len
    labels = t <= 24 if labels is None else labels
    cols = min(h, 4)
    rows = math.ceil(h / cols)
    cell = 2.2 + (0.18 * t if labels else 0.0)
    fig = Figure(figsize=(cols * cell + 1.0, rows * cell + 0.6), layout="constrained")
    axes = fig.subplots(rows, cols, squeeze=False)
    image = None
    for k, ax in enumerate(axes.flat):
        if k >= h:
            ax.set_axis_off()
            continue
        image = draw_weights(ax, cap.weights(layer, k), cap.tokens, families, annotate=False, labels=labels)
        if labels:
            ax.set_xlabel("")
            ax.set_ylabel("")
            ax.tick_params(labelsize=6)
        ax.set_title(f"head {k}", fontsize=9)
    fig.suptitle(f"{cap.model_name}: layer {layer}, all {h} heads (query rows, key columns)",
                 fontfamily=families)
    fig.colorbar(image, ax=axes, label="attention weight", shrink=0.8)
    return fig
