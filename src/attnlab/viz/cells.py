"""How big a heatmap's cells, tick labels and written weights are, from the number of tokens and the labels.

Every heatmap of attnlab (one head, all heads of a layer, a translation's alignment, the report's) is sized
here, so that labels are as large as their cells allow: a few tokens get 11-point labels standing upright and
their weights written in the cells; hundreds of tokens get smaller labels, turned 90° once they no longer fit
side by side, and thinned to every k-th token once even that is too crowded. Text widths are measured with
matplotlib's own text layout (its font fallback included), so a CJK label counts as wide as it is drawn.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from matplotlib.font_manager import FontProperties
from matplotlib.textpath import text_to_path

LABEL_PT = 11.0        # the largest tick label, points
SMALLEST_LABEL_PT = 5.0  # below this, labels are thinned rather than shrunk further
UPRIGHT_PT = 8.0       # x labels shrink down to this size to stay horizontal before they are turned 90°
VALUE_PT = (6.5, 9.0)  # the weights written in the cells: the smallest written by default, the largest
VALUE_TEXT = "0.00"    # what a written weight looks like (two decimals)
FILL = 0.85            # the share of a cell's width a label or a weight may take


@dataclass(frozen=True)
class CellLayout:
    """The sizes of one heatmap's text, in points.

    Attributes:
        cell: a cell's side.
        fontsize: the tick labels (both axes).
        rotation: the x tick labels' angle, 0 (upright) or 90.
        step: every ``step``-th token is labelled (1: all of them).
        value_size: the font of the weights written in the cells; None when they are not written.
    """

    cell: float
    fontsize: float
    rotation: int
    step: int
    value_size: float | None


def text_width(text: str, families: list[str], size: float) -> float:
    """Width in points of ``text`` drawn at ``size`` points in the fallback list ``families``."""
    width, _, _ = text_to_path.get_text_width_height_descent(text, FontProperties(family=families, size=size),
                                                             ismath=False)
    return float(width)


def cell_layout(cell: float, col_labels: list[str], families: list[str], annotate: bool | None = None) -> CellLayout:
    """The text sizes for cells of side ``cell`` points whose columns are labelled ``col_labels``.

    ``annotate``: write the weights (True), do not (False), or write them when they fit at a legible size (None).
    """
    fontsize = min(LABEL_PT, 0.8 * cell)  # a label's line (≈ 1.2 × its size) stays within its row
    step = math.ceil(SMALLEST_LABEL_PT / fontsize) if fontsize < SMALLEST_LABEL_PT else 1
    fontsize = max(fontsize, SMALLEST_LABEL_PT)
    rotation = 90
    widest = max((text_width(label, families, fontsize) for label in col_labels), default=0.0)
    if step == 1 and widest > 0:
        upright = fontsize * min(1.0, FILL * cell / widest)  # the size at which every x label fits its column
        if upright >= min(fontsize, UPRIGHT_PT):
            fontsize, rotation = upright, 0
    fit = min(VALUE_PT[1], FILL * cell / (text_width(VALUE_TEXT, families, 1.0) or 1.0))
    value_size = fit if annotate or (annotate is None and fit >= VALUE_PT[0]) else None
    return CellLayout(cell=cell, fontsize=fontsize, rotation=rotation, step=step, value_size=value_size)


def grid_side(n: float, per_token: float, smallest: float, largest: float) -> float:
    """The longer side of a heatmap of ``n`` tokens, inches: ``per_token`` each, within [smallest, largest]."""
    return min(max(per_token * n, smallest), largest)
