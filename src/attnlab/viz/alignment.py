"""Cross-attention as an alignment: target tokens down, source tokens across, CJK labels drawn.

The picture of "Attention Is All You Need" and of Bahdanau et al.: each row is one decoding step (the token
it wrote), each column a source token, and a row's weights (summing to 1) say where that step read. Built on
:func:`attnlab.viz.heatmap.weights_figure`, like every heatmap of attnlab.
"""

from __future__ import annotations

from matplotlib.figure import Figure

from attnlab.i18n import tr
from attnlab.inspect import shown_name
from attnlab.inspect.encoder_decoder import Seq2SeqCapture
from attnlab.viz.cells import grid_side
from attnlab.viz.heatmap import weights_figure


def alignment_weights(cap: Seq2SeqCapture, layer: int | None = None, head: int | None = None):
    """``(T, S)`` cross-attention of ``layer`` (default: the last) and ``head`` (default: the mean of the heads)."""
    layer = len(cap.cross) - 1 if layer is None else layer
    cap.check_layer_head("cross", layer, head)
    maps = cap.cross[layer]
    return (maps.mean(0) if head is None else maps[head]), layer


def alignment_figure(cap: Seq2SeqCapture, layer: int | None = None, head: int | None = None,
                     annotate: bool | None = None, title: str | None = None) -> Figure:
    """One cross-attention map as a heatmap (the weights written in the cells when they fit)."""
    weights, layer = alignment_weights(cap, layer, head)
    which = tr("mean of the heads") if head is None else tr("head {head}", head=head)
    title = title or tr("{model_name}: cross-attention, layer {layer}, {which}", model_name=shown_name(cap.model_name),
                        layer=layer, which=which)
    return weights_figure([weights], cap.source_tokens, cap.target_tokens, panel_titles=[title],
                          side=grid_side(max(weights.shape), 0.42, 2.5, 24), annotate=annotate,
                          axis_labels=(tr("source (keys, values: the encoder's output)"),
                                       tr("target (queries: the token each step wrote)")))
