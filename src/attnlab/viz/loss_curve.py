"""The loss curve of a training run: per-step training loss and the periodic train/validation estimates.

Built with ``matplotlib.figure.Figure`` (no pyplot, no window); write it with :func:`attnlab.viz.figures.save_figure`.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure

from attnlab.i18n import tr
from attnlab.viz.fonts import drawn_in_every_script


@drawn_in_every_script
def loss_figure(train: Sequence[tuple[int, float]], evals: Sequence[tuple[int, float, float]],
                title: str | None = None) -> Figure:
    """Training loss per step ``(step, loss)`` (thin) and the estimates ``(step, train, val)`` (markers)."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    if train:
        ax.plot(*zip(*train, strict=True), lw=0.6, alpha=0.5, label=tr("training loss (each step)"))
    if evals:
        steps, on_train, on_val = zip(*evals, strict=True)
        ax.plot(steps, on_train, "o-", ms=3, label=tr("training split (estimate)"))
        ax.plot(steps, on_val, "s-", ms=3, label=tr("validation split (estimate)"))
    ax.set_xlabel(tr("step"))
    ax.set_ylabel(tr("cross-entropy (nats / token)"))
    ax.set_title(tr("training loss") if title is None else title)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig
