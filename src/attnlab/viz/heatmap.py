"""Attention weights as heatmaps: one head (query rows, key columns, values written in the cells) or
every head of a layer in a grid. Token labels in any script are drawn with :mod:`attnlab.viz.fonts`, sized
to the number of tokens by :mod:`attnlab.viz.cells`.

The figures are built with ``matplotlib.figure.Figure`` directly (no pyplot), so no window or global
state is involved and they can be saved from any thread. Each axes is placed at an exact size in inches,
so a cell is as large as :func:`~attnlab.viz.cells.cell_layout` planned its text for.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from torch import Tensor

from attnlab.i18n import tr
from attnlab.inspect import Capture, shown_name
from attnlab.viz.cells import CellLayout, cell_layout, grid_side, text_width
from attnlab.viz.fonts import require_glyphs

CMAP = "viridis"
TITLE_PT = 11.0        # panel titles; axis labels and the colour bar's are matplotlib's 10
GAP = 0.2              # inches between panels, and before the colour bar
TICK = 7.0 / 72        # inches from an axes to its tick labels (matplotlib's tick length + pad)
COLORBAR = (0.15, 0.8)  # the colour bar's width and the room for its ticks and label, inches


def _cell_of(ax, shape: tuple[int, int]) -> float:
    """A cell's side in points in an axes placed by someone else (e.g. a constrained layout), as first placed."""
    box = ax.get_position()
    width, height = ax.figure.get_size_inches()
    return 72 * min(box.width * width / shape[1], box.height * height / shape[0])


def draw_weights(ax, weights, tokens: list[str], families: list[str], annotate: bool | None, labels: bool = True,
                 row_tokens: list[str] | None = None, layout: CellLayout | None = None) -> AxesImage:
    """One head's ``(T, T)`` weights on the axes ``ax``; returns the image for a colour bar.

    ``row_tokens``: the queries' tokens when they are not the keys' (cross-attention, ``(T, S)`` weights).
    ``layout``: the text sizes (default: sized to the axes as it stands, writing the weights as ``annotate`` says).
    """
    w = weights.detach().cpu().float().numpy()
    rows = tokens if row_tokens is None else row_tokens
    layout = layout or cell_layout(_cell_of(ax, w.shape), tokens, families, annotate)
    image = ax.imshow(w, cmap=CMAP, vmin=0.0, vmax=1.0, aspect="equal")
    if labels:
        cols_at, rows_at = range(0, len(tokens), layout.step), range(0, len(rows), layout.step)
        ax.set_xticks(cols_at, [tokens[j] for j in cols_at], rotation=layout.rotation, fontsize=layout.fontsize,
                      fontfamily=families)
        ax.set_yticks(rows_at, [rows[i] for i in rows_at], fontsize=layout.fontsize, fontfamily=families)
        ax.set_xlabel(tr("key (attended to)"), fontfamily=families)
        ax.set_ylabel(tr("query (attending)"), fontfamily=families)
    else:
        ax.set_xticks([])
        ax.set_yticks([])
    if layout.value_size is not None:
        for i in range(len(rows)):
            for j in range(len(tokens)):
                ax.text(j, i, f"{w[i, j]:.2f}", ha="center", va="center", fontsize=layout.value_size,
                        color="white" if w[i, j] < 0.6 else "black")
    return image


def _label_room(layout: CellLayout, labels: Sequence[str], families: list[str], along: bool) -> float:
    """Inches the tick labels take beside the axes: their widest width, or (``along`` the x axis, upright) a line."""
    if along and layout.rotation == 0:
        return 1.3 * layout.fontsize / 72
    return max((text_width(s, families, layout.fontsize) for s in labels[::layout.step]), default=0.0) / 72


