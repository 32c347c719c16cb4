"""Head pruning's pictures (Michel et al., 2019): the loss as more and more heads are removed, and each head's
importance and ablation as a layer × head grid."""

from __future__ import annotations

from typing import Any

from matplotlib.figure import Figure

from attnlab.i18n import tr
from attnlab.viz.fonts import drawn_in_every_script


@drawn_in_every_script
def pruning_curve_figure(result: dict[str, Any]) -> Figure:
    """Loss against the fraction of heads removed, least important first; the loss with every head dashed."""
    fig = Figure(figsize=(6.5, 4.2), layout="constrained")
    ax = fig.add_subplot()
    curve = result["curve"]
    ax.plot([p["fraction"] for p in curve], [p["loss"] for p in curve], "o-", color="tab:red",
            label=tr("heads removed, least important first"))
    ax.axhline(result["base_loss"], color="grey", ls="--", lw=0.8, label=tr("every head"))
    ax.set_xlabel(tr("fraction of heads removed"))
    ax.set_ylabel(tr("held-out loss (nats / token)"))
    ax.set_title(tr("pruning {layers} × {heads} heads", layers=result["num_layers"], heads=result["num_heads"]))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


@drawn_in_every_script
def head_grid_figure(result: dict[str, Any]) -> Figure:
    """Gradient importance and the ablation's loss change, one cell per head (rows: layers)."""
    panels = [("importance", tr("gradient importance (per layer, L2-normalised)"), "viridis"),
              ("ablation", tr("loss change with the head removed alone"), "magma")]
    layers, heads = result["num_layers"], result["num_heads"]
    fig = Figure(figsize=(2 * (0.55 * heads + 2.0), 0.5 * layers + 1.8), layout="constrained")
    for ax, (key, title, cmap) in zip(fig.subplots(1, 2), panels, strict=True):
        values = result[key]
        image = ax.imshow(values, cmap=cmap, aspect="auto")
        for layer in range(layers):
            for head in range(heads):
                ax.text(head, layer, f"{values[layer][head]:.2f}", ha="center", va="center", fontsize=6,
                        color="white")
        ax.set_xticks(range(heads))
        ax.set_yticks(range(layers))
        ax.set_xlabel(tr("head"))
        ax.set_ylabel(tr("layer"))
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, shrink=0.8)
    return fig
