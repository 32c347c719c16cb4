"""The sinusoidal positional encoding as a picture: positions × dimensions, and a few dimensions as curves.

Low dimensions oscillate fast, high ones slowly; each position gets a unique pattern, and the
encoding of pos + k is a rotation of the encoding of pos (hence a diverging map centred on 0).
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from attnlab.i18n import tr
from attnlab.layers.positional import sinusoidal_table
from attnlab.viz.fonts import drawn_in_every_script


@drawn_in_every_script
def pe_figure(context_length: int = 100, d_model: int = 64, dims: Sequence[int] | None = None) -> Figure:
    """Heatmap of ``PE (context_length, d_model)`` (diverging colour map, -1..1) above curves of ``dims``."""
    pe = sinusoidal_table(context_length, d_model).numpy()  # validates context_length and d_model
    dims = list(dims) if dims is not None else sorted({d for d in (0, 1, 6, 16, d_model // 2) if d < d_model})
    bad = [d for d in dims if not 0 <= d < d_model]
    if bad:
        raise ValueError(tr("dims must be in 0..{value}, got {bad}", value=d_model - 1, bad=bad))
    fig = Figure(figsize=(10, 7), layout="constrained")
    top, bottom = fig.subplots(2, 1, height_ratios=[3, 2])
    image = top.imshow(pe, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    top.set_xlabel(tr("dimension i"))
    top.set_ylabel(tr("position"))
    top.set_title(tr("Sinusoidal positional encoding: PE(pos, 2i) = sin(pos/10000^(2i/d)), PE(pos, 2i+1) = cos(…), "
                     "d = {d_model}", d_model=d_model))
    fig.colorbar(image, ax=top, label=tr("value"))
    for d in dims:
        kind = "sin" if d % 2 == 0 else "cos"
        bottom.plot(range(context_length), pe[:, d], label=tr("dimension {d} ({kind})", d=d, kind=kind))
    bottom.set_xlabel(tr("position"))
    bottom.set_ylabel("PE")
    bottom.legend(loc="upper right", fontsize=8, ncols=2)
    return fig