def weights_figure(maps: Sequence[Tensor], col_tokens: list[str], row_tokens: list[str], *, side: float,
                   panel_titles: Sequence[str], title: str | None = None, axis_labels: tuple[str, str] | None = None,
                   labels: bool | None = True, annotate: bool | None = None, columns: int = 1) -> Figure:
    """Heatmaps of ``maps`` (each ``(T, S)``: ``row_tokens`` down, ``col_tokens`` across) in a grid of ``columns``,
    one colour bar, text sized by :func:`~attnlab.viz.cells.cell_layout` for a grid ``side`` inches long.

    ``labels``: token labels (None: when they need no thinning); ``axis_labels``: (x, y) axis titles, None for none.
    """
    colorbar_label = tr("attention weight")
    families = require_glyphs("".join(col_tokens + row_tokens + [*panel_titles, title or "", colorbar_label,
                                                                 *(axis_labels or ())]))
    t, s = len(row_tokens), len(col_tokens)
    layout = cell_layout(72 * side / max(t, s), col_tokens, families, annotate)
    labels = layout.step == 1 if labels is None else labels
    axis_room = 1.4 * 10 / 72 if axis_labels else 0.0
    left = GAP + (TICK + _label_room(layout, row_tokens, families, False) + axis_room if labels else 0.0)
    bottom = GAP + (TICK + _label_room(layout, col_tokens, families, True) + axis_room if labels else 0.0)
    title_room = 2.0 * TITLE_PT / 72
    w, h = layout.cell * s / 72, layout.cell * t / 72
    panel_w, panel_h = left + w, bottom + h + title_room
    grid_rows, top = math.ceil(len(maps) / columns), (0.5 if title else 0.1)
    fig = Figure(figsize=(columns * panel_w + GAP + sum(COLORBAR), grid_rows * panel_h + top))
    width, height = fig.get_size_inches()
    image = None
    for k, weights in enumerate(maps):
        r, c = divmod(k, columns)
        ax = fig.add_axes(((c * panel_w + left) / width, (height - top - r * panel_h - title_room - h) / height,
                           w / width, h / height))
        image = draw_weights(ax, weights, col_tokens, families, annotate, labels, row_tokens, layout)
        ax.set_title(panel_titles[k], fontfamily=families, fontsize=TITLE_PT)
        ax.set_xlabel(axis_labels[0] if axis_labels and labels else "", fontfamily=families)
        ax.set_ylabel(axis_labels[1] if axis_labels and labels else "", fontfamily=families)
    lowest = height - top - (grid_rows - 1) * panel_h - title_room - h
    cax = fig.add_axes(((columns * panel_w + GAP) / width, lowest / height, COLORBAR[0] / width,
                        (height - top - title_room - lowest) / height))
    assert image is not None  # one panel at least
    fig.colorbar(image, cax=cax).set_label(colorbar_label, fontfamily=families)
    if title:
        fig.suptitle(title, fontfamily=families, y=1 - 0.1 / height, va="top")
    return fig


def head_figure(cap: Capture, layer: int = 0, head: int = 0, annotate: bool | None = None) -> Figure:
    """One head: tokens on both axes, query rows, key columns, colour bar (the weights written when they fit)."""
    cap.check_layer_head(layer, head)
    title = tr("{model_name}: layer {layer}, head {head}", model_name=shown_name(cap.model_name), layer=layer,
               head=head)
    return weights_figure([cap.weights(layer, head)], cap.tokens, cap.tokens, panel_titles=[title],
                          side=grid_side(cap.seq_len, 0.42, 2.5, 24), annotate=annotate,
                          axis_labels=(tr("key (attended to)"), tr("query (attending)")))


def heads_figure(cap: Capture, layer: int = 0, labels: bool | None = None, annotate: bool | None = None) -> Figure:
    """Every head of ``layer`` in a grid of up to four columns, one shared colour bar (token labels while they fit
    unthinned; the weights written when they fit)."""
    cap.check_layer_head(layer)
    h = cap.num_heads if cap.heads_per_layer is None else cap.heads_per_layer[layer]  # this layer's own
    title = tr("{model_name}: layer {layer}, all {num_heads} heads (query rows, key columns)",
               model_name=shown_name(cap.model_name), layer=layer, num_heads=h)
    return weights_figure([cap.weights(layer, k) for k in range(h)], cap.tokens, cap.tokens,
                          side=grid_side(cap.seq_len, 0.3, 1.8, 8), title=title,
                          panel_titles=[tr("head {head}", head=k) for k in range(h)], labels=labels, annotate=annotate,
                          columns=min(h, 4))
