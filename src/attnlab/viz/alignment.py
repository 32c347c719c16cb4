"""Cross-attention as an alignment: target tokens down, source tokens across, CJK labels drawn.

The picture of "Attention Is All You Need" and of Bahdanau et al.: each row is one decoding step (the token
it wrote), each column a source token, and a row's weights (summing to 1) say where that step read. Built on
:func:`attnlab.viz.heatmap.draw_weights` and :mod:`attnlab.viz.fonts`.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from attnlab.inspect.encoder_decoder import Seq2SeqCapture
from attnlab.viz.fonts import require_glyphs
from attnlab.viz.heatmap import draw_weights


def alignment_weights(cap: Seq2SeqCapture, layer: int | None = None, head: int | None = None):
    """``(T, S)`` cross-attention of ``layer`` (default: the last) and ``head`` (default: the mean of the heads)."""
    layer = len(cap.cross) - 1 if layer is None else layer
    cap.check_layer_head("cross", layer, head)
    maps = cap.cross[layer]
    return (maps.mean(0) if head is None else maps[head]), layer


def alignment_figure(cap: Seq2SeqCapture, layer: int | None = None, head: int | None = None,
                     annotate: bool | None = None, title: str | None = None) -> Figure:
    """One cross-attention map as a heatmap (values written in the cells when it is small)."""
    weights, layer = alignment_weights(cap, layer, head)
    t, s = weights.shape
    which = "mean of the heads" if head is None else f"head {head}"
    title = title or f"{cap.model_name}: cross-attention, layer {layer}, {which}"
    families = require_glyphs("".join(cap.source_tokens + cap.target_tokens) + title)
    annotate = t * s <= 400 if annotate is None else annotate
    fig = Figure(figsize=(min(max(4.0, 0.42 * s + 2.2), 24.0), min(max(3.0, 0.42 * t + 1.8), 24.0)))
    ax = fig.add_subplot()
    image = draw_weights(ax, weights, cap.source_tokens, families, annotate, row_tokens=cap.target_tokens)
    ax.set_xlabel("source (keys, values: the encoder's output)")
    ax.set_ylabel("target (queries: the token each step wrote)")
    ax.set_title(title, fontfamily=families, fontsize=10)
    fig.colorbar(image, ax=ax, label="attention weight", fraction=0.046, pad=0.04)
    return fig
