"""The loss curve of a training run: per-step training loss and the periodic train/validation estimates.

Built with ``matplotlib.figure.Figure`` (no pyplot, no window); write it with :func:`attnlab.viz.figures.save_figure`.
"""

from __future__ import annotations

from collections.abc import Sequence

from matplotlib.figure import Figure


def loss_figure(train: Sequence[tuple[int, float]], evals: Sequence[tuple[int, float, float]],
                title: str = "training loss") -> Figure:
    """Training loss per step ``(step, loss)`` (thin) and the estimates ``(step, train, val)`` (markers)."""
    fig = Figure(figsize=(7, 4))
    ax = fig.add_subplot()
    if train:
        ax.plot(*zip(*train, strict=True), lw=0.6, alpha=0.5, label="train (per step)")
    if evals:
        steps, tr, va = zip(*evals, strict=True)
        ax.plot(steps, tr, "o-", ms=3, label="train (eval)")
        ax.plot(steps, va, "s-", ms=3, label="val (eval)")
    ax.set_xlabel("step")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title(title)
    ax.grid(alpha=0.3)
    ax.legend()
    return fig
